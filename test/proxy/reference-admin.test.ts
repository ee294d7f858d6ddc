/**
 * The Python Polar gateway's inference controls and budget endpoint on our proxy: `GET /admin/inference/status`,
 * `POST /admin/inference/pause?timeout_seconds=` (504 when the drain does not finish in time), `POST /v1/tokenize`.
 */
import { afterAll, expect, test } from 'bun:test';
import { staticSessions } from '../../src/proxy/sessions.ts';
import { startFakeEngine } from '../support/fake-engine.ts';
import { startTestProxy } from '../support/proxy-harness.ts';

const engine = await startFakeEngine({ shape: 'vllm', script: [{ kind: 'hang' }] });
const proxy = await startTestProxy({ engineUrl: engine.url, kind: 'vllm', timeoutMs: 10_000 });
afterAll(async () => {
  await proxy.stop();
  await engine.stop();
});

const post = (path: string, body?: unknown, headers: Record<string, string> = {}) =>
  fetch(`${proxy.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });

test('status, then a pause whose drain times out answers 504 and stays paused until resume', async () => {
  const status = (await (await fetch(`${proxy.url}/admin/inference/status`)).json()) as Record<string, unknown>;
  expect(status).toEqual({ paused: false, inflight: 0, base_url: engine.url, engine: 'vllm', policy_version: null });

  // One call that never finishes keeps the drain waiting.
  const hanging = post('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }] }, { authorization: 'Bearer sess-1' });
  for (let i = 0; i < 50 && ((await (await fetch(`${proxy.url}/admin/inference/status`)).json()) as { inflight: number }).inflight === 0; i++) await Bun.sleep(20);

  const started = Date.now();
  const timedOut = await post('/admin/inference/pause?timeout_seconds=0.3');
  expect(timedOut.status).toBe(504);
  expect(Date.now() - started).toBeGreaterThanOrEqual(250);
  const body = (await timedOut.json()) as Record<string, unknown>;
  expect(String(body.detail)).toContain('timed out waiting for inference requests to drain after 0.3s');
  expect(body).toMatchObject({ paused: true, inflight: 1 });

  expect((await post('/admin/inference/pause?timeout_seconds=abc')).status).toBe(400);
  const resumed = (await (await post('/admin/inference/resume')).json()) as Record<string, unknown>;
  expect(resumed).toMatchObject({ paused: false, engine: 'vllm' });
  await engine.stop(); // releases the hanging call
  await hanging;
});

test('pause and resume bodies: bad JSON, unknown keys and a doubled timeout are 400s that change nothing; {"timeout_s"} bounds the drain', async () => {
  const fresh = await startFakeEngine({ shape: 'vllm', script: [] });
  const p = await startTestProxy({ engineUrl: fresh.url, kind: 'vllm' });
  try {
    const send = (path: string, body: string | undefined) =>
      fetch(`${p.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const paused = async () => ((await (await fetch(`${p.url}/admin/inference/status`)).json()) as { paused: boolean }).paused;
    for (const [path, body, message] of [
      ['/admin/inference/pause', '{bad', 'malformed JSON body'],
      ['/admin/inference/pause', '{"timeout_seconds":"x","zzz":1}', 'timeout_seconds: unknown field (allowed: timeout_s)'],
      ['/admin/inference/pause', '[1]', 'body must be a JSON object'],
      ['/admin/inference/pause', '{"timeout_s":"soon"}', 'timeout_s must be a positive number of seconds, got "soon"'],
      ['/admin/inference/pause?timeout_seconds=5', '{"timeout_s":5}', 'give the drain timeout once'],
    ] as const) {
      const answer = await send(path, body);
      expect(answer.status).toBe(400);
      expect(((await answer.json()) as { error: { message: string } }).error.message).toContain(message);
      expect(await paused()).toBe(false);
    }
    // No body, an empty one and {} are the defaults; {"timeout_s"} is the rollout server's spelling of the bound.
    for (const body of [undefined, '', '{}', '{"timeout_s": 2}']) {
      const answer = await send('/admin/inference/pause', body);
      expect(answer.status).toBe(200);
      expect(await paused()).toBe(true);
      expect((await send('/admin/inference/resume', body === '{"timeout_s": 2}' ? '{}' : body)).status).toBe(200);
      expect(await paused()).toBe(false);
    }
    // resume takes no field: a key is a 400 and the gate stays paused.
    expect((await send('/admin/inference/pause', undefined)).status).toBe(200);
    for (const body of ['{"zzz":1}', '{bad']) {
      const refused = await send('/admin/inference/resume', body);
      expect(refused.status).toBe(400);
      expect(await paused()).toBe(true);
    }
    expect((await send('/admin/inference/resume', undefined)).status).toBe(200);
  } finally {
    await p.stop();
    await fresh.stop();
  }
});

test('/v1/tokenize counts the prompt through the engine, records nothing, and needs the session key', async () => {
  const fresh = await startFakeEngine({ shape: 'vllm', script: [] });
  const p = await startTestProxy({ engineUrl: fresh.url, kind: 'vllm', sessions: staticSessions({ 'sess-t': { session_id: 'sess-t', task_id: 't' } }) });
  try {
    const body = { messages: [{ role: 'user', content: 'count me' }] };
    const answer = await fetch(`${p.url}/v1/tokenize`, { method: 'POST', headers: { authorization: 'Bearer sess-t', 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(answer.status).toBe(200);
    const { count } = (await answer.json()) as { count: number };
    const seen = fresh.requests.find((r) => r.path === '/tokenize' && r.body.messages !== undefined)!;
    expect(seen.body.messages).toEqual(body.messages);
    expect(count).toBeGreaterThan(0);
    expect(p.store.completions.listBySession('sess-t')).toEqual([]);
    const anonymous = await fetch(`${p.url}/v1/tokenize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(anonymous.status).toBe(401);
    const stranger = await fetch(`${p.url}/v1/tokenize`, { method: 'POST', headers: { authorization: 'Bearer nobody', 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(stranger.status).toBe(401);
  } finally {
    await p.stop();
    await fresh.stop();
  }
});
