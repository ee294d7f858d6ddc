/**
 * `docker` and `podman` runtimes through their CLIs (identical command lines). One long-lived container per session:
 * `run -d --init … sleep infinity`, then `exec` per command, `cp` for files, `rm -f` on stop.
 *
 * - The container's PID 1 is an init (`--init`: tini / catatonit) that reaps orphans and ends on SIGTERM, so `rm -f`
 *   (with `-t 0` on podman) is immediate.
 * - The work dir is created with `mkdir -p` (`exec --privileged`, the only privileged step) before any command uses
 *   it (podman does not create a missing `-w`).
 * - A process started by `exec` already leads its own session and process group, so commands run as
 *   `sh -c 'echo $$ > PIDFILE; exec "$@"'` (no `setsid`, which would fork and return 0 at once): the exit status is
 *   the command's own, and `kill -KILL -PGID` inside the container reaches its whole tree.
 * - Network (`network`): `host` shares the host's network; `none` gives only `lo`; `gateway` (default) is `--network
 *   none` plus a `polar tunnel` the host runs inside the container's network namespace (`nsenter -n`), listening on
 *   127.0.0.1:<gateway port> and forwarding to the gateway node's Unix socket, so the harness uses the same base URL
 *   as a local one and reaches nothing else. Any image works (the tunnel runs from the host's filesystem).
 * - Limits: `--cpus`, `--memory` (+ `--memory-swap` equal: no swap), `--pids-limit`.
 * - All capabilities are dropped (`--cap-drop ALL`) and `no-new-privileges` is set.
 * Sources: https://docs.docker.com/reference/cli/docker/container/run/ , https://docs.podman.io/en/latest/markdown/podman-run.1.html ,
 * nsenter(1) https://man7.org/linux/man-pages/man1/nsenter.1.html
 */
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, posix } from 'node:path';
import { createHash } from 'node:crypto';
import type { ResourceLimits } from './limits.ts';
import type { GatewayEndpoint, NetworkMode } from './local.ts';
import { hostCommandRunner, spawnProcessGroup } from './process.ts';
import { hostTunnelCommand } from './tunnel.ts';
import type { CommandRunner, ExecOptions, ExecResult, ProcessSpawner, Runtime, RuntimeProcess, SpawnOptions } from './types.ts';

export interface ContainerRuntimeOptions {
  engine: 'docker' | 'podman';
  sessionId: string;
  image: string;
  /** Default 'gateway' (see module doc). */
  network?: NetworkMode;
  /** The gateway node for `network: gateway`; without one, `gateway` is `none`. */
  gateway?: GatewayEndpoint | null;
  /** Default /workspace. */
  workDir?: string;
  /** Default /polar/home. */
  homeDir?: string;
  /** Host paths mounted read-only at the same path (e.g. the harness cache). */
  readOnlyMounts?: string[];
  /** Extra `run` flags (e.g. ['-v', '/usr:/usr:ro']). */
  runArgs?: string[];
  /** cpus / memory / pids limits. */
  limits?: ResourceLimits;
  /** CLI path; defaults to the engine name. */
  cli?: string;
  /**
   * Host directory under which this runtime's CLI commands run: each in `<hostRoot>/<container name>`, created on
   * demand and removed by `stop()`. conmon leaves an empty `oom` file in the working directory of a `podman exec`
   * whose process the memory limit killed; without this it would land in the gateway's own working directory.
   * Absent: the commands run in this process's working directory.
   */
  hostRoot?: string;
  runner?: CommandRunner;
  spawner?: ProcessSpawner;
}

/** Shell wrapper that records the process-group id (= the exec'd session leader's pid) before exec'ing the command. */
const PGID_WRAPPER = 'echo $$ > "$0"; exec "$@"';

export class ContainerRuntime implements Runtime {
  readonly kind: string;
  readonly name: string;
  readonly workDir: string;
  readonly homeDir: string;
  readonly tmpDir: string;
  readonly network: NetworkMode;
  private readonly cli: string;
  private readonly runner: CommandRunner;
  private readonly spawner: ProcessSpawner;
  private tunnel: RuntimeProcess | null = null;
  private seq = 0;
  /** Where the CLI commands run (`hostRoot`), or undefined. */
  readonly hostDir: string | undefined;

