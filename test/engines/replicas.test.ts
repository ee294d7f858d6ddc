/**
 * Engine replicas (src/engines/replicas.ts) against two real simulators: session affinity, least-outstanding routing,
 * draining, health checks, per-replica metrics, and token data that stays correct when a session moves replicas.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { Registry } from 'prom-client';
import { fixedClock } from '../../src/core/clock.ts';
import type { CompletionRecord } from '../../src/core/records.ts';
import { sequentialIds } from '../../src/core/ids.ts';
import { GatewayError } from '../../src/core/errors.ts';
import { createEngineClient, ReplicaRouter } from '../../src/engines/index.ts';
import type { EngineClient } from '../../src/engines/types.ts';
import { replicaMetrics } from '../../src/observe/replica-metrics.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { adHocSessions } from '../../src/proxy/sessions.ts';
import { rescoreCompletion } from '../../src/sim/policy.ts';
import { SimServer } from '../../src/sim/server.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { buildTrajectory } from '../../src/trace/index.ts';

const TASK = 'task-replicas';
const script = {
  variants: {
    solve: {
      weight: 1,
      steps: [
        { think: 'I should look at the files first.', shell: 'ls -la' },
        { think: 'Now read the main file.', shell: 'cat main.py' },
        { say: 'The project has one file, main.py.' },
      ],
    },
  },
};
const schema = { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] };
const tools = [{ type: 'function', function: { name: 'bash', description: 'Run a shell command', parameters: schema } }];

let sims: SimServer[];
beforeAll(async () => {
  sims = await Promise.all([0, 1].map(() => SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0, scripts: { [TASK]: script } })));
});
afterAll(async () => {
  await Promise.all(sims.map((s) => s.stop()));
});

async function stack(mode: 'chat' | 'token', urls: string[] = sims.map((s) => s.url)) {
  const registry = new Registry();
  const engine = createEngineClient({
    kind: 'sim', url: 'http://127.0.0.1:1', urls, mode, timeoutMs: 10_000, now: fixedClock(), newId: sequentialIds(),
    goldenRate: 0, log: () => {}, replicas: { healthIntervalMs: 0, metrics: replicaMetrics(registry) },
  }) as ReplicaRouter;
  expect(engine).toBeInstanceOf(ReplicaRouter);
  await engine.probe();
  const store: Store = openStore(':memory:');
  const app = createProxyApp({ engine, store, sessions: adHocSessions({ taskId: TASK }), clock: fixedClock(), newId: sequentialIds() });
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: app.fetch, idleTimeout: 0 });
  const base = `http://127.0.0.1:${server.port}`;
  const post = async (key: string, body: unknown) => {
    const response = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: JSON.stringify(body) });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`HTTP ${response.status}: ${text}`);
    return JSON.parse(text) as Record<string, any>;
  };
  /** One tool-loop turn of session `key`; returns the updated messages. */
  const turn = async (key: string, messages: unknown[], n: number) => {
    const answer = await post(key, { model: 'm', messages, tools });
    const message = answer.choices[0].message;
    if (n === 2) return { messages, text: message.content as string };
    messages.push({ role: 'assistant', content: null, tool_calls: message.tool_calls });
    messages.push({ role: 'tool', tool_call_id: message.tool_calls[0].id, content: n === 0 ? 'main.py' : 'print("hi")' });
    return { messages, text: '' };
  };
  const close = async () => {
    await server.stop(true);
    engine.close();
    store.close();
  };
  const admin = (path: string, body?: unknown) => fetch(base + path, body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { engine, store, registry, turn, close, admin };
}

/**
 * Every record captured cleanly with the simulator's own logprobs, and each prompt starts with the previous record's
 * prompt + response (strictly longer when asked): token data stays right across replicas.
 */
