/**
 * The session deadline (timeout_seconds, from INIT) bounds the evaluation (src/gateway/postrun.ts): an evaluator that
 * hangs ends its session TIMEOUT, whether it throws when aborted (test_on_output) or returns what it had (harbor), and
 * the time a session waited for a POSTRUN slot behind slow evaluations is not charged to it. One POSTRUN slot, local
 * runtime without a sandbox, real processes.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TaskRequest } from '../../src/core/records.ts';
import { GatewayNode } from '../../src/gateway/node.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { taskRequest } from '../support/tasks.ts';

const root = mkdtempSync(join(tmpdir(), 'polar-eval-deadline-'));
let store: Store;
let node: GatewayNode;
beforeAll(async () => {
  store = openStore(':memory:');
  node = new GatewayNode({ nodeId: 'n1', store, workRoot: join(root, 'work'), runtimeDefaults: { isolation: 'none' }, capacity: { postrun_workers: 1 } });
  await node.start();
});
afterAll(async () => {
  await node.stop();
  store.close();
  rmSync(root, { recursive: true, force: true });
});

const task = (id: string, timeoutSeconds: number, evaluator: TaskRequest['evaluator']): TaskRequest =>
  taskRequest(id, { instruction: 'do it', timeout_seconds: timeoutSeconds, agent: { command: 'true', model_name: 'm' }, builder: { strategy: 'per_request' }, evaluator });

test('a hanging evaluator that throws when aborted (test_on_output): TIMEOUT at the deadline, untrainable, reward 0', async () => {
  const started = Date.now();
  node.dispatch({ session_id: 'hang-throws', task: task('t-hang-throws', 2, { strategy: 'test_on_output', config: { command: 'sleep 1000' } }), sample_index: 0 });
  const result = await node.wait('hang-throws');
  expect(Date.now() - started).toBeLessThan(20_000); // the evaluator's own limit is 600 s
  expect([result.status, result.error, result.trajectory.status]).toEqual(['TIMEOUT', 'timeout_seconds exceeded while evaluating', 'TIMEOUT']);
  expect(result.trajectory.metadata.timeout_kind).toBe('total');
  expect(result.trajectory.metadata.evaluation).toMatchObject({ outcome_reward: 0 });
  expect(result.trajectory.metadata.training_filter.trainable).toBe(false);
});

test('a hanging evaluator that returns what it had when aborted (harbor): TIMEOUT too, never a COMPLETED reward 0', async () => {
  const tests = join(root, 'tests');
  mkdirSync(tests, { recursive: true });
  writeFileSync(join(tests, 'test.sh'), 'sleep 1000\n');
  node.dispatch({ session_id: 'hang-returns', task: task('t-hang-returns', 2, { strategy: 'harbor', config: { tests_dir: tests } }), sample_index: 0 });
  const result = await node.wait('hang-returns');
  expect([result.status, result.error, result.trajectory.status]).toEqual(['TIMEOUT', 'timeout_seconds exceeded while evaluating', 'TIMEOUT']);
  expect(result.trajectory.metadata.training_filter.trainable).toBe(false);
});

test('waiting for the POSTRUN slot behind a slow evaluation does not time a session out', async () => {
  node.dispatch({ session_id: 'slow', task: task('t-slow', 30, { strategy: 'test_on_output', config: { command: 'sleep 4' } }), sample_index: 0 });
  await Bun.sleep(300);
  node.dispatch({ session_id: 'quick', task: task('t-quick', 2, { strategy: 'test_on_output', config: { command: 'true' } }), sample_index: 0 });
  const quick = await node.wait('quick');
  expect(quick.status).toBe('COMPLETED');
  expect(quick.timing.e2e_ms).toBeGreaterThan(2000); // it did wait past its own deadline for the slot
  expect((await node.wait('slow')).status).toBe('COMPLETED');
}, 20_000);
