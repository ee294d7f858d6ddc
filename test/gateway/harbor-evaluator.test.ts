/**
 * The `harbor` evaluator on the local runtime (with and without bubblewrap): tests/ uploaded with /tests, /logs and the
 * WORKDIR mapped into the session, reward.txt before reward.json, the mean of a reward.json object, clamping, exit
 * code gating, a stale reward the agent wrote not counting, and the provenance kept in details.
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getEvaluator } from '../../src/gateway/evaluators/index.ts';
import { parseHarborReward, rewritePaths } from '../../src/gateway/evaluators/harbor.ts';
import type { EvaluationContext } from '../../src/gateway/evaluators/types.ts';
import { LocalRuntime } from '../../src/gateway/runtimes/local.ts';
import type { Runtime } from '../../src/gateway/runtimes/types.ts';
import { taskRequest } from '../support/tasks.ts';

const root = mkdtempSync(join(tmpdir(), 'polar-harbor-eval-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

function testsDir(files: Record<string, string>): string {
  const dir = join(root, `tests-${++n}`);
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

async function runtime(isolation: 'none' | 'bwrap', files: Record<string, string> = {}): Promise<Runtime> {
  const rt = new LocalRuntime({ sessionId: `h${++n}`, workRoot: join(root, 'work'), isolation });
  await rt.start();
  for (const [path, content] of Object.entries(files)) await rt.writeFile(path, content);
  return rt;
}

const baseTask = taskRequest('t', { instruction: 'x', timeout_seconds: 10, agent: { model_name: 'm' }, builder: { strategy: 'per_request' } });

function ctx(rt: Runtime, config: Record<string, unknown>): EvaluationContext {
  return {
    task: { ...baseTask, evaluator: { strategy: 'harbor', config } }, config, runtime: rt, harness: null,
    freshRuntime: () => Promise.reject(new Error('unused')), diff: () => Promise.resolve(''), signal: new AbortController().signal,
  };
}

const PY_CHECK = [
  '#!/bin/bash',
  'mkdir -p /logs/verifier',
  'if [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ] && [ -f /tests/helper.txt ] && [ "$TEST_DIR" = /tests ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi',
  '',
].join('\n');

for (const isolation of ['none', 'bwrap'] as const) {
  test(`harbor (isolation ${isolation}): /tests, /logs/verifier and WORKDIR /app map into the session; the reward follows the work`, async () => {
    const e = getEvaluator('harbor');
    const tests = testsDir({ 'test.sh': PY_CHECK, 'helper.txt': 'x' });
    const config = { tests_dir: tests, workdir: '/app', timeout_s: 30 };
    const solved = await runtime(isolation, { 'answer.txt': '42\n' });
    const good = await e.evaluate(ctx(solved, config));
    expect(good.outcome_reward).toBe(1);
    expect(good.details).toMatchObject({ evaluator: 'harbor', exit_code: 0, reward_source: 'reward.txt', reward_raw: '1', config: { tests_dir: tests } });
    const failed = await runtime(isolation, { 'answer.txt': '41\n' });
    const bad = await e.evaluate(ctx(failed, config));
    expect(bad.outcome_reward).toBe(0);
    expect(bad.details).toMatchObject({ exit_code: 0, reward_source: 'reward.txt', reward_raw: '0' });
  });
}

test('harbor: reward.json scalar or mean of an object; reward.txt wins; clamped to [0, 1]; nonzero exit gives 0', async () => {
  const e = getEvaluator('harbor');
  const rt = await runtime('none');
  const run = async (body: string) => e.evaluate(ctx(rt, { tests_dir: testsDir({ 'test.sh': `mkdir -p /logs/verifier\n${body}\n` }) }));
  expect((await run(`echo '{"a": 1, "b": 0, "c": 0.5, "note": "x"}' > /logs/verifier/reward.json`)).outcome_reward).toBeCloseTo(0.5, 10);
  expect((await run(`echo 0.25 > /logs/verifier/reward.json`)).outcome_reward).toBe(0.25);
  expect((await run(`echo 0.75 > /logs/verifier/reward.txt; echo 0 > /logs/verifier/reward.json`)).outcome_reward).toBe(0.75);
  expect((await run(`echo 7 > /logs/verifier/reward.txt`)).outcome_reward).toBe(1);
  expect((await run(`echo -3 > /logs/verifier/reward.txt`)).outcome_reward).toBe(0);
  const crashed = await run(`echo 1 > /logs/verifier/reward.txt; echo boom >&2; exit 3`);
  expect(crashed.outcome_reward).toBe(0);
  expect(crashed.details).toMatchObject({ exit_code: 3, reward_source: null });
  expect(String(crashed.details!.output_tail)).toContain('boom');
  const silent = await run('true');
  expect(silent.outcome_reward).toBe(0);
  expect(silent.details!.reward_error).toMatch(/neither reward.txt nor reward.json/);
});

test('harbor: a reward the agent left in the verifier directory does not count', async () => {
  const e = getEvaluator('harbor');
  const rt = await runtime('none');
  const config = { tests_dir: testsDir({ 'test.sh': 'true\n' }) };
  await rt.exec('true');
  // The agent knows the session layout and plants a reward where the verifier's directory will be.
  const planted = join(rt.homeDir, '.polar-harbor', 'logs', 'verifier');
  mkdirSync(planted, { recursive: true });
  writeFileSync(join(planted, 'reward.txt'), '1\n');
  expect((await e.evaluate(ctx(rt, config))).outcome_reward).toBe(0);
});

test('harbor: bad config and a missing test.sh are errors naming the problem', async () => {
  const e = getEvaluator('harbor');
  const rt = await runtime('none');
  await expect(e.evaluate(ctx(rt, {}))).rejects.toThrow(/harbor config/);
  await expect(e.evaluate(ctx(rt, { tests_dir: testsDir({}), extra: 1 }))).rejects.toThrow(/harbor config/);
  await expect(e.evaluate(ctx(rt, { tests_dir: testsDir({ 'other.sh': '' }) }))).rejects.toThrow(/test.sh does not exist/);
});

test('rewritePaths: whole path prefixes only; parseHarborReward rejects junk', () => {
  const rw: Array<[string, string]> = [['/tests', '/s/tests'], ['/logs/', '/s/logs/'], ['/app', '/s/work']];
  expect(rewritePaths('python3 /tests/t.py /testsuite /app /application /app/x "/app" /x/app', rw))
    .toBe('python3 /s/tests/t.py /testsuite /s/work /application /s/work/x "/s/work" /x/app');
  expect(rewritePaths('echo 1 > /logs/verifier/reward.txt', rw)).toBe('echo 1 > /s/logs/verifier/reward.txt');
  expect(() => parseHarborReward('yes', null)).toThrow(/reward.txt is not a number/);
  expect(() => parseHarborReward(null, '[1]')).toThrow(/number or an object/);
  expect(parseHarborReward(null, null)).toBeNull();
});
