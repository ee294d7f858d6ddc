/**
 * A chat-mode engine answer's prompt ids go from the engine answer reader (Int32Array) through the capture into the
 * record and the store without the proxy building their JS array (core/int32-twin.ts `definePromptIds`): the record
 * that reaches `onRecord` still holds them lazily, and whoever reads it gets exactly the ids the engine echoed, as
 * does the stored record read back. vLLM and SGLang shapes, JSON and SSE.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { fixedClock } from '../../src/core/clock.ts';
import { sequentialIds } from '../../src/core/ids.ts';
import type { CompletionRecord } from '../../src/core/records.ts';
import { createEngineClient } from '../../src/engines/index.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { adHocSessions } from '../../src/proxy/sessions.ts';
import { SimServer } from '../../src/sim/server.ts';
import { openStore } from '../../src/store/index.ts';
import { fakeIds, startFakeEngine, type FakeEngine } from '../support/fake-engine.ts';
import { sessionRecords, startTestProxy, type TestProxy } from '../support/proxy-harness.ts';

/** ~6 KB of text per user turn, so the echoed prompt makes answers above the reader's 16 KB threshold. */
const turnText = (turn: number) => `turn ${turn}: ` + 'the quick brown fox jumps over the lazy dog. '.repeat(140);

describe.each(['vllm', 'sglang'] as const)('engine shape %s', (shape) => {
  let engine: FakeEngine;
  let proxy: TestProxy;
  const hooked: Array<{ record: CompletionRecord; lazy: boolean }> = [];
  beforeAll(async () => {
    engine = await startFakeEngine({ shape, servedModel: 'qwen3-test', script: [{ kind: 'text', text: 'ok' }] });
    proxy = await startTestProxy({
      engineUrl: engine.url,
      kind: shape,
      onRecord: (record) => hooked.push({ record, lazy: Object.getOwnPropertyDescriptor(record, 'prompt_ids')!.get !== undefined }),
    });
  });
  afterAll(async () => {
    await proxy.stop();
    await engine.stop();
  });

  for (const stream of [false, true]) {
    test(`${stream ? 'SSE' : 'JSON'}: a growing session's records hold the echoed ids lazily, and read back exactly`, async () => {
      const session = `lazy-${shape}-${stream}`;
      const messages: Array<{ role: string; content: string }> = [];
      const from = engine.requests.length;
      hooked.length = 0;
      for (let turn = 0; turn < 3; turn++) {
        messages.push({ role: 'user', content: turnText(turn) });
        const response = await fetch(`${proxy.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${session}` },
          body: JSON.stringify({ model: 'm', messages, stream }),
        });
        expect(response.status).toBe(200);
        await response.text();
        messages.push({ role: 'assistant', content: 'ok' });
      }
      const sent = engine.requests.slice(from).map(({ body }) => fakeIds(JSON.stringify({ messages: body.messages, tools: body.tools ?? [] })));
      expect(sent.map((ids) => ids.length > 4000)).toEqual([true, true, true]);
      // Committed, counted in the metrics and handed to onRecord without the JS array being built.
      expect(hooked.map((h) => h.lazy)).toEqual([true, true, true]);
      expect(hooked.map((h) => h.record.prompt_ids)).toEqual(sent);
      expect(hooked.map((h) => Object.getOwnPropertyDescriptor(h.record, 'prompt_ids')!.get)).toEqual([undefined, undefined, undefined]);
      expect(JSON.parse(JSON.stringify(hooked[2]!.record)).prompt_ids).toEqual(sent[2]);
      const stored = await sessionRecords(proxy, session);
      expect(stored.map((r) => r.prompt_ids)).toEqual(sent);
      expect(stored.map((r) => r.capture_error)).toEqual([null, null, null]);
    });
  }
});

test('an engine that streams (the simulator in vLLM shape): the chunk echoing the ids is read the same way', async () => {
  const TASK = 'lazy-stream';
  const sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0, scripts: { [TASK]: { variants: { a: { weight: 1, steps: [{ say: 'done' }] } } } } });
  const store = openStore(':memory:');
  const engine = createEngineClient({ kind: 'vllm', url: sim.url, mode: 'chat', timeoutMs: 10_000, stream: 'always', now: fixedClock(), newId: sequentialIds() });
  await engine.probe();
  const hooked: Array<{ record: CompletionRecord; lazy: boolean }> = [];
  const app = createProxyApp({
    engine, store, sessions: adHocSessions({ taskId: TASK }), clock: fixedClock(), newId: sequentialIds(),
    onRecord: (record) => hooked.push({ record, lazy: Object.getOwnPropertyDescriptor(record, 'prompt_ids')!.get !== undefined }),
  });
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: app.fetch, idleTimeout: 0 });
  try {
    const messages: Array<{ role: string; content: string }> = [];
    for (let turn = 0; turn < 3; turn++) {
      // ~20 KB of words per turn: even the first answer's echoed ids are above the reader's 16 KB threshold.
      messages.push({ role: 'user', content: Array.from({ length: 2000 }, (_, i) => `w${(i * 7 + turn) % 997}`).join(' ') + ` turn ${turn}` });
      const response = await fetch(`http://127.0.0.1:${server.port}/v1/chat/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer lazy-sse' }, body: JSON.stringify({ model: 'm', messages, stream: true }),
      });
      expect(response.status).toBe(200);
      const text = await response.text();
      expect(text).toContain('data: [DONE]');
      messages.push({ role: 'assistant', content: 'done' });
    }
    const stored = store.completions.listBySession('lazy-sse');
    expect(stored.map((r) => r.capture_error)).toEqual([null, null, null]);
    expect(stored.map((r) => r.prompt_ids.length > 4000)).toEqual([true, true, true]);
    expect(hooked.map((h) => h.lazy)).toEqual([true, true, true]);
    expect(hooked.map((h) => h.record.prompt_ids)).toEqual(stored.map((r) => r.prompt_ids));
    // The ids are the simulator's own tokenisation of what it was sent: each prompt extends the previous one.
    expect(stored[1]!.prompt_ids.slice(0, stored[0]!.prompt_ids.length)).toEqual(stored[0]!.prompt_ids);
  } finally {
    await server.stop(true);
    store.close();
    await sim.stop();
  }
});
