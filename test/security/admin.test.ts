/**
 * Who may call the proxy's control endpoints (`/admin/*`, `GET /sessions/{id}/completions`): with an admin token,
 * only callers that present it; without one, admin only from loopback peers. The gateway (node, `polar serve`'s and
 * `polar run`'s stack) passes its control-plane token, and its own server refuses those paths without it whatever
 * proxy it was given; `polar proxy` takes `--admin-token` / $POLAR_ADMIN_TOKEN.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixedClock } from '../../src/core/clock.ts';
import { sequentialIds } from '../../src/core/ids.ts';
import { createEngineClient } from '../../src/engines/index.ts';
import { GatewayNode } from '../../src/gateway/node.ts';
import { bearerMatches, controlRefusal, isLoopbackAddress } from '../../src/proxy/admin-access.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { adHocSessions } from '../../src/proxy/sessions.ts';
import { startLocalStack } from '../../src/stack/local-stack.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { startFakeEngine, type FakeEngine } from '../support/fake-engine.ts';
import { lineMatching, REPO_ROOT } from '../support/polar-cli.ts';
import { startTestProxy, type TestProxy } from '../support/proxy-harness.ts';

const scratch = mkdtempSync(join(tmpdir(), 'polar-security-admin-'));
let engine: FakeEngine;
beforeAll(async () => {
  engine = await startFakeEngine({ shape: 'vllm', script: [{ kind: 'text', text: 'ok' }] });
});
afterAll(async () => {
  await engine.stop();
  rmSync(scratch, { recursive: true, force: true });
});

const post = (url: string, headers: Record<string, string> = {}, body?: unknown) =>
  fetch(url, { method: 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body) });
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** One chat call as session `key` (so the completions listing has something to expose). */
async function chat(base: string, key: string): Promise<void> {
  const response = await post(`${base}/v1/chat/completions`, { ...bearer(key), 'content-type': 'application/json' }, { model: 'm', messages: [{ role: 'user', content: 'hi there' }] });
  expect(response.status).toBe(200);
}

