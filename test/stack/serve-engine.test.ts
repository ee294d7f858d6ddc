/**
 * Engine reachability on the service path: `polar serve` with an engine that is down starts anyway, warns, and both
 * `GET /health` documents report `engine: {ok: false, error}`; the monitor notices when the engine comes up; the
 * bounded wait `polar run` uses succeeds for a slow starter and fails with a clear error for a dead one.
 */
import { afterAll, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EngineHealthMonitor, engineLivenessCheck, waitForEngine } from '../../src/engines/health.ts';
import { startPolar, useScratch } from '../support/polar-cli.ts';
import { unusedPort } from '../support/fake-engine.ts';

const { dir: scratch, procs } = useScratch('polar-serve-engine-');
const servers: ReturnType<typeof Bun.serve>[] = [];
afterAll(() => {
  for (const s of servers) s.stop(true);
});

/** A fake engine that lists one model (what the liveness check reads). */
function fakeEngine(port = 0): ReturnType<typeof Bun.serve> {
  const s = Bun.serve({
    hostname: '127.0.0.1', port,
    fetch: (req) => (new URL(req.url).pathname === '/v1/models' ? Response.json({ object: 'list', data: [{ id: 'm' }] }) : new Response('no', { status: 404 })),
  });
  servers.push(s);
  return s;
}

test('polar serve with a dead engine: starts, warns, GET /health reports engine.ok false on the server and the node', async () => {
  const port = unusedPort();
  const config = join(scratch, 'dead-engine.yaml');
  writeFileSync(config, [
    `engine: {kind: vllm, url: "http://127.0.0.1:${port}"}`,
    'rollout: {port: 0}',
    `gateway: {nodes: [{node_id: box-0, port: 0, work_root: ${join(scratch, 'work')}}]}`,
    `store: {path: ${join(scratch, 'dead.db')}}`, '',
  ].join('\n'));
  const { proc: serve, line } = await startPolar(['serve', '--config', config], procs);
  const server = line.match(/rollout server on (http:\/\/\S+?),/)?.[1];
  const node = line.match(/gateway box-0 on (http:\/\/\S+?)(,|$)/)?.[1];
  expect(server).toBeDefined();
  expect(node).toBeDefined();
  const health = (await (await fetch(`${server}/health`)).json()) as { ok: boolean; engine: { ok: boolean; error: string | null } };
  expect(health.ok).toBe(true);
  expect(health.engine.ok).toBe(false);
  expect(health.engine.error).toContain(`127.0.0.1:${port}`);
  const nodeHealth = (await (await fetch(`${node}/health`)).json()) as { node_id: string; engine: { ok: boolean; error: string | null } };
  expect(nodeHealth.node_id).toBe('box-0');
  expect(nodeHealth.engine.ok).toBe(false);
  serve.kill('SIGTERM');
  expect(await serve.exited).toBe(0);
  const stderr = await new Response(serve.stderr).text();
  expect(stderr).toContain(`WARNING: engine vllm at http://127.0.0.1:${port} is not reachable`);
}, 30_000);

test('EngineHealthMonitor: down at start (one warning), up after the engine starts (logged), down again', async () => {
  const port = unusedPort();
  const lines: string[] = [];
  const monitor = new EngineHealthMonitor({
    check: engineLivenessCheck({ kind: 'vllm', url: `http://127.0.0.1:${port}` }), describe: 'engine vllm', intervalMs: 60_000, log: (l) => lines.push(l),
  });
  const first = await monitor.start();
  expect(first.ok).toBe(false);
  expect(first.error).toMatch(/GET \/v1\/models unreachable/);
  expect(lines).toHaveLength(1);
  await monitor.checkNow();
  expect(lines).toHaveLength(1); // still down: no repeated warning
  const engine = fakeEngine(port);
  await monitor.checkNow();
  expect(monitor.state()).toEqual({ ok: true, error: null });
  expect(lines.at(-1)).toBe('engine vllm is reachable again');
  engine.stop(true);
  await monitor.checkNow();
  expect(monitor.state().ok).toBe(false);
  expect(lines.at(-1)).toMatch(/^WARNING: engine vllm is not reachable/);
  monitor.stop();
});

test('engineLivenessCheck sends the engine key; a rejected key is a failure that says so', async () => {
  const s = Bun.serve({
    hostname: '127.0.0.1', port: 0,
    fetch: (req) => (req.headers.get('authorization') === 'Bearer k1' ? Response.json({ data: [{ id: 'm' }] }) : Response.json({ error: 'bad key' }, { status: 401 })),
  });
  servers.push(s);
  await engineLivenessCheck({ kind: 'openai', url: `http://127.0.0.1:${s.port}/`, apiKey: 'k1' })();
  await expect(engineLivenessCheck({ kind: 'openai', url: `http://127.0.0.1:${s.port}`, apiKey: 'k2' })()).rejects.toThrow(/HTTP 401/);
});

test('waitForEngine: waits for a slow starter, fails with the last error after the bound', async () => {
  const port = unusedPort();
  setTimeout(() => fakeEngine(port), 300);
  const started = Date.now();
  await waitForEngine(engineLivenessCheck({ kind: 'sglang', url: `http://127.0.0.1:${port}` }), { describe: 'engine sglang', timeoutMs: 5000, intervalMs: 100 });
  expect(Date.now() - started).toBeGreaterThanOrEqual(250);

  const dead = unusedPort();
  const t0 = Date.now();
  await expect(waitForEngine(engineLivenessCheck({ kind: 'vllm', url: `http://127.0.0.1:${dead}` }), { describe: 'engine vllm', timeoutMs: 400, intervalMs: 100 }))
    .rejects.toThrow(/^engine vllm is unreachable \(waited 0\.\d s\): GET \/v1\/models unreachable/);
  const took = Date.now() - t0;
  expect(took).toBeGreaterThanOrEqual(400);
  expect(took).toBeLessThan(3000);
});

test('polar gateway with a dead engine: listens, warns, and its GET /health reports engine.ok false', async () => {
  const port = unusedPort();
  const config = join(scratch, 'gateway.yaml');
  writeFileSync(config, [
    `engine: {kind: sglang, url: "http://127.0.0.1:${port}"}`,
    `gateway: {nodes: [{node_id: gw-1, port: 0, work_root: ${join(scratch, 'gw-work')}}]}`,
    `store: {path: ${join(scratch, 'gw.db')}}`, '',
  ].join('\n'));
  const { proc: gateway, line } = await startPolar(['gateway', '--config', config, '--node-id', 'gw-1'], procs);
  const url = line.match(/listening on (http:\/\/\S+)/)?.[1];
  expect(url).toBeDefined();
  const health = (await (await fetch(`${url}/health`)).json()) as { node_id: string; engine: { ok: boolean; error: string | null } };
  expect(health.node_id).toBe('gw-1');
  expect(health.engine.ok).toBe(false);
  expect(health.engine.error).toContain(`127.0.0.1:${port}`);
  gateway.kill('SIGTERM');
  expect(await gateway.exited).toBe(0);
  expect(await new Response(gateway.stderr).text()).toContain(`polar gateway: WARNING: engine sglang at http://127.0.0.1:${port} is not reachable`);
}, 30_000);
