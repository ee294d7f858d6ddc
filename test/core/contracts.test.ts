/**
 * The wire contracts (src/core/contracts/): one TaskRequest for the rollout server and the gateway, strict at every
 * depth the control plane owns (an unknown key is an error naming its path), open where other modules own the map.
 */
import { expect, test } from 'bun:test';
import { dispatchSpecSchema, formatIssues, parseTaskRequest, taskRequestSchema } from '../../src/core/contracts/index.ts';

const base = {
  task_id: 't1', instruction: 'do it', num_samples: 2, timeout_seconds: 30,
  agent: { harness: 'pi', model_name: 'm' }, builder: { strategy: 'prefix_merging' },
};

test('unknown keys are errors that name their path, at every depth', () => {
  const cases: [unknown, RegExp][] = [
    [{ ...base, num_sample: 1 }, /num_sample: unknown key/],
    [{ ...base, agent: { ...base.agent, harnes: 'pi' } }, /agent\.harnes: unknown key/],
    [{ ...base, builder: { strategy: 'per_request', cfg: {} } }, /builder\.cfg: unknown key/],
    [{ ...base, evaluator: { strategy: 'test_on_output', refresh: true } }, /evaluator\.refresh: unknown key/],
    [{ ...base, runtime: { kind: 'local', isolaton: 'bwrap' } }, /runtime\.isolaton: unknown key/],
    [{ ...base, runtime: { kind: 'local', prepare: [{ exec: { command: 'x', retry: 1 } }] } }, /runtime\.prepare\[0\]\.exec\.retry: unknown key/],
    [{ ...base, runtime: { kind: 'local', prepare: [{ upload_file: { src: '/a', dest: '../escape' } }] } }, /runtime\.prepare\[0\]\.upload_file\.dest: dest "\.\.\/escape" leaves/],
  ];
  for (const [input, message] of cases) expect(() => parseTaskRequest(input)).toThrow(message);
});

test('builder.config is strict: its chain-role options, unknown keys named by path', () => {
  expect(parseTaskRequest({ ...base, builder: { strategy: 'prefix_merging', config: { side: 'drop', retries: 'keep' } } }).builder.config).toEqual({ side: 'drop', retries: 'keep' });
  expect(() => parseTaskRequest({ ...base, builder: { strategy: 'prefix_merging', config: { any: 1 } } })).toThrow(/builder\.config.*any|builder\.config\.any/);
  expect(() => parseTaskRequest({ ...base, builder: { strategy: 'prefix_merging', config: { side_reward: 'half' } } })).toThrow(/builder\.config\.side_reward/);
});

test('open maps stay open: agent.settings, evaluator.config, metadata', () => {
  const task = parseTaskRequest({
    ...base, agent: { ...base.agent, settings: { api: 'x', nested: { a: 1 } } }, builder: { strategy: 'per_request' },
    evaluator: { strategy: 'test_on_output', config: { command: 'true' } }, metadata: { policy_version: 7, trainer_step: 3 },
  });
  expect(task.metadata).toEqual({ policy_version: '7', trainer_step: 3 });
  expect(task.agent.settings).toEqual({ api: 'x', nested: { a: 1 } });
});

test('the dispatch body carries the same TaskRequest contract', () => {
  const ok = dispatchSpecSchema.safeParse({ session_id: 's', task: base, sample_index: 0, attempt: 1 });
  expect(ok.success).toBe(true);
  const bad = dispatchSpecSchema.safeParse({ session_id: 's', task: { ...base, agent: { model_name: 'm' } }, sample_index: 0 });
  expect(bad.success).toBe(false);
  expect(formatIssues(bad.error!)).toContain('task.agent: agent needs a harness or a command');
  expect(dispatchSpecSchema.shape.task).toBe(taskRequestSchema);
});

test('the names the rollout server checks at submit are the gateway\'s registries', async () => {
  const { HARNESS_NAMES, EVALUATOR_NAMES } = await import('../../src/core/contracts/index.ts');
  const { HARNESS_ADAPTERS } = await import('../../src/gateway/harnesses/index.ts');
  const { EVALUATORS } = await import('../../src/gateway/evaluators/index.ts');
  expect([...HARNESS_NAMES].sort() as string[]).toEqual(Object.keys(HARNESS_ADAPTERS).sort());
  expect([...EVALUATOR_NAMES].sort() as string[]).toEqual(Object.keys(EVALUATORS).sort());
});