  constructor(private readonly opts: ContainerRuntimeOptions) {
    this.kind = opts.engine;
    this.name = `polar-${createHash('sha256').update(opts.sessionId).digest('hex').slice(0, 20)}`;
    this.workDir = opts.workDir ?? '/workspace';
    this.homeDir = opts.homeDir ?? '/polar/home';
    this.tmpDir = '/polar/tmp';
    this.network = opts.network ?? 'gateway';
    this.cli = opts.cli ?? opts.engine;
    const runner = opts.runner ?? hostCommandRunner;
    const spawner = opts.spawner ?? spawnProcessGroup;
    this.hostDir = opts.hostRoot === undefined ? undefined : join(opts.hostRoot, this.name);
    const cwd = this.hostDir;
    // Every CLI command (and the tunnel) runs in the runtime's own host directory (see `hostRoot`).
    const inHostDir = () => {
      mkdirSync(cwd!, { recursive: true, mode: 0o700 });
      return cwd;
    };
    this.runner = cwd === undefined ? runner : (argv, o) => runner(argv, { ...o, cwd: inHostDir() });
    this.spawner = cwd === undefined ? spawner : (argv, o) => spawner(argv, { ...o, cwd: inHostDir() });
  }

  private async must(argv: string[], what: string, signal?: AbortSignal): Promise<ExecResult> {
    const result = await this.runner(argv, { signal });
    if (result.exitCode !== 0) throw new Error(`${this.kind} ${what} failed (exit ${result.exitCode}): ${result.stderr.trim().slice(0, 500)}`);
    return result;
  }

  /** The `run` command line that creates the session container. */
  runCommand(): string[] {
    const mounts = (this.opts.readOnlyMounts ?? []).flatMap((p) => ['-v', `${p}:${p}:ro`]);
    const limits = this.opts.limits ?? {};
    return [
      this.cli, 'run', '-d', '--rm', '--init', '--name', this.name, '--network', this.network === 'host' ? 'host' : 'none',
      '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges',
      ...(limits.cpus !== undefined ? ['--cpus', String(limits.cpus)] : []),
      ...(limits.memoryBytes !== undefined ? ['--memory', `${limits.memoryBytes}b`, '--memory-swap', `${limits.memoryBytes}b`] : []),
      ...(limits.pids !== undefined ? ['--pids-limit', String(limits.pids)] : []),
      '-e', `HOME=${this.homeDir}`, '-e', `TMPDIR=${this.tmpDir}`,
      ...mounts, ...(this.opts.runArgs ?? []), this.opts.image, 'sleep', 'infinity',
    ];
  }

  /** The `exec` command line for `argv` with env and cwd; `pidFile` makes it record its process group. */
  execCommand(argv: string[], opts: { env?: Record<string, string>; cwd?: string; pidFile?: string; interactive?: boolean } = {}): string[] {
    const env = Object.entries(opts.env ?? {}).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
    const cwd = opts.cwd === undefined ? this.workDir : this.path(opts.cwd);
    const inner = opts.pidFile === undefined ? argv : ['sh', '-c', PGID_WRAPPER, opts.pidFile, ...argv];
    return [this.cli, 'exec', ...(opts.interactive ? ['-i'] : []), '-w', cwd, ...env, this.name, ...inner];
  }

  /** The `rm` command line: immediate (`-t 0` on podman; docker's `rm -f` kills at once). */
  removeCommand(): string[] {
    return [this.cli, 'rm', '-f', ...(this.kind === 'podman' ? ['-t', '0'] : []), this.name];
  }

  /** The host command that runs the gateway tunnel inside the container's network namespace (pid of its PID 1). */
  tunnelCommand(pid: number): string[] {
    const gw = this.opts.gateway!;
    return ['nsenter', '-t', String(pid), '-n', '--', ...hostTunnelCommand(), '--port', String(gw.port), '--socket', gw.socket];
  }

  private path(p: string): string {
    return isAbsolute(p) ? p : posix.join(this.workDir, p);
  }

  killCommand(pidFile: string): string[] {
    return [this.cli, 'exec', this.name, 'sh', '-c', `kill -KILL -"$(cat ${pidFile})" 2>/dev/null; rm -f ${pidFile}`];
  }

  async start(signal?: AbortSignal): Promise<void> {
    await this.must(this.runCommand(), 'run', signal);
    // The one privileged step: the image's `/` may be read-only to a root with no capabilities (e.g. mode 0555).
    await this.must([this.cli, 'exec', '--privileged', this.name, 'mkdir', '-p', this.workDir, this.homeDir, this.tmpDir], 'mkdir', signal);
    if (this.network === 'gateway' && this.opts.gateway) await this.startTunnel(signal);
  }

