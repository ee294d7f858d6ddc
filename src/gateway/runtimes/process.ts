/**
 * Host process helpers: every child leads its own process group (spawned detached = setsid), so a timeout or a cancel
 * kills the whole tree with kill(-pgid, SIGKILL), grandchildren included.
 */
import { spawn as spawnChild } from 'node:child_process';
import { OUTPUT_CAP_BYTES, type CommandRunner, type ExecResult, type ProcessSpawner, type RuntimeProcess } from './types.ts';

/** Collects a stream's text, keeping the last `OUTPUT_CAP_BYTES` characters. */
class TailBuffer {
  private parts: string[] = [];
  private size = 0;
  push(chunk: string): void {
    this.parts.push(chunk);
    this.size += chunk.length;
    if (this.size > OUTPUT_CAP_BYTES * 2) this.compact();
  }
  private compact(): void {
    const all = this.parts.join('');
    const tail = all.slice(-OUTPUT_CAP_BYTES);
    this.parts = [tail];
    this.size = tail.length;
  }
  text(): string {
    const all = this.parts.join('');
    return all.length > OUTPUT_CAP_BYTES ? all.slice(-OUTPUT_CAP_BYTES) : all;
  }
}

/** How long to wait for a finished command's stdout/stderr to close before giving up on the rest of its output, ms. */
export const PIPE_DRAIN_MS = 2000;

/** SIGKILL a process group; ESRCH (already gone) is not an error. */
export function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/**
 * Start `argv` on the host as the leader of a new session/process group.
 * `env` replaces the environment entirely (callers pass a scrubbed one). Spawn failures (missing binary) surface as
 * an exit with code 127 and the error text in stderr, never as a throw.
 */
export const spawnProcessGroup: ProcessSpawner = (argv, opts = {}) => {
  const [file, ...args] = argv;
  if (file === undefined) throw new Error('spawnProcessGroup: empty argv');
  const out = new TailBuffer();
  const err = new TailBuffer();
  const child = spawnChild(file, args, {
    cwd: opts.cwd,
    env: opts.env ?? {},
    detached: true,
    stdio: [opts.closeStdin === false ? 'pipe' : 'ignore', 'pipe', 'pipe'],
  });
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => out.push(chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => err.push(chunk));
  const pid = child.pid ?? null;
  const exited = new Promise<{ exitCode: number | null; signal: string | null }>((resolve) => {
    let settled = false;
    const finish = (exitCode: number | null, signal: string | null) => {
      if (settled) return;
      settled = true;
      resolve({ exitCode, signal });
    };
    child.once('error', (error) => {
      err.push(`spawn ${file}: ${error.message}\n`);
      finish(127, null);
    });
    // The command is over when its leader exits, not when its pipes close: a background job it left (`server &`)
    // holds them open. Kill what it left in its group, give the pipes a moment to drain, then stop waiting (a child
    // that called setsid and still holds a pipe would otherwise wedge the session; it escapes the group kill — only
    // bwrap's --unshare-pid reaches it).
    child.once('exit', (code, signal) => {
      if (pid !== null) killGroup(pid);
      const drain = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        finish(code, signal);
      }, PIPE_DRAIN_MS);
      child.once('close', () => {
        clearTimeout(drain);
        finish(code, signal);
      });
    });
  });
  const proc: RuntimeProcess = {
    pid,
    exited,
    stdout: () => out.text(),
    stderr: () => err.text(),
    async kill() {
      if (pid !== null) killGroup(pid);
      await exited;
    },
  };
  return proc;
};

/**
 * Run `argv` to completion as its own process group with an optional timeout and abort signal (both kill the group).
 * Never throws for a failing command; `exitCode` is null when it was killed.
 */
export async function runProcess(
  argv: string[],
  opts: { env?: Record<string, string>; cwd?: string; timeoutMs?: number; signal?: AbortSignal; spawner?: ProcessSpawner } = {},
): Promise<ExecResult> {
  const proc = (opts.spawner ?? spawnProcessGroup)(argv, { env: opts.env, cwd: opts.cwd });
  let timedOut = false;
  const timer = opts.timeoutMs !== undefined ? setTimeout(() => { timedOut = true; void proc.kill(); }, opts.timeoutMs) : undefined;
  const onAbort = () => void proc.kill();
  if (opts.signal?.aborted) onAbort();
  else opts.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const { exitCode } = await proc.exited;
    return { exitCode: timedOut || opts.signal?.aborted ? null : exitCode, stdout: proc.stdout(), stderr: proc.stderr(), timedOut };
  } finally {
    if (timer) clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onAbort);
  }
}

/** The default CommandRunner: host argv with the host environment (used for docker/podman/apptainer CLIs). */
export const hostCommandRunner: CommandRunner = (argv, opts = {}) =>
  runProcess(argv, { env: process.env as Record<string, string>, cwd: opts.cwd, timeoutMs: opts.timeoutMs, signal: opts.signal });
