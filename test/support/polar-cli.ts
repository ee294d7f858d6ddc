/**
 * Test helpers for tests that run the `polar` CLI as a process (`bun src/main.ts ...` from the repository root): run a
 * command to its end, start a long-running one and read its first stdout line (where servers print their URLs), a
 * scratch directory whose processes are killed and files removed in afterAll, and task directories with a behaviour
 * script for the simulator.
 */
import { afterAll } from 'bun:test';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

export const REPO_ROOT = resolve(import.meta.dir, '../..');

/** `polar run`/`submit --command` agent: test/support/run-shell-agent.ts, which makes real model calls and runs shell steps. */
export const SHELL_AGENT_COMMAND = `${process.execPath} ${join(REPO_ROOT, 'test/support/run-shell-agent.ts')} {{INSTRUCTION}}`;

/** What a sandbox must see read-only to run SHELL_AGENT_COMMAND: the Bun binary's directory and test/support. */
export const SHELL_AGENT_PATHS = [dirname(realpathSync(process.execPath)), dirname(process.execPath), join(REPO_ROOT, 'test/support')];

/** `polar run` flags that let its sandboxes run SHELL_AGENT_COMMAND. */
export const SHELL_AGENT_RUN_FLAGS = SHELL_AGENT_PATHS.flatMap((p) => ['--ro-path', p]);

/** The same as a node `runtime` config line (YAML flow mapping), for `polar serve` / `polar gateway` configs. */
export const SHELL_AGENT_RUNTIME_YAML = `runtime: {read_only_paths: [${SHELL_AGENT_PATHS.join(', ')}]}`;

export interface PolarResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `polar ...args` to its end; with `timeoutMs` (ms) it is SIGKILLed past that. */
export async function runPolar(args: string[], opts: { timeoutMs?: number } = {}): Promise<PolarResult> {
  const proc = Bun.spawn([process.execPath, 'src/main.ts', ...args], {
    cwd: REPO_ROOT, stdout: 'pipe', stderr: 'pipe', ...(opts.timeoutMs !== undefined ? { timeout: opts.timeoutMs, killSignal: 'SIGKILL' as const } : {}),
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

/** Runs `polar ...args` to its end, blocking; stdout and stderr are captured. */
export function runPolarSync(args: string[]): Bun.SyncSubprocess<'pipe', 'pipe'> {
  return Bun.spawnSync([process.execPath, 'src/main.ts', ...args], { cwd: REPO_ROOT, stdout: 'pipe', stderr: 'pipe' });
}

/** The first line of a stream (without its newline); the stream's reader lock is released, the rest stays unread. */
export async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stream.getReader();
  let text = '';
  while (!text.includes('\n')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return text.split('\n')[0]!;
}

/**
 * The first line of `stream` that matches `pattern` (a server may log start-up choices before its "listening on"
 * line); '' when the stream ends first. Lines before it are read and dropped.
 */
export async function lineMatching(stream: ReadableStream<Uint8Array>, pattern: RegExp): Promise<string> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    for (;;) {
      const lines = text.split('\n');
      const hit = lines.slice(0, -1).find((line) => pattern.test(line));
      if (hit !== undefined) return hit;
      const { value, done } = await reader.read();
      if (done) return lines.find((line) => pattern.test(line)) ?? '';
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    reader.releaseLock();
  }
}

export type PolarProcess = Bun.Subprocess<'ignore', 'pipe', 'pipe'>;

/** A temporary directory for the calling test file, and processes to SIGKILL before it is removed in afterAll. */
export function useScratch(prefix: string): { dir: string; procs: PolarProcess[] } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const procs: PolarProcess[] = [];
  afterAll(() => {
    for (const p of procs) p.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  return { dir, procs };
}

/** Starts `polar ...args` (a server) in the background, adds it to `procs`, and waits for its first stdout line. */
export async function startPolar(args: string[], procs: PolarProcess[]): Promise<{ proc: PolarProcess; line: string }> {
  const proc = Bun.spawn([process.execPath, 'src/main.ts', ...args], { cwd: REPO_ROOT, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' });
  procs.push(proc);
  return { proc, line: await firstLine(proc.stdout) };
}

/**
 * Starts `polar proxy ...args` in `cwd` (with `env` instead of this process's environment when given) and reads its
 * stdout until it says `listening on URL`.
 * @throws Error with the process's stderr when it exits before that.
 */
export async function startPolarProxy(args: string[], cwd: string, env?: Record<string, string | undefined>): Promise<{ proc: PolarProcess; url: string }> {
  const proc = Bun.spawn([process.execPath, join(REPO_ROOT, 'src/main.ts'), 'proxy', ...args], { cwd, ...(env ? { env } : {}), stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' });
  const reader = proc.stdout.getReader();
  let out = '';
  while (!/listening on (http:\/\/\S+)/.test(out)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`polar proxy exited early: ${await new Response(proc.stderr).text()}`);
    out += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return { proc, url: /listening on (http:\/\/\S+)/.exec(out)![1]! };
}

/**
 * Writes task directory `dir/taskId`: a task.yaml (local runtime; the evaluator passes when out.txt contains ok) that
 * names `sim.yaml`, the behaviour script `simScript` (YAML text). `timeoutSeconds` defaults to 60. Returns `dir`.
 */
export function writeSimTask(dir: string, taskId: string, simScript: string, opts: { timeoutSeconds?: number } = {}): string {
  const taskDir = join(dir, taskId);
  mkdirSync(taskDir, { recursive: true });
  writeFileSync(join(taskDir, 'task.yaml'), [
    `task_id: ${taskId}`,
    'instruction: Create the file out.txt containing ok.',
    `timeout_seconds: ${opts.timeoutSeconds ?? 60}`,
    'runtime: {kind: local}',
    'evaluator: {strategy: test_on_output, config: {command: "grep -q ok out.txt"}}',
    'sim_script: sim.yaml',
    '',
  ].join('\n'));
  writeFileSync(join(taskDir, 'sim.yaml'), simScript);
  return dir;
}
