/** Evaluators on a local runtime: session_completed, test_on_output expectations, swebench_harness F2P/P2P. */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TaskRequest } from '../../src/core/records.ts';
import { getEvaluator } from '../../src/gateway/evaluators/index.ts';
import type { EvaluationContext } from '../../src/gateway/evaluators/types.ts';
import { commitBaseline, sessionDiff } from '../../src/gateway/prepare.ts';
import { LocalRuntime } from '../../src/gateway/runtimes/local.ts';
import type { Runtime } from '../../src/gateway/runtimes/types.ts';
import { taskRequest } from '../support/tasks.ts';

const root = mkdtempSync(join(tmpdir(), 'polar-eval-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

async function prepared(files: Record<string, string>): Promise<Runtime> {
  const rt = new LocalRuntime({ sessionId: `e${++n}`, workRoot: root, isolation: 'none' });
  await rt.start();
  for (const [path, content] of Object.entries(files)) await rt.writeFile(path, content);
  await commitBaseline(rt);
  return rt;
}

const baseTask = taskRequest('t', { instruction: 'x', timeout_seconds: 10, agent: { model_name: 'm' }, builder: { strategy: 'per_request' } });
const files = { 'calc.sh': 'echo 1\n', 'test_one.sh': '[ "$(sh calc.sh)" = 2 ]\n', 'test_stable.sh': 'true\n' };

function ctx(runtime: Runtime, config: Record<string, unknown>, fresh: () => Promise<Runtime>, harness: EvaluationContext['harness'] = null): EvaluationContext {
  return { task: { ...baseTask, evaluator: { strategy: 'x', config } }, config, runtime, harness, freshRuntime: fresh, diff: () => sessionDiff(runtime), signal: new AbortController().signal };
}

test('session_completed: 1 only for exit 0 with a successful result event', async () => {
  const e = getEvaluator('session_completed');
  const rt = await prepared({});
  const fresh = () => Promise.reject(new Error('unused'));
  expect((await e.evaluate(ctx(rt, {}, fresh, { exitCode: 0, outcome: { success: true, reason: 'ok' } }))).outcome_reward).toBe(1);
  expect((await e.evaluate(ctx(rt, {}, fresh, { exitCode: 0, outcome: { success: false, reason: 'result error' } }))).outcome_reward).toBe(0);
  expect((await e.evaluate(ctx(rt, {}, fresh, null))).outcome_reward).toBe(0);
});

test('test_on_output: exit code and output expectations; bad config is an error', async () => {
  const e = getEvaluator('test_on_output');
  const rt = await prepared({ 'out.txt': 'all 3 tests OK\n' });
  const fresh = () => Promise.reject(new Error('unused'));
  expect((await e.evaluate(ctx(rt, { command: 'cat out.txt', expect_output: 'tests OK' }, fresh))).outcome_reward).toBe(1);
  expect((await e.evaluate(ctx(rt, { command: 'cat out.txt', expect_output_regex: '^all \\d+ tests FAILED' }, fresh))).outcome_reward).toBe(0);
  expect((await e.evaluate(ctx(rt, { command: 'exit 1', expect_exit_code: 1 }, fresh))).outcome_reward).toBe(1);
  expect((await e.evaluate(ctx(rt, { command: 'exit 1' }, fresh))).outcome_reward).toBe(0);
  await expect(e.evaluate(ctx(rt, { expect_exit_code: 0 }, fresh))).rejects.toThrow(/test_on_output config/);
});

test('swebench_harness: the diff applied in a fresh runtime; every F2P must pass and every P2P stay green', async () => {
  const e = getEvaluator('swebench_harness');
  const config = { FAIL_TO_PASS: ['test_one.sh'], PASS_TO_PASS: ['test_stable.sh'], test_command: 'sh {{TEST}}' };
  // The agent fixed calc.sh: resolved.
  const fixed = await prepared(files);
  await fixed.writeFile('calc.sh', 'echo 2\n');
  const good = await e.evaluate(ctx(fixed, config, () => prepared(files)));
  expect(good.outcome_reward).toBe(1);
  expect(good.details).toMatchObject({ resolved: true, patch_applied: true });
  // The agent fixed calc.sh but broke a PASS_TO_PASS test: not resolved.
  const broke = await prepared(files);
  await broke.writeFile('calc.sh', 'echo 2\n');
  await broke.writeFile('test_stable.sh', 'false\n');
  const bad = await e.evaluate(ctx(broke, config, () => prepared(files)));
  expect(bad.outcome_reward).toBe(0);
  expect((bad.details as { PASS_TO_PASS: { passed: boolean }[] }).PASS_TO_PASS[0]!.passed).toBe(false);
  // The fix only in the session's tree does not count when the fresh runtime never sees it (no changes → F2P fails).
  const untouched = await prepared(files);
  expect((await e.evaluate(ctx(untouched, config, () => prepared(files)))).outcome_reward).toBe(0);
});

test('swebench_harness: a test command that cannot run, is killed or times out is an error (the session ends ERROR), never reward 0', async () => {
  const e = getEvaluator('swebench_harness');
  const fixed = async () => {
    const rt = await prepared(files);
    await rt.writeFile('calc.sh', 'echo 2\n');
    return rt;
  };
  const run = async (config: Record<string, unknown>) => e.evaluate(ctx(await fixed(), config, () => prepared(files)));
  await expect(run({ FAIL_TO_PASS: ['test_one.sh'], PASS_TO_PASS: [], test_command: 'no-such-pytest {{TEST}}' })).rejects.toThrow(/test_one.sh could not run \(exit 127: command not found\)/);
  await expect(run({ FAIL_TO_PASS: ['sh test_one.sh'], PASS_TO_PASS: ['sleep 5'], timeout_s: 0.2 })).rejects.toThrow(/timed out after 0.2 s/);
  await expect(run({ FAIL_TO_PASS: ['kill -9 $$'], PASS_TO_PASS: [] })).rejects.toThrow(/killed by a signal/);
  // A test that runs and fails is still a judgement: reward 0, no error.
  expect((await run({ FAIL_TO_PASS: ['false'], PASS_TO_PASS: [] })).outcome_reward).toBe(0);
});

test('test_on_output: a command that cannot run, is killed or times out is an error (the session ends ERROR), never reward 0', async () => {
  const e = getEvaluator('test_on_output');
  const rt = await prepared({});
  const fresh = () => Promise.reject(new Error('unused'));
  await expect(e.evaluate(ctx(rt, { command: 'no-such-python3 -m unittest' }, fresh))).rejects.toThrow(/could not run \(exit 127: command not found\)/);
  await expect(e.evaluate(ctx(rt, { command: 'sleep 5', timeout_s: 0.2 }, fresh))).rejects.toThrow(/timed out after 0.2 s/);
  await expect(e.evaluate(ctx(rt, { command: 'kill -9 $$' }, fresh))).rejects.toThrow(/killed by a signal/);
  // A test that asks for exit 127 on purpose still scores it.
  expect((await e.evaluate(ctx(rt, { command: 'exit 127', expect_exit_code: 127 }, fresh))).outcome_reward).toBe(1);
  // Misspelt keys are refused (the same contract the rollout server checks at submit).
  await expect(e.evaluate(ctx(rt, { command: 'true', expect_exit_cod: 0 }, fresh))).rejects.toThrow(/expect_exit_cod/);
});