function expectExtendingCapture(records: CompletionRecord[], opts: { strictlyLonger?: boolean } = {}) {
  for (const [i, rec] of records.entries()) {
    expect(rec.capture_error).toBeNull();
    expect(rec.logprobs).toEqual(rescoreCompletion(rec.prompt_ids, rec.response_ids));
    if (i > 0) {
      const head = [...records[i - 1]!.prompt_ids, ...records[i - 1]!.response_ids];
      expect(rec.prompt_ids.slice(0, head.length)).toEqual(head);
      if (opts.strictlyLonger) expect(rec.prompt_ids.length).toBeGreaterThan(head.length);
    }
  }
}

const start = () => [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'What is in this project?' }];

describe('engine replicas', () => {
  test('token mode: a session whose replica is drained continues on the other one with an extending prompt, one chain', async () => {
    const s = await stack('token');
    try {
      const messages = start();
      await s.turn('sess-a', messages, 0);
      const first = s.store.completions.listBySession('sess-a')[0]!;
      const firstUrl = first.engine_id.slice(first.engine_id.indexOf('@') + 1);
      expect(sims.map((x) => x.url)).toContain(firstUrl);
      // Affinity: the second turn goes where the first went.
      await s.turn('sess-a', messages, 1);
      expect(s.store.completions.listBySession('sess-a')[1]!.engine_id).toBe(first.engine_id);
      // Drain that replica through the proxy's admin endpoint: the third turn moves.
      const drainResponse = await s.admin('/admin/engine/replicas/drain', { url: firstUrl });
      expect(drainResponse.status).toBe(200);
      expect(((await drainResponse.json()) as any).replica).toMatchObject({ url: firstUrl, draining: true, sessions: 1 });
      expect((await s.admin('/admin/engine/replicas/drain', { url: 42 })).status).toBe(400);
      const { text } = await s.turn('sess-a', messages, 2);
      expect(text).toContain('The project has one file');
      const records = s.store.completions.listBySession('sess-a');
      expect(records.length).toBe(3);
      expect(records[2]!.engine_id).not.toBe(first.engine_id);
      expect(records[2]!.engine_id.startsWith('sim@')).toBe(true);
      expectExtendingCapture(records, { strictlyLonger: true });
      const trajectory = buildTrajectory(records, { strategy: 'prefix_merging', session_id: 'sess-a', task_id: TASK, harness: 'test', status: 'COMPLETED', eotIds: sims[0]!.tokenizer.eosTokenIds });
      expect(trajectory.metadata.reconstruction_stats.chains).toBe(1);
      const metrics = await s.registry.metrics();
      expect(metrics).toContain(`polar_engine_replica_draining{replica="${firstUrl}"} 1`);
      expect(metrics).toMatch(/polar_engine_replica_routed_total\{replica="[^"]+",reason="moved"\} 1/);
      expect(metrics).toContain(`polar_engine_replica_requests_total{replica="${firstUrl}"} 2`);
    } finally {
      await s.close();
    }
  });

  test('chat mode: new sessions spread by least outstanding requests, records stay valid after a drain', async () => {
    const s = await stack('chat');
    try {
      // Two sessions in flight at once land on different replicas (the first one holds a call when the second picks).
      const [a, b] = [start(), start()];
      await Promise.all([s.turn('c-a', a, 0), s.turn('c-b', b, 0)]);
      const ids = ['c-a', 'c-b'].map((k) => s.store.completions.listBySession(k)[0]!.engine_id);
      expect(new Set(ids).size).toBe(2);
      const aUrl = ids[0]!.slice(ids[0]!.indexOf('@') + 1);
      s.engine.setDraining(aUrl, true);
      await s.turn('c-a', a, 1);
      const recs = s.store.completions.listBySession('c-a');
      const listed = (await (await s.admin('/admin/engine/replicas')).json()) as any;
      expect(listed.replicas.map((r: any) => [r.url, r.draining])).toEqual(sims.map((x) => [x.url, x.url === aUrl]));
      expect(recs[1]!.engine_id).toBe(ids[1]!);
      for (const rec of recs) {
        expect(rec.mode).toBe('chat');
        expect(rec.capture_error).toBeNull();
        expect(rec.response_ids.length).toBe(rec.logprobs.length);
        expect(rec.response_ids.length).toBeGreaterThan(0);
      }
      // Draining both leaves nothing usable: a clear upstream error naming each replica.
      s.engine.setDraining(ids[1]!.slice(ids[1]!.indexOf('@') + 1), true);
      await expect(s.turn('c-b', b, 1)).rejects.toThrow(/no engine replica is usable/);
      expect(() => s.engine.setDraining('http://127.0.0.1:9', true)).toThrow(/no engine replica with URL/);
    } finally {
      await s.close();
    }
  });

  test('health checks take a replica out and put it back', async () => {
    let down = true;
    const registry = new Registry();
    const engine = createEngineClient({
      kind: 'sim', url: 'http://127.0.0.1:1', urls: sims.map((s) => s.url), mode: 'chat', timeoutMs: 10_000, log: () => {},
      replicas: { healthIntervalMs: 60_000, metrics: replicaMetrics(registry), check: (url) => async () => { if (down && url === sims[0]!.url) throw new Error('refused'); } },
    }) as ReplicaRouter;
    try {
      await engine.probe();
      await engine.checkHealth();
      expect(engine.replicas().map((r) => r.healthy)).toEqual([false, true]);
      expect(engine.replicas()[0]!.error).toContain('refused');
      expect(await registry.metrics()).toContain(`polar_engine_replica_healthy{replica="${sims[0]!.url}"} 0`);
      down = false;
      await engine.checkHealth();
      expect(engine.replicas().map((r) => r.healthy)).toEqual([true, true]);
    } finally {
      engine.close();
    }
  });
});

test('config: engine.urls reaches the engine client as replicas', async () => {
  const { engineSchema } = await import('../../src/config/sections/engine.ts');
  const { engineSpecFromConfig } = await import('../../src/cli/from-config.ts');
  const config = engineSchema.parse({ kind: 'sim', urls: sims.map((s) => s.url) });
  const spec = engineSpecFromConfig(config);
  expect(spec.urls).toEqual(sims.map((s) => s.url));
  const engine = createEngineClient({ ...spec, mode: 'chat', replicas: { healthIntervalMs: 0, metrics: replicaMetrics(new Registry()) } });
  expect(engine).toBeInstanceOf(ReplicaRouter);
  expect(engine.id).toBe(`sim@${sims.map((s) => s.url).join(',')}`);
  expect(() => engineSchema.parse({ urls: ['not a url'] })).toThrow();
  expect(createEngineClient({ ...engineSpecFromConfig(engineSchema.parse({ kind: 'sim' })), mode: 'chat' })).not.toBeInstanceOf(ReplicaRouter);
});

test('affinity: false routes each call by least outstanding requests alone (a session moves to the idle replica)', async () => {
  for (const affinity of [true, false]) {
    const engine = createEngineClient({
      kind: 'sim', url: 'http://127.0.0.1:1', urls: sims.map((s) => s.url), mode: 'chat', timeoutMs: 10_000, log: () => {},
      replicas: { healthIntervalMs: 0, affinity, metrics: replicaMetrics(new Registry()) },
    }) as ReplicaRouter;
    await engine.probe();
    const request = (text: string) => ({ model: 'm', messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text }] }], tools: [], sampling: { maxTokens: 4 }, warnings: [], stream: false }) as never;
    // Session x goes to replica 0 first; then replica 0 is busy with another session's call while x calls again.
    await engine.complete(request('hi'), { sessionId: 'x', requestId: 'r1' });
    const busy = engine.complete(request('hold'), { sessionId: 'y', requestId: 'r2' });
    const second = await engine.complete(request('again'), { sessionId: 'x', requestId: 'r3' });
    await busy;
    expect(second.engineId).toBe(`sim@${sims[affinity ? 0 : 1]!.url}`);
    engine.close();
  }
});

