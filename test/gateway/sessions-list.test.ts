/**
 * `GET /sessions?status&task_id&limit` on a gateway node (the Python Polar gateway's listing), behind the control-plane
 * token in either header; `GET /health` with the reference's `status`, `metrics` and `available_*` keys.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TaskRequest } from '../../src/core/records.ts';
import { GatewayNode } from '../../src/gateway/node.ts';
import { startSessionServer } from '../../src/gateway/session-api.ts';
import { openStore, type Store } from '../../src/store/index.ts';

const root = mkdtempSync(join(tmpdir(), 'polar-gw-list-'));
let store: Store;
let node: GatewayNode;

beforeAll(async () => {
  store = openStore(':memory:');
  node = new GatewayNode({
    nodeId: 'node-l', store, workRoot: join(root, 'work'), controlPlaneToken: 'tok',
    capacity: { init_workers: 2, ready_buffer: 1, max_run_workers: 2, postrun_workers: 2 },
    runtimeDefaults: { isolation: 'none' },
  });
  await node.start();
});
afterAll(async () => {
  await node.stop();
  store.close();
  rmSync(root, { recursive: true, force: true });
});

const task = (id: string, command: string): TaskRequest => ({
  task_id: id, instruction: 'x', num_samples: 1, timeout_seconds: 30, agent: { command, model_name: 'm' }, builder: { strategy: 'per_request' },
});

test('lists the node\'s sessions, filtered by status and task_id, limited, without their results', async () => {
  node.dispatch({ session_id: 'ps_list_a', task: task('list-a', 'true'), sample_index: 0 });
  node.dispatch({ session_id: 'ps_list_b', task: task('list-b', 'sleep 30'), sample_index: 0 });
  await node.wait('ps_list_a');
  const get = async (query: string, headers: Record<string, string> = { 'x-polar-control-token': 'tok' }) => {
    const response = await fetch(`${node.url}/sessions${query}`, { headers });
    return { status: response.status, body: (await response.json()) as { sessions: { session_id: string; status: string; task_id: string; result?: unknown }[]; node_id: string } };
  };
  const all = await get('');
  expect(all.status).toBe(200);
  expect(all.body.node_id).toBe('node-l');
  expect(all.body.sessions.map((s) => s.session_id)).toEqual(['ps_list_a', 'ps_list_b']);
  expect(all.body.sessions.every((s) => !('result' in s))).toBe(true);
  expect((await get('?status=COMPLETED')).body.sessions.map((s) => s.session_id)).toEqual(['ps_list_a']);
  expect((await get('?task_id=list-b')).body.sessions.map((s) => s.task_id)).toEqual(['list-b']);
  expect((await get('?limit=1')).body.sessions).toHaveLength(1);
  expect((await get('?limit=0')).status).toBe(400);
  const bogus = await get('?status=BOGUS');
  expect(bogus.status).toBe(400);
  expect((bogus.body as unknown as { error: string }).error).toBe('status must be one of REGISTERED, INITIALIZING, READY, RUNNING, POST_RUN, BUILDING, EVALUATING, COMPLETED, ERROR, TIMEOUT, got "BOGUS"');
  expect((await get('?status=completed')).status).toBe(400);
  expect((await get('', {})).status).toBe(401);
  expect((await get('', { authorization: 'Bearer tok' })).status).toBe(200);
  for (let i = 0; i < 100 && node.get('ps_list_b')?.status !== 'RUNNING'; i++) await Bun.sleep(50);
  const health = (await (await fetch(`${node.url}/health`)).json()) as Record<string, unknown>;
  expect(health).toMatchObject({ status: 'ok', node_id: 'node-l', metrics: { run_inflight: 1, init_queue_depth: 0 }, available_run: 1, inference_paused: false, paused_since: null });
  node.cancel('ps_list_b');
  await node.wait('ps_list_b');
});

test('GET /health reports the pause state the node reports for its proxy', async () => {
  const host = {
    nodeId: 'node-p', capacity: node.capacity, events: node.events, dispatch: () => { throw new Error('unused'); }, get: () => null, list: () => [], cancel: () => false,
    engineHealth: () => null, sandbox: () => node.sandbox(), stageCounts: () => node.stageCounts(), engineBusyFraction: () => null,
    metricsText: () => node.metricsText(),
    inferencePause: () => ({ inference_paused: true, paused_since: 1_700_000_000_000 }),
  };
  const server = startSessionServer(host, { host: '127.0.0.1', port: 0, token: 'tok' });
  try {
    expect(await (await fetch(`http://127.0.0.1:${server.port}/health`)).json()).toMatchObject({ node_id: 'node-p', inference_paused: true, paused_since: 1_700_000_000_000 });
  } finally {
    await server.stop(true);
  }
});
