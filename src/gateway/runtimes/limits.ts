/**
 * Resource limits (cpus, memory, pids) for the local runtime, as a cgroup per session nested under this process's own
 * cgroup (so a limit set on polar itself still holds). cgroup v2 (`memory.max`, `pids.max`, `cpu.max`) when the
 * unified hierarchy has the controllers, else cgroup v1 (`memory.limit_in_bytes` + `memory.memsw.limit_in_bytes`,
 * `pids.max`, `cpu.cfs_quota_us`). Every sandboxed command joins the cgroup before it execs (`wrap`), and `destroy`
 * kills whatever is still in it, then removes it. rlimits are no substitute: RLIMIT_NPROC does not apply to root and
 * RLIMIT_AS breaks JavaScript runtimes that reserve large address ranges.
 * Sources: https://docs.kernel.org/admin-guide/cgroup-v2.html , https://docs.kernel.org/admin-guide/cgroup-v1/memory.html ,
 * https://docs.kernel.org/admin-guide/cgroup-v1/pids.html
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Limits of one sandbox; absent fields are unlimited. */
export interface ResourceLimits {
  /** CPU time as a number of CPUs (fractions allowed), e.g. 1.5. */
  cpus?: number;
  /** Memory in bytes (swap included where the kernel accounts it). */
  memoryBytes?: number;
  /** Most processes/threads at once. */
  pids?: number;
}

/**
 * Parse a memory size: a byte count or a number with a binary unit suffix (`512m`, `2g`, `2GiB`, `100k`).
 * @throws Error naming the value when it is not a positive size.
 */
export function parseMemory(value: string | number): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value <= 0) throw new Error(`memory ${value} must be a positive number of bytes`);
    return Math.floor(value);
  }
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(value);
  if (!m) throw new Error(`memory ${JSON.stringify(value)} is not a size (e.g. 512m, 2g or a byte count)`);
  const scale = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 }[m[2]!.toLowerCase() as '' | 'k' | 'm' | 'g' | 't'];
  const bytes = Math.floor(Number(m[1]) * scale);
  if (bytes <= 0) throw new Error(`memory ${JSON.stringify(value)} must be positive`);
  return bytes;
}

export function hasLimits(limits: ResourceLimits | undefined): limits is ResourceLimits {
  return limits !== undefined && (limits.cpus !== undefined || limits.memoryBytes !== undefined || limits.pids !== undefined);
}

const CGROUP_ROOT = '/sys/fs/cgroup';

/** This process's cgroup path per v1 controller name ('' = the v2 unified path). */
function ownCgroups(): Map<string, string> {
  const paths = new Map<string, string>();
  for (const line of readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
    const [, controllers, path] = line.split(':');
    if (controllers === undefined || path === undefined) continue;
    if (controllers === '') paths.set('', path);
    for (const c of controllers.split(',')) if (c) paths.set(c, path);
  }
  return paths;
}

/** One session's cgroup(s). */
export class SessionCgroup {
  private constructor(
    /** Directories created (one per v1 controller, or one v2 directory). */
    readonly dirs: string[],
  ) {}

  /**
   * Create the cgroup(s) named `name` with `limits` applied.
   * @throws Error saying which controller is missing or not writable (e.g. running without root and no delegation).
   */
  static create(name: string, limits: ResourceLimits): SessionCgroup {
    const own = ownCgroups();
    const v2Path = own.get('');
    const v2Root = existsSync(join(CGROUP_ROOT, 'cgroup.controllers')) ? CGROUP_ROOT : join(CGROUP_ROOT, 'unified');
    const v2Controllers = v2Path !== undefined && existsSync(join(v2Root, v2Path, 'cgroup.controllers'))
      ? readFileSync(join(v2Root, v2Path, 'cgroup.controllers'), 'utf8').split(/\s+/) : [];
    const needed = [...(limits.memoryBytes !== undefined ? ['memory'] : []), ...(limits.pids !== undefined ? ['pids'] : []), ...(limits.cpus !== undefined ? ['cpu'] : [])];
    const created: string[] = [];
    const write = (dir: string, file: string, value: string) => {
      try {
        writeFileSync(join(dir, file), value);
      } catch (error) {
        throw new Error(`resource limits: cannot write ${join(dir, file)}: ${(error as Error).message}`);
      }
    };
    try {
      if (v2Path !== undefined && needed.every((c) => v2Controllers.includes(c))) {
        const dir = join(v2Root, v2Path, name);
        mkdirSync(dir);
        created.push(dir);
        if (limits.memoryBytes !== undefined) { write(dir, 'memory.max', String(limits.memoryBytes)); if (existsSync(join(dir, 'memory.swap.max'))) write(dir, 'memory.swap.max', '0'); }
        if (limits.pids !== undefined) write(dir, 'pids.max', String(limits.pids));
        if (limits.cpus !== undefined) write(dir, 'cpu.max', `${Math.max(1000, Math.round(limits.cpus * 100_000))} 100000`);
        return new SessionCgroup(created);
      }
      for (const controller of needed) {
        const parent = own.get(controller);
        const mount = join(CGROUP_ROOT, controller);
        if (parent === undefined || !existsSync(join(mount, parent))) {
          throw new Error(`resource limits: no cgroup "${controller}" controller (neither cgroup v2 with it enabled nor a v1 ${mount})`);
        }
        const dir = join(mount, parent, name);
        mkdirSync(dir);
        created.push(dir);
        if (controller === 'memory') {
          write(dir, 'memory.limit_in_bytes', String(limits.memoryBytes));
          // Swap counts too where the kernel accounts it, or the limit only moves pages to swap.
          if (existsSync(join(dir, 'memory.memsw.limit_in_bytes'))) write(dir, 'memory.memsw.limit_in_bytes', String(limits.memoryBytes));
        } else if (controller === 'pids') {
          write(dir, 'pids.max', String(limits.pids));
        } else {
          write(dir, 'cpu.cfs_period_us', '100000');
          write(dir, 'cpu.cfs_quota_us', String(Math.max(1000, Math.round(limits.cpus! * 100_000))));
        }
      }
      return new SessionCgroup(created);
    } catch (error) {
      new SessionCgroup(created).destroy();
      throw error;
    }
  }

  /** `argv` prefixed so the command joins every cgroup of this session before it execs (`/bin/sh` does the join). */
  wrap(argv: string[]): string[] {
    const joins = this.dirs.map((d) => `echo $$ > '${join(d, 'cgroup.procs')}' || exit 125`).join('; ');
    return ['/bin/sh', '-c', `${joins}; exec "$@"`, 'polar-cgroup', ...argv];
  }

  /** Pids still in the cgroup(s). */
  pids(): number[] {
    const all = new Set<number>();
    for (const dir of this.dirs) {
      try {
        for (const line of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n')) if (line.trim()) all.add(Number(line));
      } catch { /* already gone */ }
    }
    return [...all];
  }

  /** SIGKILL everything left in the cgroup(s) and remove them; never throws. */
  destroy(): void {
    for (let round = 0; round < 50; round++) {
      const left = this.pids();
      if (left.length === 0) break;
      for (const pid of left) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
      Bun.sleepSync(10);
    }
    for (const dir of this.dirs) { try { rmdirSync(dir); } catch { /* busy or gone: the kernel frees it once empty */ } }
  }
}
