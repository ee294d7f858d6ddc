/**
 * `polar run` with the two harnesses the harness matrix (scripts/harness-matrix.sh) found broken, each on one
 * example task with one sample, real CLI against the in-process simulator:
 * - claude_code: with a model name it doesn't know, Claude Code sends a mid-conversation `{role: "system"}` message,
 *   which the Anthropic dialect used to reject (400 on every call). Now the session completes its tool loop.
 * - opencode: the instruction holds `python3 -m unittest -q`, which opencode's argument parser took for options
 *   (usage + exit 1, no model call). Now the exact instruction reaches the model and the tool loop completes.
 * Runs only inside a loopback-only network namespace (`node scripts/test.mjs test/e2e/run-harnesses.test.ts`).
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { getHarnessAdapter } from '../../src/gateway/harnesses/index.ts';
import { defaultHarnessCache, harnessPaths } from '../../src/gateway/harnesses/install.ts';
import { loadTaskDir } from '../../src/rollout/task-file.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';
import { expectCompletedToolLoop } from '../support/run-checks.ts';

const root = resolve(import.meta.dir, '../..');
const bun = process.execPath;
const out = mkdtempSync(join(tmpdir(), 'polar-run-harnesses-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));
const taskDir = join(root, 'examples/tasks/mean-empty');
const task = loadTaskDir(taskDir)[0]!.task;

async function polarRun(harness: string): Promise<{ code: number; stdout: string; stderr: string; dir: string }> {
  const dir = join(out, harness);
  const proc = Bun.spawn([bun, 'src/main.ts', 'run', taskDir, '--harness', harness, '--samples', '1', '--out', dir, '--quiet', '--timeout-s', '100'], {
    cwd: root, stdout: 'pipe', stderr: 'pipe', timeout: 110_000, killSignal: 'SIGKILL',
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr, dir };
}


test.skipIf(!networkIsolated())(`polar run --harness claude_code: mid-conversation system messages accepted, tool loop completes ${NEEDS_ISOLATION}`, async () => {
  const run = await polarRun('claude_code');
  if (run.code !== 0) console.error(run.stdout.slice(-3000), run.stderr.slice(-3000));
  expect(run.code).toBe(0);
  const records = expectCompletedToolLoop(run.dir, task.task_id, { firstCallToolCalls: true });
  // The request shape that used to be rejected really was sent, and it is kept in place in the IR.
  const body = records[0]!.request_body as { messages: { role: string }[] };
  expect(body.messages.map((m) => m.role)).toContain('system');
  expect(records[0]!.ir_request.messages.map((m) => m.role).slice(0, 3)).toEqual(['system', 'user', 'system']);
}, 120_000);

test.skipIf(!networkIsolated())(
  `polar run --harness opencode: the exact instruction reaches the model, tool loop completes ${NEEDS_ISOLATION}`,
  async () => {
    // npm test installs every adapter's pinned CLI first (test/support/install-harnesses.ts).
    expect(harnessPaths(defaultHarnessCache(), getHarnessAdapter('opencode').package!).installed).toBe(true);
    const run = await polarRun('opencode');
    if (run.code !== 0) console.error(run.stdout.slice(-3000), run.stderr.slice(-3000));
    expect(run.code).toBe(0);
    const records = expectCompletedToolLoop(run.dir, task.task_id, { firstCallToolCalls: true });
    const user = records[0]!.ir_request.messages.find((m) => m.role === 'user');
    expect(user?.content).toEqual([{ type: 'text', text: task.instruction }]);
    expect(task.instruction).toContain('-m unittest -q');
  },
  120_000,
);