describe('admin-access rule', () => {
  test('isLoopbackAddress: 127/8, ::1 and IPv4-mapped loopback only', () => {
    for (const a of ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1', '0:0:0:0:0:0:0:1']) expect(isLoopbackAddress(a)).toBe(true);
    for (const a of ['10.0.0.5', '192.168.1.1', '::ffff:10.0.0.1', '128.0.0.1', 'fe80::1', '', 'localhost']) expect(isLoopbackAddress(a)).toBe(false);
  });

  test('bearerMatches needs the exact header', () => {
    expect(bearerMatches('Bearer s3cret', 's3cret')).toBe(true);
    for (const h of [null, undefined, '', 'Bearer s3cre', 'Bearer s3cret ', 'bearer s3cret', 's3cret']) expect(bearerMatches(h, 's3cret')).toBe(false);
  });

  test('controlRefusal: token when set (401); without one admin needs a loopback peer (403), captures stay open', () => {
    const req = (headers: Record<string, string> = {}) => new Request('http://x/admin/inference/pause', { method: 'POST', headers });
    const from = (address: string | null) => () => address;
    expect(controlRefusal('admin', req(bearer('t')), 't', from('10.0.0.9'))).toBeNull();
    expect(controlRefusal('admin', req(), 't', from('127.0.0.1'))?.kind).toBe('authentication');
    expect(controlRefusal('captures', req(bearer('u')), 't', from('127.0.0.1'))?.kind).toBe('authentication');
    expect(controlRefusal('admin', req(), null, from('127.0.0.1'))).toBeNull();
    expect(controlRefusal('admin', req(), '', from('10.0.0.9'))?.message).toContain('this caller is 10.0.0.9');
    expect(controlRefusal('admin', req(), undefined, null)?.kind).toBe('permission');
    // The listing always needs a credential: the admin token or the session's own key; an address is none.
    expect(controlRefusal('captures', req(), undefined, from('127.0.0.1'))?.kind).toBe('authentication');
    expect(controlRefusal('captures', req(), undefined, from('10.0.0.9'), () => true)).toBeNull();
    expect(controlRefusal('captures', req(bearer('t')), 't', from('10.0.0.9'), () => false)).toBeNull();
  });
});

describe('proxy app', () => {
  let withToken: TestProxy;
  let open: TestProxy;
  beforeAll(async () => {
    withToken = await startTestProxy({ engineUrl: engine.url, kind: 'vllm', options: { adminToken: 'adm1n' } });
    open = await startTestProxy({ engineUrl: engine.url, kind: 'vllm' });
  });
  afterAll(async () => {
    await withToken.stop();
    await open.stop();
  });

  test('with an admin token: /admin/* and the completions listing answer only with it, even from loopback', async () => {
    for (const path of ['inference/pause', 'inference/resume', 'policy_version']) {
      const body = path === 'policy_version' ? { policy_version: 'evil' } : undefined;
      expect((await post(`${withToken.url}/admin/${path}`, {}, body)).status).toBe(401);
      expect((await post(`${withToken.url}/admin/${path}`, bearer('wrong'), body)).status).toBe(401);
    }
    expect(withToken.app.gate.isPaused).toBe(false);
    expect(withToken.app.gate.policyVersion).toBeNull();
    const refused = await post(`${withToken.url}/admin/policy_version`, bearer('adm1n-not'), { policy_version: 'evil' });
    expect(((await refused.json()) as { error: { message: string } }).error.message).toContain('admin token');

    expect((await post(`${withToken.url}/admin/policy_version`, bearer('adm1n'), { policy_version: 'v9' })).status).toBe(200);
    expect(withToken.app.gate.policyVersion).toBe('v9');
    expect((await post(`${withToken.url}/admin/inference/pause`, bearer('adm1n'))).status).toBe(200);
    expect(withToken.app.gate.isPaused).toBe(true);
    expect((await post(`${withToken.url}/admin/inference/resume`, bearer('adm1n'))).status).toBe(200);
    expect(withToken.app.gate.isPaused).toBe(false);

    await chat(withToken.url, 'captured-1');
    expect((await fetch(`${withToken.url}/sessions/captured-1/completions`)).status).toBe(401);
    const listed = await fetch(`${withToken.url}/sessions/captured-1/completions`, { headers: bearer('adm1n') });
    expect(listed.status).toBe(200);
    expect(((await listed.json()) as { completions: unknown[] }).completions.length).toBe(1);
  });

  test('without a token: loopback callers (IPv4) may use admin; the listing needs the session\'s own key', async () => {
    expect((await post(`${open.url}/admin/policy_version`, {}, { policy_version: 'v2' })).status).toBe(200);
    expect(open.app.gate.policyVersion).toBe('v2');
    await chat(open.url, 'captured-2');
    expect((await fetch(`${open.url}/sessions/captured-2/completions`)).status).toBe(401);
    // Naming the session is not a credential; another session's key is not either.
    expect((await fetch(`${open.url}/sessions/captured-2/completions`, { headers: { 'x-polar-session': 'captured-2' } })).status).toBe(401);
    expect((await fetch(`${open.url}/sessions/captured-2/completions`, { headers: bearer('someone-else') })).status).toBe(401);
    const own = await fetch(`${open.url}/sessions/captured-2/completions`, { headers: bearer('captured-2') });
    expect(own.status).toBe(200);
    expect(((await own.json()) as { completions: unknown[] }).completions.length).toBe(1);
  });

  test('without a token: a non-loopback peer or an unknown peer gets 403 and changes nothing', async () => {
    const store = openStore(':memory:');
    const client = createEngineClient({ kind: 'vllm', url: engine.url, mode: 'chat', timeoutMs: 5000 });
    await client.probe();
    const app = createProxyApp({ engine: client, store, sessions: adHocSessions(), clock: fixedClock(), newId: sequentialIds() });
    try {
      const request = () => new Request('http://gw/admin/inference/pause', { method: 'POST' });
      // What Bun.serve passes as fetch's 2nd argument, reporting a remote peer.
      const remote = { requestIP: () => ({ address: '10.20.30.40', family: 'IPv4', port: 5555 }) };
      const viaRemote = await app.fetch(request(), remote);
      expect(viaRemote.status).toBe(403);
      expect(await viaRemote.text()).toContain('10.20.30.40');
      expect((await app.fetch(request())).status).toBe(403);
      expect(app.gate.isPaused).toBe(false);
      const viaLoopback = await app.fetch(request(), { requestIP: () => ({ address: '::1', family: 'IPv6', port: 1 }) });
      expect(viaLoopback.status).toBe(200);
      expect(app.gate.isPaused).toBe(true);
    } finally {
      store.close();
    }
  });

  test('without a token: an IPv6 loopback server answers admin', async () => {
    const store = openStore(':memory:');
    const client = createEngineClient({ kind: 'vllm', url: engine.url, mode: 'chat', timeoutMs: 5000 });
    await client.probe();
    const app = createProxyApp({ engine: client, store, sessions: adHocSessions() });
    let server: ReturnType<typeof Bun.serve> | null = null;
    try {
      server = Bun.serve({ hostname: '::1', port: 0, fetch: app.fetch });
    } catch {
      // no IPv6 loopback on this host: the mapped and plain forms are covered by the unit test above
    }
    try {
      if (server) expect((await post(`http://[::1]:${server.port}/admin/policy_version`, {}, { policy_version: 'six' })).status).toBe(200);
      expect(app.gate.policyVersion).toBe(server ? 'six' : null);
    } finally {
      await server?.stop(true);
      store.close();
    }
  });
});

describe('gateway node', () => {
  let store: Store;
  let real: GatewayNode;
  let fakeProxy: GatewayNode;
  const proxied: string[] = [];
  beforeAll(async () => {
    store = openStore(':memory:');
    const client = createEngineClient({ kind: 'vllm', url: engine.url, mode: 'chat', timeoutMs: 5000 });
    await client.probe();
    real = new GatewayNode({
      nodeId: 'sec-real', store, workRoot: join(scratch, 'work-real'), controlPlaneToken: 'cp-tok',
      proxy: (sessions, control) => createProxyApp({ engine: client, store, sessions, options: { adminToken: control.adminToken } }),
    });
    // A proxy that ignores the token it is handed: the node's own server must still guard the control paths.
    fakeProxy = new GatewayNode({
      nodeId: 'sec-fake', store, workRoot: join(scratch, 'work-fake'), controlPlaneToken: 'cp-tok',
      proxy: () => ({ fetch: (req) => (proxied.push(new URL(req.url).pathname), Response.json({ proxied: true })) }),
    });
    await real.start();
    await fakeProxy.start();
  });
  afterAll(async () => {
    await real.stop();
    await fakeProxy.stop();
    store.close();
  });

  test('the proxy on a gateway with a control-plane token: admin and completions need the token', async () => {
    expect((await post(`${real.url}/admin/inference/pause`)).status).toBe(401);
    expect((await post(`${real.url}/admin/policy_version`, bearer('nope'), { policy_version: 'x' })).status).toBe(401);
    expect((await fetch(`${real.url}/sessions/any-id/completions`)).status).toBe(401);
    const ok = await post(`${real.url}/admin/policy_version`, bearer('cp-tok'), { policy_version: 'v3' });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ policy_version: 'v3' });
    const listed = await fetch(`${real.url}/sessions/any-id/completions`, { headers: bearer('cp-tok') });
    expect(listed.status).toBe(200);
    expect(await listed.json()).toEqual({ session_id: 'any-id', completions: [] });
  });

  test('the node refuses control paths without the token before its proxy sees them, however they are spelled', async () => {
    for (const path of ['/admin/inference/pause', '/admin', '//admin//policy_version', '/%61dmin/inference/pause', '/sessions/s1/completions', '/sessions/s1/completions/']) {
      const response = await fetch(`${fakeProxy.url}${path}`, { method: path.includes('completions') ? 'GET' : 'POST' });
      expect({ path, status: response.status }).toEqual({ path, status: 401 });
    }
    expect(proxied).toEqual([]);
    // Model traffic and the control paths with the token still reach the proxy.
    expect((await post(`${fakeProxy.url}/v1/chat/completions`)).status).toBe(200);
    expect((await post(`${fakeProxy.url}/admin/inference/pause`, bearer('cp-tok'))).status).toBe(200);
    expect(proxied).toEqual(['/v1/chat/completions', '/admin/inference/pause']);
  });
});

