/**
 * A streaming client that leaves while its status is held (src/proxy/synthetic-stream.ts holdStatus: the engine call
 * takes 400 ms, the keep-alive interval is 2 s, so no byte has gone out): the proxy still sees it through the
 * request's signal, so the record is flagged client-disconnected, and with abortOnClientDisconnect the engine call is
 * aborted and nothing is recorded, as when the client leaves mid-stream.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import type { CompletionRecord } from '../../src/core/records.ts';
import { startEngineProxy, startFakeEngine, type EngineProxy, type FakeEngine } from '../support/fake-engine.ts';
import { startTestProxy, type TestProxy } from '../support/proxy-harness.ts';

const ENGINE_DELAY_MS = 400;
let engine: FakeEngine;
let slow: EngineProxy;
let proxy: TestProxy;
let aborting: TestProxy;

beforeAll(async () => {
  engine = await startFakeEngine({ shape: 'vllm', servedModel: 'qwen3-test', script: [{ kind: 'text', text: 'late reply' }] });
  slow = startEngineProxy(engine.url, async (pathname) => {
    if (pathname === '/v1/chat/completions') await Bun.sleep(ENGINE_DELAY_MS);
  });
  proxy = await startTestProxy({ engineUrl: slow.url, kind: 'vllm', options: { keepaliveIntervalMs: 2000 } });
  aborting = await startTestProxy({ engineUrl: slow.url, kind: 'vllm', options: { keepaliveIntervalMs: 2000, abortOnClientDisconnect: true } });
});
afterAll(async () => {
  await proxy.stop();
  await aborting.stop();
  slow.stop();
  await engine.stop();
});

const body = JSON.stringify({ model: 'm', max_tokens: 20, stream: true, messages: [{ role: 'user', content: 'hello' }] });
async function recordsOf(p: TestProxy, session: string, n: number, waitMs = 3000): Promise<CompletionRecord[]> {
  for (let i = 0; i < waitMs / 10; i++) {
    const records = p.store.completions.listBySession(session);
    if (records.length >= n) return records;
    await Bun.sleep(10);
  }
  return p.store.completions.listBySession(session);
}
const flagged = (rec: CompletionRecord) => rec.warnings.some((w) => w.startsWith('client-disconnected:'));

for (const path of ['/v1/messages', '/v1/responses']) {
  test(`${path}: a client that leaves during the hold → the record is flagged client-disconnected`, async () => {
    const session = `gone-hold-${path.split('/').pop()}`;
    const abort = new AbortController();
    const pending = fetch(`${proxy.url}${path}`, { method: 'POST', headers: { 'x-api-key': session, authorization: `Bearer ${session}` }, body: path === '/v1/responses' ? JSON.stringify({ model: 'm', stream: true, input: 'hello' }) : body, signal: abort.signal }).catch((e: unknown) => e);
    await Bun.sleep(100);
    abort.abort();
    await pending;
    const [record] = await recordsOf(proxy, session, 1);
    expect(record).toBeDefined();
    expect(flagged(record!)).toBe(true);
  });
}

test('abortOnClientDisconnect: a client that leaves during the hold → the engine call is aborted, no record', async () => {
  const abort = new AbortController();
  const pending = fetch(`${aborting.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': 'abort-hold' }, body, signal: abort.signal }).catch((e: unknown) => e);
  await Bun.sleep(100);
  abort.abort();
  await pending;
  const records = await recordsOf(aborting, 'abort-hold', 1, 1500);
  expect(records.length).toBe(0);
});
