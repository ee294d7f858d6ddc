/**
 * The `local` runtime: a per-session directory `<workRoot>/s-<hash>/{work,home,tmp}` on this host, run inside a
 * bubblewrap sandbox by default (`isolation: bwrap`; `none` runs plain host processes and must be chosen explicitly).
 *
 * What a sandboxed command sees: its work dir, HOME and TMPDIR (read-write, at their host paths), the harness installs
 * (read-only), the system's `/usr` with the `/bin`, `/lib*` links and a few files of `/etc` the toolchain needs
 * (dynamic linker cache, alternatives, TLS roots, time zone; read-only), a generated passwd/group, a private `/tmp`,
 * `/dev` and a `/proc` of its own PID namespace. Never the store, the config, other sessions' directories, the rest
 * of `/etc` or the host's `/proc`. It runs as uid 1000 of its own user namespace with every capability dropped, in its
 * own PID/IPC/UTS (and, unless `network: host`, network) namespaces, with an environment built from scratch
 * (PATH, LANG, HOME, TMPDIR plus what the caller sets). When its leader exits, the PID namespace dies with everything
 * it left behind.
 *
 * Network (`network`): `host` shares the host's network; `none` has only `lo`; `gateway` (default) has only `lo` plus,
 * for spawned processes (the harness), a `polar tunnel` on 127.0.0.1:<gateway port> bridged to the gateway node's Unix
 * socket bind-mounted at /run/polar/gateway.sock (see tunnel.ts). Without a gateway socket, `gateway` is `none`.
 *
 * Resource limits (`limits`): a cgroup per session (limits.ts) every command joins; `stop` kills what is left in it.
 * `upload` and `writeFile` refuse host paths outside the session directory (symlinks followed).
 * Sources: docs/architecture.md#staging-model, docs/protocol-notes.md#sandboxes; bwrap(1) https://github.com/containers/bubblewrap/blob/main/bwrap.xml , user_namespaces(7),
 * pid_namespaces(7) https://man7.org/linux/man-pages/man7/pid_namespaces.7.html
 */
import { cpSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { basename, dirname, join, resolve } from 'node:path';
import { hasLimits, SessionCgroup, type ResourceLimits } from './limits.ts';
import { assertWriteInside } from './paths.ts';
import { killGroup, runProcess, spawnProcessGroup } from './process.ts';
import { SANDBOX_GATEWAY_SOCKET, tunnelCommand } from './tunnel.ts';
import type { ExecOptions, ExecResult, ProcessSpawner, Runtime, RuntimeProcess, SpawnOptions } from './types.ts';

/** How a session is contained: `bwrap` (bubblewrap sandbox, the default) or `none` (plain host processes). */
export type Isolation = 'bwrap' | 'none';
/** What network a sandbox gets (see module doc). */
export type NetworkMode = 'none' | 'gateway' | 'host';

/** The gateway node as a sandbox reaches it: its TCP port (also the tunnel's port inside) and its host Unix socket. */
export interface GatewayEndpoint {
  port: number;
  socket: string;
}

export interface LocalRuntimeOptions {
  /** The session id; only a hash of it names the directory, because the id is the harness's API key. */
  sessionId: string;
  /** Parent of all session directories (absolute or relative to cwd). */
  workRoot: string;
  /** Default 'bwrap': `start` throws when bwrap is missing. 'none' runs host processes (no containment). */
  isolation?: Isolation;
  /** Default 'gateway' (bwrap only; `none` isolation always shares the host network). */
  network?: NetworkMode;
  /** The gateway node for `network: gateway`. */
  gateway?: GatewayEndpoint | null;
  /** Directories put in front of PATH (e.g. a harness's node_modules/.bin); under bwrap their install is bound read-only. */
  extraPath?: string[];
  /** More host paths bound read-only at the same path inside the sandbox. */
  readOnlyPaths?: string[];
  /** cpus / memory / pids limits (cgroup). */
  limits?: ResourceLimits;
  /** Injected process spawner (tests); defaults to host process groups. */
  spawner?: ProcessSpawner;
  /** Where to look for bwrap; defaults to PATH lookup via Bun.which. */
  bwrapPath?: string | null;
  /** Keep the session directory after stop (debugging). */
  keep?: boolean;
}

/** The names of the only host variables a local session inherits. */
export const LOCAL_ENV_PASSTHROUGH = ['PATH', 'LANG'] as const;

/** PATH inside a sandbox (the host's PATH may name directories the sandbox does not have, e.g. under /root). */
export const SANDBOX_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Files and directories of `/etc` bound read-only when present: linker, alternatives links, TLS roots, time zone. */
const ETC_READ_ONLY = [
  '/etc/ld.so.cache', '/etc/ld.so.conf', '/etc/ld.so.conf.d', '/etc/alternatives', '/etc/ssl', '/etc/ca-certificates',
  '/etc/ca-certificates.conf', '/etc/pki', '/etc/localtime', '/etc/timezone', '/etc/nsswitch.conf', '/etc/hosts',
  '/etc/mime.types', '/etc/os-release', '/etc/debian_version', '/etc/gitconfig', '/etc/inputrc', '/etc/magic',
];

/** uid/gid of the sandbox user (mapped to the host user that runs polar; no capabilities). */
const SANDBOX_UID = 1000;

/** The installation root a tool directory belongs to (`…/node_modules/.bin` → its npm prefix), bound read-only. */
function installRoot(dir: string): string {
  const abs = resolve(dir);
  if (basename(abs) === '.bin' && basename(dirname(abs)) === 'node_modules') return dirname(dirname(abs));
  return abs;
}

export class LocalRuntime implements Runtime {
  readonly kind = 'local';
  readonly root: string;
  readonly workDir: string;
  readonly homeDir: string;
  readonly tmpDir: string;
  /** The containment in effect ('bwrap' or 'none'). */
  readonly isolation: Isolation;
  readonly network: NetworkMode;
  private readonly spawner: ProcessSpawner;
  private readonly bwrap: string | null;
  private cgroup: SessionCgroup | null = null;

  constructor(private readonly opts: LocalRuntimeOptions) {
    const hash = createHash('sha256').update(opts.sessionId).digest('hex').slice(0, 20);
    this.root = resolve(opts.workRoot, `s-${hash}`);
    this.workDir = join(this.root, 'work');
    this.homeDir = join(this.root, 'home');
    this.tmpDir = join(this.root, 'tmp');
    this.spawner = opts.spawner ?? this.recordingSpawner(spawnProcessGroup);
    this.isolation = opts.isolation ?? 'bwrap';
    this.network = this.isolation === 'none' ? 'host' : (opts.network ?? 'gateway');
    this.bwrap = this.isolation === 'none' ? null : (opts.bwrapPath !== undefined ? opts.bwrapPath : Bun.which('bwrap'));
  }

  /** The whole environment a session process gets: scrubbed base + `extra` (extra wins). */
  environment(extra: Record<string, string> = {}): Record<string, string> {
    const basePath = this.isolation === 'bwrap' ? SANDBOX_PATH : (process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin');
    return {
      PATH: [...(this.opts.extraPath ?? []), basePath].join(':'),
      LANG: process.env.LANG ?? 'C.UTF-8',
      HOME: this.homeDir,
      TMPDIR: this.tmpDir,
      ...extra,
    };
  }

  /** bubblewrap arguments up to (not including) `--`: the mount table and namespaces described in the module doc. */
  sandboxArgs(cwd: string, opts: { tunnel?: boolean } = {}): string[] {
    const args = [
      '--unshare-user', '--uid', String(SANDBOX_UID), '--gid', String(SANDBOX_UID), '--cap-drop', 'ALL',
      '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--hostname', 'polar-sandbox',
      ...(this.network === 'host' ? [] : ['--unshare-net']),
      '--die-with-parent', '--new-session',
      '--ro-bind', '/usr', '/usr',
    ];
    for (const top of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
      const p = `/${top}`;
      let st;
      try { st = lstatSync(p); } catch { continue; }
      if (st.isSymbolicLink()) args.push('--symlink', readlinkSync(p), p);
      else if (st.isDirectory()) args.push('--ro-bind', p, p);
    }
    for (const p of ETC_READ_ONLY) if (existsSync(p)) args.push('--ro-bind', p, p);
    args.push('--ro-bind', join(this.root, 'etc', 'passwd'), '/etc/passwd', '--ro-bind', join(this.root, 'etc', 'group'), '/etc/group');
    args.push('--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp');
    const readOnly = [...new Set([...(this.opts.extraPath ?? []).map(installRoot), ...(this.opts.readOnlyPaths ?? []).map((p) => resolve(p))])];
    for (const p of readOnly) args.push('--ro-bind-try', p, p);
    for (const p of [this.workDir, this.homeDir, this.tmpDir]) args.push('--bind', p, p);
    if (opts.tunnel) {
      const tunnel = tunnelCommand();
      for (const [from, to] of tunnel.binds) args.push('--ro-bind', from, to);
      args.push('--ro-bind', this.opts.gateway!.socket, SANDBOX_GATEWAY_SOCKET);
    }
    // Nothing but the binds above is writable: not /, /etc or the mount points bwrap made (its root is a tmpfs).
    args.push('--remount-ro', '/', '--chdir', cwd);
    return args;
  }

  /** True when spawned processes get the gateway tunnel. */
  private get tunnels(): boolean {
    return this.bwrap !== null && this.network === 'gateway' && this.opts.gateway != null;
  }

  /**
   * argv as run on the host: inside bubblewrap (with the tunnel in front when `tunnel`), joined to the session's
   * cgroup when limits are set.
   */
  wrap(argv: string[], cwd: string, opts: { tunnel?: boolean } = {}): string[] {
    let wrapped = argv;
    if (this.bwrap !== null) {
      const tunnel = opts.tunnel === true && this.tunnels;
      const inner = tunnel
        ? [...tunnelCommand().argv, '--port', String(this.opts.gateway!.port), '--socket', SANDBOX_GATEWAY_SOCKET, '--', ...argv]
        : argv;
      wrapped = [this.bwrap, ...this.sandboxArgs(cwd, { tunnel }), '--', ...inner];
    }
    return this.cgroup ? this.cgroup.wrap(wrapped) : wrapped;
  }

  async start(): Promise<void> {
    if (this.isolation === 'bwrap' && this.bwrap === null) {
      throw new Error('local runtime: bubblewrap (bwrap) is not installed, so sessions cannot be sandboxed; install it (apt-get install bubblewrap) or set runtime.isolation: none (--no-sandbox) to run harnesses unconfined');
    }
    for (const dir of [this.workDir, this.homeDir, this.tmpDir, join(this.root, 'etc'), join(this.root, PGID_DIR)]) mkdirSync(dir, { recursive: true });
    writeFileSync(join(this.root, OWNER_FILE), String(process.pid));
    writeFileSync(join(this.root, 'etc', 'passwd'), `root:x:0:0:root:/root:/bin/sh\npolar:x:${SANDBOX_UID}:${SANDBOX_UID}:polar:${this.homeDir}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`);
    writeFileSync(join(this.root, 'etc', 'group'), `root:x:0:\npolar:x:${SANDBOX_UID}:\nnogroup:x:65534:\n`);
    if (hasLimits(this.opts.limits) && this.cgroup === null) {
      this.cgroup = SessionCgroup.create(`polar-${basename(this.root)}`, this.opts.limits);
    }
  }

  /**
   * Wrap a spawner so each process group this runtime starts is recorded as `<root>/.pgids/<pgid>` until it exits: if
   * the gateway process dies (SIGKILL), the next one on this work root ends those groups (`reapOrphanSessions`).
   */
  private recordingSpawner(spawner: ProcessSpawner): ProcessSpawner {
    return (argv, o) => {
      const proc = spawner(argv, o);
      if (proc.pid !== null && existsSync(join(this.root, PGID_DIR))) {
        const file = join(this.root, PGID_DIR, String(proc.pid));
        try {
          writeFileSync(file, '');
          void proc.exited.then(() => rmSync(file, { force: true }));
        } catch {
          // the session directory is going away; nothing to record
        }
      }
      return proc;
    };
  }

  async stop(): Promise<void> {
    this.cgroup?.destroy();
    this.cgroup = null;
    if (!this.opts.keep) rmSync(this.root, { recursive: true, force: true });
  }

  /** Host path of a runtime path: relative paths resolve against `workDir`, `..` segments are resolved. */
  private path(p: string): string {
    return resolve(this.workDir, p);
  }

  exec(command: string | string[], opts: ExecOptions = {}): Promise<ExecResult> {
    const argv = typeof command === 'string' ? ['sh', '-c', command] : command;
    const cwd = this.path(opts.cwd ?? this.workDir);
    return runProcess(this.wrap(argv, cwd), {
      env: this.environment(opts.env), cwd, timeoutMs: opts.timeoutMs, signal: opts.signal, spawner: this.spawner,
    });
  }

  spawn(argv: string[], opts: SpawnOptions = {}): RuntimeProcess {
    const cwd = this.path(opts.cwd ?? this.workDir);
    return this.spawner(this.wrap(argv, cwd, { tunnel: true }), { env: this.environment(opts.env), cwd, closeStdin: opts.closeStdin ?? true });
  }

  async upload(localPath: string, remotePath: string): Promise<void> {
    if (!existsSync(localPath)) throw new Error(`upload: ${localPath} does not exist`);
    const dest = this.path(remotePath);
    // Writes happen on the host, outside bubblewrap: a path (or a symlink a prepare command left) must not lead out.
    assertWriteInside(this.root, dest, localPath);
    mkdirSync(dirname(dest), { recursive: true });
    cpSync(localPath, dest, { recursive: true });
  }

  async download(remotePath: string, localPath: string): Promise<void> {
    const src = this.path(remotePath);
    if (!existsSync(src)) throw new Error(`download: ${src} does not exist`);
    mkdirSync(dirname(localPath), { recursive: true });
    cpSync(src, localPath, { recursive: true });
  }

  async writeFile(remotePath: string, content: string): Promise<void> {
    const dest = this.path(remotePath);
    assertWriteInside(this.root, dest);
    mkdirSync(dirname(dest), { recursive: true });
    writeFileSync(dest, content);
  }
}

const PGID_DIR = '.pgids';
const OWNER_FILE = '.owner';

/**
 * Clean up after gateway processes that died on this work root: every session directory (`s-*`) whose owner process
 * (`.owner`, the pid of the gateway that started it) is gone has its recorded process groups (`.pgids/<pgid>`) killed
 * with SIGKILL and is removed. Directories of live gateways (another node sharing the root) are left alone.
 * @returns how many directories were removed and process groups signalled.
 */
export function reapOrphanSessions(workRoot: string): { dirs: number; groups: number } {
  const out = { dirs: 0, groups: 0 };
  let names: string[];
  try {
    names = readdirSync(workRoot).filter((n) => n.startsWith('s-'));
  } catch {
    return out;
  }
  for (const name of names) {
    const root = join(workRoot, name);
    let owner: number | null = null;
    try {
      owner = Number(readFileSync(join(root, OWNER_FILE), 'utf8'));
    } catch {
      // no owner file: written by a gateway before this rule, or never started; treat as orphaned
    }
    if (owner !== null && Number.isInteger(owner) && owner > 0 && isAlive(owner)) continue;
    let groups: string[] = [];
    try {
      groups = readdirSync(join(root, PGID_DIR));
    } catch {
      // none recorded
    }
    for (const pgid of groups.map(Number).filter((n) => Number.isInteger(n) && n > 1)) {
      if (!isAlive(-pgid)) continue;
      killGroup(pgid);
      out.groups++;
    }
    rmSync(root, { recursive: true, force: true });
    out.dirs++;
  }
  return out;
}

/** True when a process (pid > 0) or process group (pid < 0) exists; signal 0 only checks. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
