/**
 * GatewayNode.stop on a signal: a session whose harness has finished (in POSTRUN) gets the grace to be evaluated, and
 * its result is stored as usual; a session whose harness still runs is interrupted at once: its process ends and no
 * result is stored (the rollout server runs it again). Local runtime without a sandbox, real processes, no server.
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TaskRequest } from '../../src/core/records.ts';
import { GatewayNode } from '../../src/gateway/node.ts';
import { openStore } from '../../src/store/index.ts';
import { taskRequest } from '../support/tasks.ts';

const root = mkdtempSync(join(tmpdir(), 'polar-stop-grace-'));
const store = openStore(':memory:');
afterAll(() => {
  store.close();
  rmSync(root, { recursive: true, force: true });
});

const task = (id: string, command: string, evaluation: string): TaskRequest =>
  taskRequest(id, { instruction: 'do it', timeout_seconds: 60, agent: { command, model_name: 'm' }, builder: { strategy: 'per_request' }, evaluator: { strategy: 'test_on_output', config: { command: evaluation } } });

test('POSTRUN sessions finish within the grace and are stored; running ones are interrupted and not stored', async () => {
  const node = new GatewayNode({ nodeId: 'n1', store, workRoot: join(root, 'work'), runtimeDefaults: { isolation: 'none' } });
  await node.start();
  node.dispatch({ session_id: 'evaluating', task: task('t-eval', 'true', 'sleep 1.5'), sample_index: 0 });
  node.dispatch({ session_id: 'running', task: task('t-run', 'sleep 60', 'true'), sample_index: 0 });
  for (let i = 0; i < 200 && node.get('evaluating')?.status !== 'EVALUATING'; i++) await Bun.sleep(25);
  expect(node.get('evaluating')?.status).toBe('EVALUATING');
  expect(node.get('running')?.status).toBe('RUNNING');
  const started = Date.now();
  await node.stop({ reason: 'interrupted: SIGTERM', graceMs: 10_000 });
  expect(Date.now() - started).toBeLessThan(8_000); // not the harness's 60 s, not the whole grace
  expect(store.results.get('evaluating')).toMatchObject({ status: 'COMPLETED', error: null });
  expect(store.results.get('running')).toBeNull();
}, 30_000);
