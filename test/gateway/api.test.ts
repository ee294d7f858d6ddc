/**
 * The node over HTTP with the local runtime and the shell harness: POST/GET/DELETE /sessions, /health, /events,
 * control-plane token, callback with retries, test_on_output in the work tree and in a fresh runtime, proxy fallback.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SessionResult, TaskRequest } from '../../src/core/records.ts';
import { GatewayNode } from '../../src/gateway/node.ts';
import { openStore, type Store } from '../../src/store/index.ts';

const root = mkdtempSync(join(tmpdir(), 'polar-gw-api-'));
const repo = join(root, 'repo');
mkdirSync(repo);
writeFileSync(join(repo, 'value.txt'), 'wrong\n');

let store: Store;
let node: GatewayNode;
let callbackServer: ReturnType<typeof Bun.serve>;
const callbacks: { auth: string | null; body: SessionResult }[] = [];
let failFirstCallbacks = 2;

beforeAll(async () => {
  callbackServer = Bun.serve({
    hostname: '127.0.0.1', port: 0,
    fetch: async (req) => {
      if (failFirstCallbacks-- > 0) return new Response('busy', { status: 503 });
      callbacks.push({ auth: req.headers.get('authorization'), body: (await req.json()) as SessionResult });
      return Response.json({ ok: true });
    },
  });
  store = openStore(':memory:');
  node = new GatewayNode({
    nodeId: 'node-a', store, workRoot: join(root, 'work'), controlPlaneToken: 'tok',
    capacity: { init_workers: 2, ready_buffer: 1, max_run_workers: 2, postrun_workers: 2 },
    runtimeDefaults: { isolation: 'none' }, callbackRetry: { baseDelayMs: 5 },
    proxy: (sessions) => ({ fetch: (req) => Response.json({ proxied: new URL(req.url).pathname, session: sessions.resolve(req.headers.get('x-api-key') ?? '') }) }),
  });
  await node.start();
});
afterAll(async () => {
  await node.stop();
  callbackServer.stop(true);
  store.close();
  rmSync(root, { recursive: true, force: true });
});

const auth = { authorization: 'Bearer tok', 'content-type': 'application/json' };
const fixTask = (id: string, command: string, refresh: boolean): TaskRequest => ({
  task_id: id, instruction: 'make value.txt say right', num_samples: 1, timeout_seconds: 30,
  agent: { command, model_name: 'm' }, builder: { strategy: 'per_request' },
  runtime: { kind: 'local', prepare: [{ upload_dir: { src: repo, dest: '.' } }] },
  evaluator: { strategy: 'test_on_output', config: { command: 'grep -qx right value.txt' }, refresh_runtime: refresh },
});

async function post(body: unknown, headers: Record<string, string> = auth) {
  return fetch(`${node.url}/sessions`, { method: 'POST', headers, body: JSON.stringify(body) });
}

test('health reports stages and capacity; the session API needs the token', async () => {
  const health = await (await fetch(`${node.url}/health`)).json();
  expect(health).toEqual({
    status: 'ok', node_id: 'node-a', ok: true, stages: { queued: 0, init: 0, ready: 0, running: 0, postrun: 0 }, capacity: { init_workers: 2, ready_buffer: 1, max_run_workers: 2, postrun_workers: 2 },
    sandbox: { kind: 'local', isolation: 'none', network: 'host', limits: null },
    metrics: { init_queue_depth: 0, init_inflight: 0, ready_depth: 0, run_inflight: 0, postrun_queue_depth: 0, postrun_inflight: 0 },
    available_init: 2, available_run: 2, available_postrun: 2, inference_paused: false, paused_since: null,
  });
  expect((await post({}, { 'content-type': 'application/json' })).status).toBe(401);
  expect((await post({ nope: 1 })).status).toBe(400);
  expect((await fetch(`${node.url}/sessions/unknown`, { headers: auth })).status).toBe(404);
});

for (const refresh of [false, true]) {
  test(`test_on_output ${refresh ? 'in a fresh runtime after applying the diff' : 'in the work tree'}: a fix scores 1, no fix 0; callback retried with the token`, async () => {
    const events: string[] = [];
    const off = node.onEvent((e) => { if (e.session_id === `fix-${refresh}`) events.push(e.status); });
    const sse = await fetch(`${node.url}/events`, { headers: auth });
    const reader = sse.body!.getReader();
    const fix = await post({ session_id: `fix-${refresh}`, task: fixTask('t1', 'echo right > value.txt', refresh), sample_index: 0, callback_url: `http://127.0.0.1:${callbackServer.port}/cb` });
    expect(fix.status).toBe(202);
    // Capacity is free, so INIT pulled it before dispatch returned.
    expect(await fix.json()).toEqual({ session_id: `fix-${refresh}`, status: 'INITIALIZING' });
    expect((await post({ session_id: `fix-${refresh}`, task: fixTask('t1', 'true', refresh), sample_index: 0 })).status).toBe(409);
    await post({ session_id: `nofix-${refresh}`, task: fixTask('t1', 'echo still wrong > other.txt', refresh), sample_index: 1 });
    const [good, bad] = await Promise.all([node.wait(`fix-${refresh}`), node.wait(`nofix-${refresh}`)]);
    off();
    expect(good.status).toBe('COMPLETED');
    expect(good.trajectory.metadata.evaluation?.outcome_reward).toBe(1);
    expect((good.trajectory.metadata.evaluation?.details as { fresh_runtime: boolean }).fresh_runtime).toBe(refresh);
    expect(bad.trajectory.metadata.evaluation?.outcome_reward).toBe(0);
    expect(events).toEqual(['REGISTERED', 'INITIALIZING', 'READY', 'RUNNING', 'POST_RUN', 'BUILDING', 'EVALUATING', 'COMPLETED']);
    expect(store.results.get(`fix-${refresh}`)?.status).toBe('COMPLETED');
    const view = await (await fetch(`${node.url}/sessions/fix-${refresh}`, { headers: auth })).json();
    expect(view).toMatchObject({ session_id: `fix-${refresh}`, status: 'COMPLETED', node_id: 'node-a' });
    for (let i = 0; i < 100 && !callbacks.some((c) => c.body.session_id === `fix-${refresh}`); i++) await Bun.sleep(10);
    const cb = callbacks.find((c) => c.body.session_id === `fix-${refresh}`)!;
    expect(cb.auth).toBe('Bearer tok');
    expect(cb.body.status).toBe('COMPLETED');
    const text = new TextDecoder().decode((await reader.read()).value) + new TextDecoder().decode((await reader.read()).value);
    expect(text).toContain('event: session');
    await reader.cancel();
  });
}

test('DELETE cancels a running session; cleanup runs and the status is ERROR "cancelled"', async () => {
  await post({ session_id: 'long', task: { ...fixTask('t2', 'sleep 30', false), evaluator: undefined }, sample_index: 0 });
  while (node.get('long')?.status !== 'RUNNING') await Bun.sleep(5);
  // While it runs, the proxy fallback resolves its key; other paths of the session API are not proxied.
  const proxied = await (await fetch(`${node.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': 'long' } })).json();
  expect(proxied).toEqual({ proxied: '/v1/messages', session: { session_id: 'long', task_id: 't2', attempt: 0 } });
  const del = await fetch(`${node.url}/sessions/long`, { method: 'DELETE', headers: auth });
  expect(((await del.json()) as { cancelled: boolean }).cancelled).toBe(true);
  const result = await node.wait('long');
  expect(result).toMatchObject({ status: 'ERROR', error: 'cancelled' });
  expect(result.timing.run_ms).toBeLessThan(5000);
  expect(node.directory.resolve('long')).toBeNull();
});
