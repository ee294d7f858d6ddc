/**
 * Prepare actions (src/core/contracts/runtime.ts) run in INIT after the runtime starts: upload_file, upload_dir, exec with retries and
 * exponential backoff. Also the diff baseline that test_on_output/swebench_harness evaluate against.
 */
import { confineDest, type PrepareAction } from './runtimes/index.ts';
import type { Runtime } from './runtimes/types.ts';

/** Default per-exec timeout when the action gives none, s. */
export const DEFAULT_PREPARE_TIMEOUT_S = 600;

/** Sleep `ms`, rejecting with the signal's reason when aborted. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason ?? new Error('aborted'));
    const timer = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve(); }, ms);
    const onAbort = () => { clearTimeout(timer); reject(signal?.reason ?? new Error('aborted')); };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Run the prepare actions in order. An exec is tried `1 + retries` times with backoff `backoff_ms · 2^attempt`
 * (default 1000 ms). An upload's `dest` must be relative and stay inside the runtime's work directory after
 * normalisation (it comes from the TaskRequest). Throws Error naming the failing action (with its last stderr or the
 * rejected dest) or the signal's reason.
 */
export async function runPrepare(runtime: Runtime, actions: PrepareAction[], signal?: AbortSignal): Promise<void> {
  for (const [index, action] of actions.entries()) {
    signal?.throwIfAborted();
    if ('upload_file' in action || 'upload_dir' in action) {
      const { src, dest } = 'upload_file' in action ? action.upload_file : action.upload_dir;
      let confined: string;
      try {
        confined = confineDest(dest);
      } catch (error) {
        throw new Error(`prepare action ${index}: ${(error as Error).message}`);
      }
      await runtime.upload(src, confined);
    }
    else {
      const { command, timeout_s = DEFAULT_PREPARE_TIMEOUT_S, retries = 0, backoff_ms = 1000 } = action.exec;
      for (let attempt = 0; ; attempt++) {
        const result = await runtime.exec(command, { timeoutMs: timeout_s * 1000, signal });
        signal?.throwIfAborted();
        if (result.exitCode === 0) break;
        if (attempt >= retries) {
          const why = result.timedOut ? `timed out after ${timeout_s} s` : `exit ${result.exitCode}`;
          throw new Error(`prepare action ${index} (exec ${JSON.stringify(command)}) failed: ${why}: ${result.stderr.trim().slice(-500)}`);
        }
        await sleep(backoff_ms * 2 ** attempt, signal);
      }
    }
  }
}

/** The git ref that marks the prepared state of the work tree. */
export const BASELINE_REF = 'refs/polar/baseline';

const GIT_ID = '-c user.name=polar -c user.email=polar@localhost -c commit.gpgsign=false';

/**
 * Record the prepared work tree as a baseline commit (`git init` first when it is not a repository), so the
 * session's changes can later be taken as one `git diff`. Throws Error when git fails.
 */
export async function commitBaseline(runtime: Runtime, signal?: AbortSignal): Promise<void> {
  const script = [
    'git rev-parse --is-inside-work-tree >/dev/null 2>&1 || git init -q',
    'git add -A',
    `git ${GIT_ID} commit -q --allow-empty --no-verify -m polar-baseline`,
    `git update-ref ${BASELINE_REF} HEAD`,
  ].join(' && ');
  const result = await runtime.exec(script, { timeoutMs: 120_000, signal });
  if (result.exitCode !== 0) throw new Error(`baseline commit failed: ${result.stderr.trim().slice(-500)}`);
}

/** The session's changes (tracked and new files, binary-safe) against the baseline, as a patch text. */
export async function sessionDiff(runtime: Runtime, signal?: AbortSignal): Promise<string> {
  const result = await runtime.exec(`git add -A && git diff --cached --binary ${BASELINE_REF}`, { timeoutMs: 120_000, signal });
  if (result.exitCode !== 0) throw new Error(`git diff failed: ${result.stderr.trim().slice(-500)}`);
  return result.stdout;
}

/** Apply a patch (from `sessionDiff`) to a runtime's work tree. Throws Error when it does not apply. */
export async function applyDiff(runtime: Runtime, diff: string, signal?: AbortSignal): Promise<void> {
  if (diff.trim() === '') return;
  const patchPath = `${runtime.homeDir}/.polar-session.patch`;
  await runtime.writeFile(patchPath, diff);
  const result = await runtime.exec(`git apply --whitespace=nowarn ${patchPath}`, { timeoutMs: 120_000, signal });
  if (result.exitCode !== 0) throw new Error(`applying the session diff failed: ${result.stderr.trim().slice(-500)}`);
}
