/**
 * The `local` runtime: a per-session directory `<workRoot>/<hash>/{work,home,tmp}` on this host, every command its
 * own process group, a scrubbed environment (PATH, LANG, HOME, TMPDIR plus what the caller sets: no host secrets),
 * and bubblewrap isolation when `bwrap` is on PATH (isolation 'auto') or required ('bwrap'). `upload` and `writeFile`
 * refuse host paths outside the session directory (symlinks followed).
 * Source: docs/architecture.md#staging-model, docs/protocol-notes.md#sandboxes; bubblewrap flags: https://github.com/containers/bubblewrap (bwrap(1)).
 */
import { cpSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { assertWriteInside } from './paths.ts';
import { runProcess, spawnProcessGroup } from './process.ts';
import type { ExecOptions, ExecResult, ProcessSpawner, Runtime, RuntimeProcess, SpawnOptions } from './types.ts';

export interface LocalRuntimeOptions {
  /** The session id; only a hash of it names the directory, because the id is the harness's API key. */
  sessionId: string;
  /** Parent of all session directories (absolute or relative to cwd). */
  workRoot: string;
  /** 'auto' (default): bwrap when it exists; 'bwrap': required (start throws without it); 'none'. */
  isolation?: 'auto' | 'bwrap' | 'none';
  /** Directories put in front of PATH (e.g. a harness's node_modules/.bin). */
  extraPath?: string[];
  /** Injected process spawner (tests); defaults to host process groups. */
  spawner?: ProcessSpawner;
  /** Where to look for bwrap; defaults to PATH lookup via Bun.which. */
  bwrapPath?: string | null;
  /** Keep the session directory after stop (debugging). */
  keep?: boolean;
}

/** The names of the only host variables a local session inherits. */
export const LOCAL_ENV_PASSTHROUGH = ['PATH', 'LANG'] as const;

export class LocalRuntime implements Runtime {
  readonly kind = 'local';
  readonly root: string;
  readonly workDir: string;
  readonly homeDir: string;
  readonly tmpDir: string;
  private readonly spawner: ProcessSpawner;
  private readonly bwrap: string | null;

  constructor(private readonly opts: LocalRuntimeOptions) {
    const hash = createHash('sha256').update(opts.sessionId).digest('hex').slice(0, 20);
    this.root = resolve(opts.workRoot, `s-${hash}`);
    this.workDir = join(this.root, 'work');
    this.homeDir = join(this.root, 'home');
    this.tmpDir = join(this.root, 'tmp');
    this.spawner = opts.spawner ?? spawnProcessGroup;
    const isolation = opts.isolation ?? 'auto';
    const found = opts.bwrapPath !== undefined ? opts.bwrapPath : Bun.which('bwrap');
    this.bwrap = isolation === 'none' ? null : found;
    if (isolation === 'bwrap' && found === null) this.missingBwrap = true;
  }

  private missingBwrap = false;

  /** The whole environment a session process gets: scrubbed base + `extra` (extra wins). */
  environment(extra: Record<string, string> = {}): Record<string, string> {
    const hostPath = process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin';
    return {
      PATH: [...(this.opts.extraPath ?? []), hostPath].join(':'),
      LANG: process.env.LANG ?? 'C.UTF-8',
      HOME: this.homeDir,
      TMPDIR: this.tmpDir,
      ...extra,
    };
  }

  /** argv wrapped in bubblewrap when isolation is on: read-only host, writable session dir, private /tmp and pids. */
  wrap(argv: string[], cwd: string): string[] {
    if (this.bwrap === null) return argv;
    return [
      this.bwrap, '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp',
      '--bind', this.root, this.root, '--unshare-pid', '--unshare-ipc', '--die-with-parent', '--chdir', cwd, '--', ...argv,
    ];
  }

  async start(): Promise<void> {
    if (this.missingBwrap) throw new Error('local runtime: isolation "bwrap" requested but bwrap is not installed');
    for (const dir of [this.workDir, this.homeDir, this.tmpDir]) mkdirSync(dir, { recursive: true });
  }

  async stop(): Promise<void> {
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
    return this.spawner(this.wrap(argv, cwd), { env: this.environment(opts.env), cwd, closeStdin: opts.closeStdin ?? true });
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
