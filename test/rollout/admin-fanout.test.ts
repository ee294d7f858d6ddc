/**
 * Weight-sync fan-out through the rollout server: pause / policy_version / resume reach the real gateway node's proxy
 * (its `GET /health`-independent admin state changes), need the control-plane token, refuse bad bodies naming the
 * field, and a node that cannot be reached makes the answer 502 naming it while the others still answer.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { adminFanoutRoutes, fanOut } from '../../src/rollout/admin-fanout.ts';
import { startLocalStack, type LocalStack } from '../../src/stack/local-stack.ts';
import { openStore, type Store } from '../../src/store/index.ts';

const TOKEN = 'fanout-secret';
let stack: LocalStack;
let store: Store;
let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'polar-fanout-'));
  store = openStore(join(dir, 'polar.db'));
  stack = await startLocalStack({ store, node: { workRoot: join(dir, 'work') }, controlPlaneToken: TOKEN, heartbeatIntervalMs: 200, sim: { prefillTps: 0, decodeTps: 0 } });
  await stack.registered;
});
afterAll(async () => {
  await stack.stop();
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

const call = (path: string, body: unknown, token: string | null = TOKEN) =>
  fetch(`${stack.server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
/** A POST with headers only, no body and no content-length, over a plain socket; resolves with the raw response. */
function rawPost(url: string, header: string): Promise<string> {
  const { hostname, port, pathname } = new URL(url);
  return new Promise((resolve, reject) => {
    let out = '';
    const socket = connect(Number(port), hostname, () => socket.write(`POST ${pathname} HTTP/1.1\r\nHost: ${hostname}\r\n${header}\r\nConnection: close\r\n\r\n`));
    socket.on('data', (d) => (out += d.toString()));
    socket.on('end', () => resolve(out));
    socket.on('error', reject);
  });
}
const gatewayAdmin = async (path: string) =>
  (await (await fetch(`${stack.node.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } })).json()) as { paused: boolean; policy_version: string | null };

test('pause, policy_version and resume reach every gateway', async () => {
  expect((await call('/rollout/admin/inference/pause', {}, null)).status).toBe(401);
  const paused = await call('/rollout/admin/inference/pause', { timeout_s: 5 });
  expect(paused.status).toBe(200);
  const pausedBody = (await paused.json()) as any;
  expect(pausedBody.ok).toBe(true);
  expect(pausedBody.nodes).toHaveLength(1);
  expect(pausedBody.nodes[0]).toMatchObject({ node_id: 'local', ok: true, body: { paused: true, drained_in_flight: 0 } });

  const version = await call('/rollout/admin/policy_version', { policy_version: 7 });
  expect(((await version.json()) as any).nodes[0].body).toEqual({ policy_version: '7', paused: true });
  expect(pausedBody.nodes[0].body).toMatchObject({ inflight: 0, engine: 'sim' }); // the Python Polar's generation status too

  // A POST with no body and no content-length (as `curl -X POST` sends it; fetch would add content-length: 0): the
  // defaults, as with {}.
  const raw = await rawPost(`${stack.server.url}/rollout/admin/inference/resume`, `Authorization: Bearer ${TOKEN}`);
  const resumed = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as any;
  expect(resumed.nodes[0].body).toMatchObject({ paused: false, policy_version: '7' });
  // The gateway's own state says the same: pausing it again directly reports the version the fan-out set.
  expect(await gatewayAdmin('/admin/inference/resume')).toMatchObject({ paused: false, policy_version: '7' });
});

test('bad bodies are 400s naming the field', async () => {
  const unknown = await call('/rollout/admin/inference/pause', { timeout: 5 });
  expect(unknown.status).toBe(400);
  expect(((await unknown.json()) as any).error).toContain('timeout: unknown field');
  const noVersion = await call('/rollout/admin/policy_version', {});
  expect(noVersion.status).toBe(400);
  expect(((await noVersion.json()) as any).error).toContain('policy_version must be a string or a number');
  const badTimeout = await call('/rollout/admin/inference/resume', { timeout_s: -1 });
  expect(badTimeout.status).toBe(400);
  const notJson = await fetch(`${stack.server.url}/rollout/admin/inference/pause`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: 'timeout=5' });
  expect(notJson.status).toBe(400);
});

test('an unreachable node makes the fan-out 502 and is named; the reachable one still answers', async () => {
  const dead = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('x') });
  const deadUrl = `http://127.0.0.1:${dead.port}`;
  await dead.stop(true);
  const response = await fanOut(
    { nodes: () => [{ node_id: 'local', url: stack.node.url }, { node_id: 'gone', url: deadUrl }], controlPlaneToken: TOKEN },
    '/admin/inference/resume', {}, 5,
  );
  expect(response.status).toBe(502);
  const body = (await response.json()) as any;
  expect(body.ok).toBe(false);
  expect(body.nodes.find((n: any) => n.node_id === 'local')).toMatchObject({ ok: true, status: 200 });
  expect(body.nodes.find((n: any) => n.node_id === 'gone')).toMatchObject({ ok: false, status: null });
  expect(body.nodes.find((n: any) => n.node_id === 'gone').error).toBeString();
});

test('timeout_s bounds each node: a gateway that never drains is named after it, and is told the bound', async () => {
  const seen: string[] = [];
  const stuck = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: (req) => (seen.push(new URL(req.url).pathname + new URL(req.url).search), new Promise<Response>(() => {})) });
  try {
    const routes = adminFanoutRoutes(
      { nodes: () => [{ node_id: 'stuck', url: `http://127.0.0.1:${stuck.port}` }], controlPlaneToken: null },
      (handler) => async (req: Request) => (await handler(req)) as Response,
      async (req) => req.json(),
    );
    const started = Date.now();
    const response = await routes['/rollout/admin/inference/pause'].POST(new Request('http://x/rollout/admin/inference/pause', { method: 'POST', body: JSON.stringify({ timeout_s: 0.5 }) }));
    expect(response.status).toBe(502);
    const body = (await response.json()) as any;
    expect(body.nodes[0]).toMatchObject({ node_id: 'stuck', ok: false, status: null });
    expect(body.nodes[0].error).toContain('no answer within');
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(seen).toEqual(['/admin/inference/pause?timeout_seconds=0.5']);
  } finally {
    await stuck.stop(true);
  }
});
