/**
 * The `apptainer` runtime through its CLI: one instance per session (`instance start`), commands through
 * `exec instance://NAME`, `instance stop` on teardown. The session directory on the host is bound at /polar, so
 * upload/download are host copies into it (apptainer has no `cp`); paths outside /polar are rejected.
 * Apptainer runs processes in the host's process tree, so the host process-group kill reaches the whole command.
 * Source: https://apptainer.org/docs/user/latest/running_services.html , https://apptainer.org/docs/user/latest/cli/apptainer_exec.html
 */
import { cpSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { dirname, isAbsolute, join, posix, resolve } from 'node:path';
import { hostCommandRunner, runProcess, spawnProcessGroup } from './process.ts';
import type { CommandRunner, ExecOptions, ExecResult, ProcessSpawner, Runtime, RuntimeProcess, SpawnOptions } from './types.ts';

export interface ApptainerRuntimeOptions {
  sessionId: string;
  /** Image (SIF file, `docker://…`, …). */
  image: string;
  /** Host parent of session directories. */
  workRoot: string;
  /** Host paths bound read-only at the same path (e.g. the harness cache). */
  readOnlyMounts?: string[];
  cli?: string;
  runner?: CommandRunner;
  spawner?: ProcessSpawner;
}

const MOUNT = '/polar';

export class ApptainerRuntime implements Runtime {
  readonly kind = 'apptainer';
  readonly name: string;
  readonly hostRoot: string;
  readonly workDir = `${MOUNT}/work`;
  readonly homeDir = `${MOUNT}/home`;
  private readonly cli: string;
  private readonly runner: CommandRunner;
  private readonly spawner: ProcessSpawner;

  constructor(private readonly opts: ApptainerRuntimeOptions) {
    const hash = createHash('sha256').update(opts.sessionId).digest('hex').slice(0, 20);
    this.name = `polar-${hash}`;
    this.hostRoot = resolve(opts.workRoot, `a-${hash}`);
    this.cli = opts.cli ?? 'apptainer';
    this.runner = opts.runner ?? hostCommandRunner;
    this.spawner = opts.spawner ?? spawnProcessGroup;
  }

  /** `instance start` command line: contained, clean environment, session dir bound at /polar, HOME inside it. */
  startCommand(): string[] {
    const binds = (this.opts.readOnlyMounts ?? []).flatMap((p) => ['--bind', `${p}:${p}:ro`]);
    return [
      this.cli, 'instance', 'start', '--containall', '--cleanenv', '--bind', `${this.hostRoot}:${MOUNT}`,
      '--home', `${join(this.hostRoot, 'home')}:${this.homeDir}`, ...binds, this.opts.image, this.name,
    ];
  }

  /** `exec` command line for argv inside the instance. */
  execCommand(argv: string[], opts: { env?: Record<string, string>; cwd?: string } = {}): string[] {
    const env = Object.entries({ TMPDIR: `${MOUNT}/tmp`, ...(opts.env ?? {}) }).flatMap(([k, v]) => ['--env', `${k}=${v}`]);
    const cwd = opts.cwd === undefined ? this.workDir : this.path(opts.cwd);
    return [this.cli, 'exec', '--cleanenv', '--pwd', cwd, ...env, `instance://${this.name}`, ...argv];
  }

  private path(p: string): string {
    return isAbsolute(p) ? p : posix.join(this.workDir, p);
  }

  /** Host path of an in-instance path under /polar. */
  hostPath(p: string): string {
    const inside = this.path(p);
    const rel = posix.relative(MOUNT, inside);
    if (rel.startsWith('..') || posix.isAbsolute(rel)) throw new Error(`apptainer runtime: ${inside} is outside ${MOUNT}`);
    return join(this.hostRoot, rel);
  }

  async start(signal?: AbortSignal): Promise<void> {
    for (const d of ['work', 'home', 'tmp']) mkdirSync(join(this.hostRoot, d), { recursive: true });
    const result = await this.runner(this.startCommand(), { signal });
    if (result.exitCode !== 0) throw new Error(`apptainer instance start failed (exit ${result.exitCode}): ${result.stderr.trim().slice(0, 500)}`);
  }

  async stop(): Promise<void> {
    await this.runner([this.cli, 'instance', 'stop', this.name]);
    rmSync(this.hostRoot, { recursive: true, force: true });
  }

  exec(command: string | string[], opts: ExecOptions = {}): Promise<ExecResult> {
    const argv = typeof command === 'string' ? ['sh', '-c', command] : command;
    if (this.opts.runner) return this.opts.runner(this.execCommand(argv, opts), { timeoutMs: opts.timeoutMs, signal: opts.signal });
    return runProcess(this.execCommand(argv, opts), {
      env: process.env as Record<string, string>, timeoutMs: opts.timeoutMs, signal: opts.signal, spawner: this.spawner,
    });
  }

  spawn(argv: string[], opts: SpawnOptions = {}): RuntimeProcess {
    return this.spawner(this.execCommand(argv, opts), { env: process.env as Record<string, string>, closeStdin: opts.closeStdin ?? true });
  }

  async upload(localPath: string, remotePath: string): Promise<void> {
    if (!existsSync(localPath)) throw new Error(`upload: ${localPath} does not exist`);
    const dest = this.hostPath(remotePath);
    mkdirSync(dirname(dest), { recursive: true });
    cpSync(localPath, dest, { recursive: true });
  }

  async download(remotePath: string, localPath: string): Promise<void> {
    mkdirSync(dirname(localPath), { recursive: true });
    cpSync(this.hostPath(remotePath), localPath, { recursive: true });
  }

  async writeFile(remotePath: string, content: string): Promise<void> {
    const dest = this.hostPath(remotePath);
    mkdirSync(dirname(dest), { recursive: true });
    writeFileSync(dest, content);
  }
}

