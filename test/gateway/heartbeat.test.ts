/**
 * A gateway node registers with its rollout server and heartbeats its stage counts and the status of every session
 * it holds (the server shows RUNNING/POST_RUN from these), with the control-plane token.
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GatewayNode } from '../../src/gateway/node.ts';
import { openStore } from '../../src/store/index.ts';

const root = mkdtempSync(join(tmpdir(), 'polar-gw-heartbeat-'));
const seen: { method: string; path: string; auth: string | null; body: Record<string, unknown> }[] = [];
const rollout = Bun.serve({
  hostname: '127.0.0.1', port: 0,
  fetch: async (req) => {
    const text = await req.text();
    seen.push({ method: req.method, path: new URL(req.url).pathname, auth: req.headers.get('authorization'), body: (text === '' ? {} : JSON.parse(text)) as Record<string, unknown> });
    return Response.json({ ok: true });
  },
});
const store = openStore(':memory:');
let engine = { ok: true, error: null as string | null };
const node = new GatewayNode({
  engineHealth: () => engine,
  nodeId: 'hb', store, workRoot: join(root, 'work'), controlPlaneToken: 'tok', runtimeDefaults: { isolation: 'none' },
  rollout: { url: `http://127.0.0.1:${rollout.port}`, heartbeatIntervalMs: 50 },
  proxy: () => ({ fetch: () => new Response('no proxy in this test', { status: 404 }) }),
});
afterAll(async () => {
  await node.stop();
  rollout.stop(true);
  store.close();
  rmSync(root, { recursive: true, force: true });
});

test('registration, then heartbeats with stage counts and per-session statuses, all with the token', async () => {
  await node.start();
  node.dispatch({
    session_id: 'hb-s1', sample_index: 0,
    task: { task_id: 't', instruction: 'wait', num_samples: 1, timeout_seconds: 30, agent: { command: 'sleep 1', model_name: 'm' }, builder: { strategy: 'per_request' } },
  });
  const deadline = Date.now() + 10_000;
  const running = () => seen.find((s) => s.path === '/nodes/hb/heartbeat' && (s.body.sessions as Record<string, string> | undefined)?.['hb-s1'] === 'RUNNING');
  while (!running() && Date.now() < deadline) await Bun.sleep(25);
  const register = seen.find((s) => s.path === '/nodes/register');
  expect(register?.body).toMatchObject({ node_id: 'hb', url: node.url });
  const beat = running();
  expect(beat?.body).toMatchObject({ stages: { running: 1 }, sessions: { 'hb-s1': 'RUNNING' }, engine_ok: true });
  // The engine's health rides along, so the rollout server stops dispatching to a node whose engine is down.
  engine = { ok: false, error: 'engine unreachable' };
  const before = seen.length;
  while (!seen.slice(before).some((s) => s.path === '/nodes/hb/heartbeat' && s.body.engine_ok === false) && Date.now() < deadline) await Bun.sleep(25);
  expect(seen.slice(before).some((s) => s.path === '/nodes/hb/heartbeat' && s.body.engine_ok === false)).toBe(true);
  expect(seen.every((s) => s.auth === 'Bearer tok')).toBe(true);
  await node.wait('hb-s1');
});

test('stopping: the node asks to be drained, then says it is leaving, both with the token', async () => {
  await node.stop({ reason: 'interrupted: SIGTERM', graceMs: 1000 });
  const calls = seen.filter((s) => s.path.startsWith('/nodes/hb') && !s.path.endsWith('/heartbeat')).map((s) => [s.method, s.path, s.auth]);
  expect(calls).toEqual([['DELETE', '/nodes/hb', 'Bearer tok'], ['POST', '/nodes/hb/leave', 'Bearer tok']]);
});