test('maxAffinitySessions bounds the remembered sessions; a session routed again is kept over quiet ones', async () => {
  const routedNew = async (maxAffinitySessions: number | undefined, sessionOrder: string[]) => {
    const registry = new Registry();
    const engine = createEngineClient({
      kind: 'sim', url: 'http://127.0.0.1:1', urls: sims.map((s) => s.url), mode: 'chat', timeoutMs: 10_000, log: () => {},
      replicas: { healthIntervalMs: 0, maxAffinitySessions, metrics: replicaMetrics(registry) },
    }) as ReplicaRouter;
    await engine.probe();
    const request = { model: 'm', messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: 'hi' }] }], tools: [], sampling: { maxTokens: 4 }, warnings: [], stream: false } as never;
    for (const [i, sessionId] of sessionOrder.entries()) await engine.complete(request, { sessionId, requestId: `r${i}` });
    const remembered = engine.replicas().reduce((n, r) => n + r.sessions, 0);
    const routed = (await registry.getSingleMetric('polar_engine_replica_routed_total')!.get()).values;
    const count = (reason: string) => routed.filter((v) => v.labels.reason === reason).reduce((n, v) => n + v.value, 0);
    engine.close();
    return { remembered, fresh: count('new'), hits: count('hit') };
  };
  // a, b, c, then a again: with room for 2, a was forgotten and is routed as a new session.
  expect(await routedNew(2, ['a', 'b', 'c', 'a'])).toEqual({ remembered: 2, fresh: 4, hits: 0 });
  expect(await routedNew(undefined, ['a', 'b', 'c', 'a'])).toEqual({ remembered: 3, fresh: 3, hits: 1 });
  // a routed again before c arrives is the most recent: b goes, a stays.
  expect(await routedNew(2, ['a', 'b', 'a', 'c', 'a', 'b'])).toEqual({ remembered: 2, fresh: 4, hits: 2 });
});