test('startLocalStack (polar serve): the control-plane token guards the proxy admin; an explicit adminToken replaces the loopback rule', async () => {
  const store = openStore(':memory:');
  const closedStore = openStore(':memory:');
  const stack = await startLocalStack({
    store, engine: { kind: 'vllm', url: engine.url, mode: 'chat', timeoutMs: 5000 },
    node: { workRoot: join(scratch, 'stack-work') }, controlPlaneToken: 'stack-tok', log: () => undefined,
  });
  const closed = await startLocalStack({
    store: closedStore, engine: { kind: 'vllm', url: engine.url, mode: 'chat', timeoutMs: 5000 },
    node: { nodeId: 'closed', workRoot: join(scratch, 'stack-work-2') }, adminToken: 'run-secret', log: () => undefined,
  });
  try {
    expect((await post(`${stack.node.url}/admin/inference/pause`)).status).toBe(401);
    expect((await post(`${stack.node.url}/admin/policy_version`, bearer('stack-tok'), { policy_version: 'p1' })).status).toBe(200);
    // No control-plane token, but an admin token: loopback alone is not enough.
    expect((await post(`${closed.node.url}/admin/inference/pause`)).status).toBe(401);
    expect((await post(`${closed.node.url}/admin/inference/pause`, bearer('run-secret'))).status).toBe(200);
    expect((await post(`${closed.node.url}/admin/inference/resume`, bearer('run-secret'))).status).toBe(200);
  } finally {
    await stack.stop();
    await closed.stop();
    store.close();
    closedStore.close();
  }
});

