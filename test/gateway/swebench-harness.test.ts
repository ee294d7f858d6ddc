/**
 * swebench_harness with the benchmark's own pieces: test_patch applied after the agent's diff, eval_prepare, and
 * FAIL_TO_PASS / PASS_TO_PASS judged from one test run's output (unittest run for real; pytest -rA parsed from text).
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getEvaluator } from '../../src/gateway/evaluators/index.ts';
import { parsePytestLog, parseUnittestLog } from '../../src/gateway/evaluators/test-logs.ts';
import type { EvaluationContext } from '../../src/gateway/evaluators/types.ts';
import { commitBaseline, sessionDiff } from '../../src/gateway/prepare.ts';
import { LocalRuntime } from '../../src/gateway/runtimes/local.ts';
import type { Runtime } from '../../src/gateway/runtimes/types.ts';
import { taskRequest } from '../support/tasks.ts';

const root = mkdtempSync(join(tmpdir(), 'polar-swebench-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

const repo = {
  'calc.py': 'def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n',
  'test_calc.py': 'import unittest\nfrom calc import add, mul\n\n\nclass T(unittest.TestCase):\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n',
};
// The benchmark's test_patch: adds the test the fix must make pass.
const testPatch = [
  'diff --git a/test_calc.py b/test_calc.py', '--- a/test_calc.py', '+++ b/test_calc.py', '@@ -6,2 +6,5 @@ class T(unittest.TestCase):',
  '     def test_mul(self):', '         self.assertEqual(mul(2, 3), 6)', '+', '+    def test_add(self):', '+        self.assertEqual(add(2, 3), 5)', '',
].join('\n');

async function prepared(): Promise<Runtime> {
  const rt = new LocalRuntime({ sessionId: `w${++n}`, workRoot: root, isolation: 'none' });
  await rt.start();
  for (const [path, content] of Object.entries(repo)) await rt.writeFile(path, content);
  await commitBaseline(rt);
  return rt;
}

const baseTask = taskRequest('t', { instruction: 'x', timeout_seconds: 10, agent: { model_name: 'm' }, builder: { strategy: 'per_request' } });
function ctx(rt: Runtime, config: Record<string, unknown>): EvaluationContext {
  return { task: { ...baseTask, evaluator: { strategy: 'swebench_harness', config } }, config, runtime: rt, harness: null, freshRuntime: prepared, diff: () => sessionDiff(rt), signal: new AbortController().signal };
}

const F2P = 'test_add (test_calc.T.test_add)';
const P2P = 'test_mul (test_calc.T.test_mul)';
const config = { FAIL_TO_PASS: [F2P], PASS_TO_PASS: [P2P], test_patch: testPatch, log_parser: 'unittest', run_command: 'python3 -m unittest -v test_calc' };

test('test_patch + unittest log: the fix resolves; no fix leaves F2P failing; breaking mul fails P2P', async () => {
  const e = getEvaluator('swebench_harness');
  const fixed = await prepared();
  await fixed.writeFile('calc.py', repo['calc.py'].replace('a - b', 'a + b'));
  const good = await e.evaluate(ctx(fixed, config));
  expect(good.details).toMatchObject({ resolved: true, FAIL_TO_PASS: [{ test: F2P, passed: true, status: 'PASSED' }], PASS_TO_PASS: [{ test: P2P, passed: true }] });
  expect(good.outcome_reward).toBe(1);
  const untouched = await prepared();
  const none = await e.evaluate(ctx(untouched, config));
  expect(none.outcome_reward).toBe(0);
  expect(none.details).toMatchObject({ FAIL_TO_PASS: [{ test: F2P, passed: false, status: 'FAILED' }], PASS_TO_PASS: [{ passed: true }] });
  const broke = await prepared();
  await broke.writeFile('calc.py', repo['calc.py'].replace('a - b', 'a + b').replace('a * b', 'a ** b'));
  const regressed = await e.evaluate(ctx(broke, config));
  expect(regressed.outcome_reward).toBe(0);
  expect(regressed.details).toMatchObject({ FAIL_TO_PASS: [{ passed: true }], PASS_TO_PASS: [{ passed: false, status: 'FAILED' }] });
});

test('without test_patch the F2P test does not exist, so it is not passed; a failing eval_prepare ends unresolved', async () => {
  const e = getEvaluator('swebench_harness');
  const fixed = await prepared();
  await fixed.writeFile('calc.py', repo['calc.py'].replace('a - b', 'a + b'));
  const { test_patch: _, ...withoutPatch } = config;
  expect((await e.evaluate(ctx(fixed, withoutPatch))).outcome_reward).toBe(0);
  const failing = await e.evaluate(ctx(fixed, { ...config, eval_prepare: ['true', 'echo no deps >&2; exit 4'] }));
  expect(failing.outcome_reward).toBe(0);
  expect(failing.details).toMatchObject({ failed_stage: 'eval_prepare', patch_applied: true });
  expect(String(failing.details!.error)).toContain('no deps');
  await expect(e.evaluate(ctx(fixed, { ...config, log_parser: undefined }))).rejects.toThrow(/run_command needs log_parser/);
});

test('parsePytestLog reads the -rA summary; parseUnittestLog maps unittest words', () => {
  const pytest = parsePytestLog([
    '============ short test summary info ============',
    'PASSED tests/test_a.py::test_ok', 'FAILED tests/test_a.py::test_bad - AssertionError: 1 != 2',
    'XFAIL tests/test_a.py::test_known - reason', 'ERROR tests/test_b.py::test_setup', 'SKIPPED [1] tests/x.py:3: no db',
  ].join('\n'));
  expect(Object.fromEntries(pytest)).toMatchObject({
    'tests/test_a.py::test_ok': 'PASSED', 'tests/test_a.py::test_bad': 'FAILED', 'tests/test_a.py::test_known': 'XFAIL', 'tests/test_b.py::test_setup': 'ERROR',
  });
  const unit = parseUnittestLog('test_a (m.C.test_a) ... ok\ntest_b (m.C.test_b) ... FAIL\ntest_c (m.C.test_c) ... skipped \'slow\'\ntest_d (m.C.test_d) ... expected failure\n');
  expect(Object.fromEntries(unit)).toEqual({ 'test_a (m.C.test_a)': 'PASSED', 'test_b (m.C.test_b)': 'FAILED', 'test_c (m.C.test_c)': 'SKIPPED', 'test_d (m.C.test_d)': 'XFAIL' });
});