/** A replica in front of `target` that forwards everything, or answers every POST with 503 while `state.fail`. */
function flakyFront(target: string) {
  const state = { fail: false };
  const server = Bun.serve({
    port: 0, hostname: '127.0.0.1',
    async fetch(req) {
      const url = new URL(req.url);
      if (state.fail && req.method === 'POST') return Response.json({ error: { message: 'replica overloaded' } }, { status: 503 });
      const headers = new Headers(req.headers);
      headers.delete('host');
      const upstream = await fetch(target + url.pathname + url.search, { method: req.method, headers, body: req.method === 'GET' ? undefined : await req.text() });
      return new Response(await upstream.arrayBuffer(), { status: upstream.status, headers: { 'content-type': upstream.headers.get('content-type') ?? 'application/json' } });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, state, stop: () => server.stop(true) };
}

describe('a call that fails on its replica before any byte is retried once on another', () => {
  test('token mode, HTTP 503: the session moves to the healthy replica; one answer, an extending prompt, one chain', async () => {
    const front = flakyFront(sims[0]!.url);
    const s = await stack('token', [front.url, sims[1]!.url]);
    try {
      const messages = start();
      await s.turn('sess-r', messages, 0);
      expect(s.store.completions.listBySession('sess-r')[0]!.engine_id).toBe(`sim@${front.url}`);
      front.state.fail = true;
      await s.turn('sess-r', messages, 1); // 503 on the front, answered by the other replica
      const { text } = await s.turn('sess-r', messages, 2);
      expect(text).toContain('The project has one file');
      const records = s.store.completions.listBySession('sess-r');
      expect(records.map((r) => r.engine_id)).toEqual([`sim@${front.url}`, `sim@${sims[1]!.url}`, `sim@${sims[1]!.url}`]);
      expectExtendingCapture(records);
      const trajectory = buildTrajectory(records, { strategy: 'prefix_merging', session_id: 'sess-r', task_id: TASK, harness: 'test', status: 'COMPLETED', eotIds: sims[0]!.tokenizer.eosTokenIds });
      expect(trajectory.metadata.reconstruction_stats.chains).toBe(1);
      const [down, up] = s.engine.replicas();
      expect(down).toMatchObject({ url: front.url, healthy: false, sessions: 0 });
      expect(down!.error).toContain('503');
      expect(up).toMatchObject({ url: sims[1]!.url, healthy: true, sessions: 1 });
      const metrics = await s.registry.metrics();
      expect(metrics).toContain(`polar_engine_replica_errors_total{replica="${front.url}"} 1`);
      expect(metrics).toMatch(/polar_engine_replica_routed_total\{replica="[^"]+",reason="moved"\} 1/);
    } finally {
      await s.close();
      await front.stop();
    }
  });

  test('chat mode, connection refused: answered by the other replica, the record names it', async () => {
    const front = flakyFront(sims[0]!.url);
    const s = await stack('chat', [front.url, sims[1]!.url]);
    try {
      await front.stop(); // probed, then gone: its port refuses connections
      await s.turn('c-r', start(), 0);
      const [rec] = s.store.completions.listBySession('c-r');
      expect(rec!.engine_id).toBe(`sim@${sims[1]!.url}`);
      expect(rec!.response_ids.length).toBe(rec!.logprobs.length);
      expect(s.engine.replicas()[0]!.error).toContain('unreachable');
    } finally {
      await s.close();
    }
  });
});

test('no retry once part of a stream reached the caller, on a timeout, or with no other usable replica', async () => {
  const calls: string[] = [];
  const fake = (name: string, behaviour: 'ok' | 'upstream-after-event' | 'timeout' | 'upstream'): EngineClient => ({
    kind: 'sim', id: `sim@${name}`, mode: 'chat',
    probe: async () => {},
    servedModel: () => 'm',
    countTokens: async () => 1,
    streams: () => true,
    complete: async () => {
      calls.push(`${name}:complete`);
      if (behaviour === 'timeout') throw new GatewayError('timeout', `${name} timed out`);
      if (behaviour !== 'ok') throw new GatewayError('upstream', `${name} failed with HTTP 500`);
      return { ok: name } as never;
    },
    stream: async (_request, _ctx, onEvent) => {
      calls.push(`${name}:stream`);
      if (behaviour === 'upstream-after-event') {
        onEvent({ type: 'answered' });
        throw new GatewayError('upstream', `${name} failed mid-stream`);
      }
      if (behaviour !== 'ok') throw new GatewayError('upstream', `${name} failed with HTTP 502`);
      return { ok: name } as never;
    },
  });
  const router = (a: Parameters<typeof fake>[1], b: Parameters<typeof fake>[1] | null) => new ReplicaRouter(
    [{ url: 'http://a', client: fake('a', a) }, ...(b ? [{ url: 'http://b', client: fake('b', b) }] : [])],
    { healthIntervalMs: 0, metrics: replicaMetrics(new Registry()), log: () => {} },
  );
  const request = {} as never;
  const events: string[] = [];
  // Before any event: retried, and the caller gets only the second replica's answer.
  expect(await router('upstream', 'ok').stream(request, { sessionId: 's', requestId: 'r' }, (e) => events.push(e.type))).toMatchObject({ engineId: 'sim@b' });
  expect(calls.splice(0)).toEqual(['a:stream', 'b:stream']);
  expect(await router('upstream', 'ok').complete(request, { sessionId: 's', requestId: 'r' })).toMatchObject({ engineId: 'sim@b' });
  expect(calls.splice(0)).toEqual(['a:complete', 'b:complete']);
  // After an event reached the caller: final.
  await expect(router('upstream-after-event', 'ok').stream(request, { sessionId: 's', requestId: 'r' }, (e) => events.push(e.type))).rejects.toThrow(/mid-stream/);
  expect(calls.splice(0)).toEqual(['a:stream']);
  expect(events).toEqual(['answered']);
  // A timeout is not retried (the engine may still be generating); neither is a failure with no other replica.
  await expect(router('timeout', 'ok').complete(request, { sessionId: 's', requestId: 'r' })).rejects.toThrow(/timed out/);
  expect(calls.splice(0)).toEqual(['a:complete']);
  await expect(router('upstream', null).complete(request, { sessionId: 's', requestId: 'r' })).rejects.toThrow(/HTTP 500/);
  // Both fail: one retry only, the second error reaches the caller.
  await expect(router('upstream', 'upstream').complete(request, { sessionId: 's', requestId: 'r' })).rejects.toThrow(/b failed/);
  expect(calls.splice(0)).toEqual(['a:complete', 'a:complete', 'b:complete']);
});
