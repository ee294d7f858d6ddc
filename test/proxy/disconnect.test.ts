/**
 * A client that disconnects mid-call: the engine call still completes and its record is stored (a captured completion
 * is never dropped), flagged `client-disconnected` when the client left before the commit; a disconnect after the
 * commit is counted only (records are immutable). The engine is the fake engine behind a forwarder that delays chat
 * completions, so the client can leave while the engine works.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import type { CompletionRecord } from '../../src/core/records.ts';
import { startEngineProxy, startFakeEngine, type EngineProxy, type FakeEngine } from '../support/fake-engine.ts';
import { startTestProxy, type TestProxy } from '../support/proxy-harness.ts';

const ENGINE_DELAY_MS = 300;
let engine: FakeEngine;
let slow: EngineProxy;
let delayMs = 0;
let proxy: TestProxy;

beforeAll(async () => {
  engine = await startFakeEngine({ shape: 'vllm', servedModel: 'qwen3-test', script: [{ kind: 'text', text: 'late reply' }] });
  slow = startEngineProxy(engine.url, async (pathname) => {
    if (pathname === '/v1/chat/completions' && delayMs > 0) await Bun.sleep(delayMs);
  });
  proxy = await startTestProxy({ engineUrl: slow.url, kind: 'vllm', options: { keepaliveIntervalMs: 20 } });
  delayMs = ENGINE_DELAY_MS;
});
afterAll(async () => {
  await proxy.stop();
  slow.stop();
  await engine.stop();
});

const body = (stream: boolean) => JSON.stringify({ model: 'm', max_tokens: 20, stream, messages: [{ role: 'user', content: 'hello' }] });

/** Wait until the session has `n` records (the engine finishes after the client left). */
async function recordsOf(session: string, n: number): Promise<CompletionRecord[]> {
  for (let i = 0; i < 200; i++) {
    const records = proxy.store.completions.listBySession(session);
    if (records.length >= n) return records;
    await Bun.sleep(10);
  }
  throw new Error(`session ${session} never reached ${n} records`);
}

const flagged = (rec: CompletionRecord) => rec.warnings.some((w) => w.startsWith('client-disconnected:'));

test('stream: the client leaves while the engine works → record kept, capture intact, flagged client-disconnected', async () => {
  const before = proxy.counters.clientDisconnects;
  const abort = new AbortController();
  const response = await fetch(`${proxy.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': 'gone-stream' }, body: body(true), signal: abort.signal });
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  expect(new TextDecoder().decode((await reader.read()).value)).toContain('message_start');
  abort.abort();
  const [record] = await recordsOf('gone-stream', 1);
  expect(record!.capture_error).toBeNull();
  expect(record!.response_ids.length).toBeGreaterThan(0);
  expect(flagged(record!)).toBe(true);
  expect(proxy.counters.clientDisconnects).toBe(before + 1);
});

test('non-streaming: the client leaves while the engine works → record kept and flagged', async () => {
  const abort = new AbortController();
  const pending = fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer gone-json' }, body: body(false), signal: abort.signal }).catch((e: unknown) => e);
  await Bun.sleep(ENGINE_DELAY_MS / 3);
  abort.abort();
  expect(await pending).toBeInstanceOf(Error);
  const [record] = await recordsOf('gone-json', 1);
  expect(record!.capture_error).toBeNull();
  expect(flagged(record!)).toBe(true);
});

test('a client that reads the whole reply is not flagged', async () => {
  const response = await fetch(`${proxy.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': 'stays' }, body: body(true) });
  expect(await response.text()).toContain('late reply');
  const [record] = await recordsOf('stays', 1);
  expect(flagged(record!)).toBe(false);
  expect(record!.warnings).toEqual([]);
});

test('a cancel after the commit (reply queued, not yet read) is counted; the stored record stays unflagged', async () => {
  const before = { after: proxy.counters.disconnectsAfterCommit, flagged: proxy.counters.clientDisconnects };
  // In process: the reply's bytes are queued in the stream when the record is committed; nobody reads them yet.
  const response = await proxy.app.fetch(new Request('http://proxy/v1/messages', { method: 'POST', headers: { 'x-api-key': 'late-cancel' }, body: body(true) }));
  const [record] = await recordsOf('late-cancel', 1);
  await Bun.sleep(5); // the replay runs in the same turn as the commit; let it finish queueing
  await response.body!.cancel();
  expect(proxy.counters.disconnectsAfterCommit).toBe(before.after + 1);
  expect(proxy.counters.clientDisconnects).toBe(before.flagged);
  expect(flagged(proxy.store.completions.listBySession('late-cancel')[0]!)).toBe(false);
  expect(record!.capture_error).toBeNull();
});
