/**
 * `docker` and `podman` runtimes through their CLIs (identical command lines). One long-lived container per session:
 * `run -d … sleep infinity`, then `exec` per command, `cp` for files, `rm -f` on stop.
 *
 * Networking: the container uses `--network host` by default, so the harness reaches this gateway at the same
 * 127.0.0.1 URL as a local one (set `network` to use another network and `gatewayUrl` for the address the container
 * sees). Process-group kill: every command runs as `setsid sh -c 'echo $$ > PIDFILE; exec "$@"'`, so `kill -KILL -PGID`
 * inside the container reaches the whole tree (the image needs `sh` and `setsid`, e.g. util-linux or busybox).
 * Sources: https://docs.docker.com/reference/cli/docker/container/run/ , https://docs.podman.io/en/latest/markdown/podman-run.1.html
 */
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, posix } from 'node:path';
import { createHash } from 'node:crypto';
import { hostCommandRunner, spawnProcessGroup } from './process.ts';
import type { CommandRunner, ExecOptions, ExecResult, ProcessSpawner, Runtime, RuntimeProcess, SpawnOptions } from './types.ts';

export interface ContainerRuntimeOptions {
  engine: 'docker' | 'podman';
  sessionId: string;
  image: string;
  /** Default 'host' (see module doc). */
  network?: string;
  /** Default /workspace. */
  workDir?: string;
  /** Default /polar/home. */
  homeDir?: string;
  /** Host paths mounted read-only at the same path (e.g. the harness cache). */
  readOnlyMounts?: string[];
  /** Extra `run` flags (e.g. ['--cpus', '2']). */
  runArgs?: string[];
  /** CLI path; defaults to the engine name. */
  cli?: string;
  runner?: CommandRunner;
  spawner?: ProcessSpawner;
}

/** Shell wrapper that records the process-group id (= the session leader's pid) before exec'ing the command. */
const PGID_WRAPPER = 'echo $$ > "$0"; exec "$@"';

export class ContainerRuntime implements Runtime {
  readonly kind: string;
  readonly name: string;
  readonly workDir: string;
  readonly homeDir: string;
  readonly tmpDir: string;
  private readonly cli: string;
  private readonly runner: CommandRunner;
  private readonly spawner: ProcessSpawner;
  private seq = 0;

  constructor(private readonly opts: ContainerRuntimeOptions) {
    this.kind = opts.engine;
    this.name = `polar-${createHash('sha256').update(opts.sessionId).digest('hex').slice(0, 20)}`;
    this.workDir = opts.workDir ?? '/workspace';
    this.homeDir = opts.homeDir ?? '/polar/home';
    this.tmpDir = '/polar/tmp';
    this.cli = opts.cli ?? opts.engine;
    this.runner = opts.runner ?? hostCommandRunner;
    this.spawner = opts.spawner ?? spawnProcessGroup;
  }

  private async must(argv: string[], what: string, signal?: AbortSignal): Promise<ExecResult> {
    const result = await this.runner(argv, { signal });
    if (result.exitCode !== 0) throw new Error(`${this.kind} ${what} failed (exit ${result.exitCode}): ${result.stderr.trim().slice(0, 500)}`);
    return result;
  }

  /** The `run` command line that creates the session container. */
  runCommand(): string[] {
    const mounts = (this.opts.readOnlyMounts ?? []).flatMap((p) => ['-v', `${p}:${p}:ro`]);
    return [
      this.cli, 'run', '-d', '--rm', '--name', this.name, '--network', this.opts.network ?? 'host',
      '-w', this.workDir, '-e', `HOME=${this.homeDir}`, '-e', `TMPDIR=${this.tmpDir}`,
      ...mounts, ...(this.opts.runArgs ?? []), this.opts.image, 'sleep', 'infinity',
    ];
  }

  /** The `exec` command line for `argv` with env and cwd; `pidFile` makes it record its process group. */
  execCommand(argv: string[], opts: { env?: Record<string, string>; cwd?: string; pidFile?: string; interactive?: boolean } = {}): string[] {
    const env = Object.entries(opts.env ?? {}).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
    const cwd = opts.cwd === undefined ? this.workDir : this.path(opts.cwd);
    const inner = opts.pidFile === undefined ? argv : ['setsid', 'sh', '-c', PGID_WRAPPER, opts.pidFile, ...argv];
    return [this.cli, 'exec', ...(opts.interactive ? ['-i'] : []), '-w', cwd, ...env, this.name, ...inner];
  }

  private path(p: string): string {
    return isAbsolute(p) ? p : posix.join(this.workDir, p);
  }

  private killCommand(pidFile: string): string[] {
    return [this.cli, 'exec', this.name, 'sh', '-c', `kill -KILL -"$(cat ${pidFile})" 2>/dev/null; rm -f ${pidFile}`];
  }

  async start(signal?: AbortSignal): Promise<void> {
    await this.must(this.runCommand(), 'run', signal);
    await this.must([this.cli, 'exec', this.name, 'mkdir', '-p', this.workDir, this.homeDir, this.tmpDir], 'mkdir', signal);
  }

  async stop(): Promise<void> {
    await this.runner([this.cli, 'rm', '-f', this.name]);
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