  private async startTunnel(signal?: AbortSignal): Promise<void> {
    const inspect = await this.must([this.cli, 'inspect', '--format', '{{.State.Pid}}', this.name], 'inspect', signal);
    const pid = Number(inspect.stdout.trim());
    if (!Number.isInteger(pid) || pid <= 0) throw new Error(`${this.kind} inspect: no pid for ${this.name} (${inspect.stdout.trim()})`);
    // A minimal environment: the tunnel needs nothing of this process's (tokens included).
    const tunnel = this.spawner(this.tunnelCommand(pid), { env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' } });
    this.tunnel = tunnel;
    // Ready once it printed `listening`; an early exit is an error.
    const deadline = Date.now() + 15_000;
    let exited = false;
    void tunnel.exited.then(() => { exited = true; });
    while (!tunnel.stdout().includes('listening')) {
      if (exited) throw new Error(`gateway tunnel into ${this.name} exited: ${tunnel.stderr().trim().slice(-500)}`);
      if (Date.now() > deadline) throw new Error(`gateway tunnel into ${this.name} did not start within 15 s`);
      await Bun.sleep(10);
    }
  }

  async stop(): Promise<void> {
    await this.tunnel?.kill();
    this.tunnel = null;
    await this.runner(this.removeCommand());
    if (this.hostDir !== undefined) rmSync(this.hostDir, { recursive: true, force: true });
  }

  async exec(command: string | string[], opts: ExecOptions = {}): Promise<ExecResult> {
    const argv = typeof command === 'string' ? ['sh', '-c', command] : command;
    const pidFile = `${this.tmpDir}/exec-${++this.seq}.pgid`;
    let killed = false;
    const killInside = () => { if (!killed) { killed = true; void this.runner(this.killCommand(pidFile)); } };
    opts.signal?.addEventListener('abort', killInside, { once: true });
    const timer = opts.timeoutMs !== undefined ? setTimeout(killInside, opts.timeoutMs) : undefined;
    try {
      const result = await this.runner(this.execCommand(argv, { env: opts.env, cwd: opts.cwd, pidFile }), {
        timeoutMs: opts.timeoutMs === undefined ? undefined : opts.timeoutMs + 5_000, signal: opts.signal,
      });
      return killed ? { ...result, exitCode: null, timedOut: !opts.signal?.aborted } : result;
    } finally {
      if (timer) clearTimeout(timer);
      opts.signal?.removeEventListener('abort', killInside);
    }
  }

  spawn(argv: string[], opts: SpawnOptions = {}): RuntimeProcess {
    const pidFile = `${this.tmpDir}/spawn-${++this.seq}.pgid`;
    const proc = this.spawner(this.execCommand(argv, { env: opts.env, cwd: opts.cwd, pidFile, interactive: opts.closeStdin === false }), {
      env: process.env as Record<string, string>, closeStdin: opts.closeStdin ?? true,
    });
    return {
      pid: proc.pid,
      exited: proc.exited,
      stdout: () => proc.stdout(),
      stderr: () => proc.stderr(),
      kill: async () => {
        await this.runner(this.killCommand(pidFile));
        await proc.kill();
      },
    };
  }

  async upload(localPath: string, remotePath: string): Promise<void> {
    const dest = this.path(remotePath);
    const isDir = statSync(localPath).isDirectory();
    await this.must([this.cli, 'exec', this.name, 'mkdir', '-p', isDir ? dest : posix.dirname(dest)], 'mkdir');
    // `SRC/.` copies a directory's contents into DEST instead of nesting it (docker cp semantics).
    await this.must([this.cli, 'cp', isDir ? `${localPath}/.` : localPath, `${this.name}:${dest}`], 'cp');
  }

  async download(remotePath: string, localPath: string): Promise<void> {
    await this.must([this.cli, 'cp', `${this.name}:${this.path(remotePath)}`, localPath], 'cp');
  }

  async writeFile(remotePath: string, content: string): Promise<void> {
    const dir = mkdtempSync(join(tmpdir(), 'polar-upload-'));
    try {
      const file = join(dir, 'file');
      writeFileSync(file, content);
      await this.upload(file, remotePath);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