describe('polar proxy --admin-token', () => {
  const stopAll: Array<() => Promise<unknown>> = [];
  afterAll(async () => {
    for (const stop of stopAll) await stop();
  });
  /** `polar proxy` with `extra` flags and `env` added to this process's environment; resolves to its URL. */
  const start = async (extra: string[], env: Record<string, string> = {}) => {
    const dir = mkdtempSync(join(scratch, 'cli-'));
    const proc = Bun.spawn([process.execPath, join(REPO_ROOT, 'src/main.ts'), 'proxy', '--port', '0', '--engine', 'vllm', '--engine-url', engine.url, '--db', join(dir, 'p.db'), ...extra], {
      cwd: dir, env: { ...process.env, ...env }, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe',
    });
    stopAll.push(() => (proc.kill('SIGTERM'), proc.exited));
    const line = await lineMatching(proc.stdout, /listening on/);
    const url = /listening on (http:\/\/\S+)/.exec(line)?.[1];
    if (!url) throw new Error(`polar proxy did not start: ${line} ${await new Response(proc.stderr).text()}`);
    return url;
  };

  test('the flag and $POLAR_ADMIN_TOKEN both turn the token on; an empty flag is a usage error', async () => {
    const flagged = await start(['--admin-token', 'flag-tok']);
    expect((await post(`${flagged}/admin/inference/pause`)).status).toBe(401);
    expect((await post(`${flagged}/admin/inference/pause`, bearer('flag-tok'))).status).toBe(200);
    expect((await fetch(`${flagged}/sessions/default/completions`)).status).toBe(401);
    const fromEnv = await start([], { POLAR_ADMIN_TOKEN: 'env-tok' });
    expect((await post(`${fromEnv}/admin/policy_version`, {}, { policy_version: 'x' })).status).toBe(401);
    expect((await post(`${fromEnv}/admin/policy_version`, bearer('env-tok'), { policy_version: 'x' })).status).toBe(200);
    const empty = Bun.spawnSync([process.execPath, 'src/main.ts', 'proxy', '--port', '0', '--engine', 'vllm', '--engine-url', engine.url, '--admin-token', ' '], { cwd: REPO_ROOT, stderr: 'pipe' });
    expect(empty.exitCode).toBe(2);
    expect(empty.stderr.toString()).toContain('--admin-token must not be empty');
  });

  test('a non-loopback --host needs an admin token (exit 2 naming the fix) unless --insecure-no-token, which warns', async () => {
    const refused = Bun.spawnSync([process.execPath, 'src/main.ts', 'proxy', '--port', '0', '--host', '0.0.0.0', '--engine', 'vllm', '--engine-url', engine.url], {
      cwd: REPO_ROOT, stderr: 'pipe', env: { ...process.env, POLAR_ADMIN_TOKEN: '' },
    });
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr.toString()).toMatch(/refusing to listen on a non-loopback address \(--host 0\.0\.0\.0\) without an admin token.*--admin-token/);
    const dir = mkdtempSync(join(scratch, 'cli-'));
    const proc = Bun.spawn([process.execPath, join(REPO_ROOT, 'src/main.ts'), 'proxy', '--port', '0', '--host', '0.0.0.0', '--insecure-no-token', '--engine', 'vllm', '--engine-url', engine.url, '--db', join(dir, 'p.db')], {
      cwd: dir, env: { ...process.env, POLAR_ADMIN_TOKEN: '' }, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe',
    });
    stopAll.push(() => (proc.kill('SIGTERM'), proc.exited));
    expect(await lineMatching(proc.stdout, /listening on/)).toContain('listening on http://0.0.0.0:');
    proc.kill('SIGTERM');
    await proc.exited;
    expect(await new Response(proc.stderr).text()).toMatch(/WARNING polar proxy: listening on 0\.0\.0\.0 WITHOUT an admin token/);
  });

  test('requests without a key land in a session with an unguessable id, minted anew at each start', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const dir = mkdtempSync(join(scratch, 'cli-'));
      const proc = Bun.spawn([process.execPath, join(REPO_ROOT, 'src/main.ts'), 'proxy', '--port', '0', '--admin-token', 'a-tok', '--engine', 'vllm', '--engine-url', engine.url, '--db', join(dir, 'p.db')], {
        cwd: dir, env: process.env, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe',
      });
      stopAll.push(() => (proc.kill('SIGTERM'), proc.exited));
      // Start-up lines go to stdout in any order: read until both the address and the default session are printed.
      const reader = proc.stdout.getReader();
      let out = '';
      while (!/listening on http/.test(out) || !/go to session anon-/.test(out)) {
        const { value, done } = await reader.read();
        if (done) break;
        out += new TextDecoder().decode(value);
      }
      reader.releaseLock();
      const url = /listening on (http:\/\/\S+)/.exec(out)![1]!;
      const reply = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }) });
      expect(reply.status).toBe(200);
      proc.kill('SIGTERM');
      await proc.exited;
      const id = /requests without an API key go to session (anon-[0-9a-f]{24})/.exec(out)?.[1];
      expect(id).toBeDefined();
      ids.push(id!);
    }
    expect(ids[0]).not.toBe(ids[1]);
  });
});
