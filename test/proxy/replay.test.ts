/**
 * Replays through the proxy: recorded harness traffic (Claude Code, pi, Qwen Code), the vLLM-vs-SGLang golden record
 * test, and SSE output split at random points (also inside multi-byte UTF-8) parsed by the official SDKs.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { CompletionRecord } from '../../src/core/records.ts';
import { startFakeEngine, type FakeEngine, type FakeReply } from '../support/fake-engine.ts';
import { startTestProxy, type TestProxy } from '../support/proxy-harness.ts';
import { HARNESS_TRAFFIC } from '../support/harness-traffic.ts';

const FIXTURES = HARNESS_TRAFFIC;
const fixtureDirs = ['claude-code/quiet', 'pi/anthropic', 'pi/chat', 'qwen-code/quiet'];

interface Fixture { name: string; url: string; body: Record<string, unknown> }

function loadFixtures(): Fixture[] {
  const out: Fixture[] = [];
  for (const dir of fixtureDirs) {
    for (const file of readdirSync(join(FIXTURES, dir)).filter((f) => f.endsWith('-request.json')).sort()) {
      const raw = JSON.parse(require('node:fs').readFileSync(join(FIXTURES, dir, file), 'utf8')) as { url: string; body: Record<string, unknown> };
      out.push({ name: `${dir}/${file}`, url: raw.url, body: { ...raw.body, model: 'polar-test-model' } });
    }
  }
  return out;
}

const replies: FakeReply[] = [
  { kind: 'tool-calls', calls: [{ name: 'Bash', arguments: { command: 'ls' } }], reasoning: 'I should list the files.' },
  { kind: 'text', text: 'I see README.txt and main.py — ✓ 完成' },
];

describe('harness traffic replays through the proxy', () => {
  let engine: FakeEngine;
  let proxy: TestProxy;
  beforeAll(async () => {
    engine = await startFakeEngine({ shape: 'vllm', script: (_body, i) => replies[i % 2]! });
    proxy = await startTestProxy({ engineUrl: engine.url, kind: 'vllm' });
  });
  afterAll(async () => {
    await proxy.stop();
    await engine.stop();
  });

  const fixtures = loadFixtures();
  test('the fixture set is present', () => {
    expect(fixtures.length).toBeGreaterThanOrEqual(8);
  });

  for (const fixture of fixtures) {
    test(`${fixture.name}: the engine gets a valid OpenAI Chat body and the reply decodes with the SDK`, async () => {
      const before = engine.chatRequests().length;
      const session = `replay-${fixture.name.replaceAll('/', '-')}`;
      const stream = fixture.body.stream === true;
      if (fixture.url.startsWith('/v1/messages')) {
        const client = new Anthropic({ baseURL: proxy.url, apiKey: session, maxRetries: 0 });
        const params = fixture.body as never;
        const beta = fixture.url.includes('beta=true');
        const message = stream
          ? await (beta ? client.beta.messages.stream(params) : client.messages.stream(params)).finalMessage()
          : await (beta ? client.beta.messages.create(params) : client.messages.create(params));
        expect(message.content.length).toBeGreaterThan(0);
        expect(['tool_use', 'end_turn']).toContain(message.stop_reason!);
      } else {
        const client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: session, maxRetries: 0 });
        if (stream) {
          const chunks = [];
          for await (const chunk of await client.chat.completions.create(fixture.body as never as OpenAI.ChatCompletionCreateParamsStreaming)) chunks.push(chunk);
          expect(chunks.length).toBeGreaterThan(0);
          expect(chunks.some((c) => c.choices[0]?.finish_reason)).toBe(true);
          if ((fixture.body.stream_options as { include_usage?: boolean } | undefined)?.include_usage) expect(chunks.at(-1)!.usage?.prompt_tokens).toBeGreaterThan(0);
        } else {
          const completion = await client.chat.completions.create(fixture.body as never as OpenAI.ChatCompletionCreateParamsNonStreaming);
          expect(completion.choices.length).toBe(1);
        }
      }
      const sent = engine.chatRequests().slice(before);
      expect(sent.length).toBe(1);
      const body = sent[0]!.body;
      const messages = body.messages as Array<{ role: string; content: unknown }>;
      expect(messages[0]!.role).toBe('system');
      expect(messages.filter((m) => m.role === 'system').length).toBe(1);
      const json = JSON.stringify(body);
      expect(json).not.toContain('x-anthropic-billing-header');
      expect(json).not.toContain('cache_control');
      expect(body.model).toBe('fake-model');
      expect(body.stream).toBe(false);
      for (const key of ['temperature', 'top_p', 'top_k', 'min_p', 'max_tokens']) expect(typeof body[key]).toBe('number');
      expect(Array.isArray(body.tools) && (body.tools as unknown[]).length > 0).toBe(true);
      for (const m of messages) if (m.role === 'tool') expect(typeof m.content).toBe('string');
      const [rec] = proxy.store.completions.listBySession(session);
      expect(rec!.capture_error).toBeNull();
      expect(rec!.request_body).toEqual(fixture.body);
    });
  }
});

describe('golden: vLLM shape and SGLang shape yield identical CompletionRecords', () => {
  test('same requests, same records (engine_id aside)', async () => {
    const script: FakeReply[] = [
      { kind: 'text', text: 'plain ✓' },
      { kind: 'tool-calls', calls: [{ name: 'Bash', arguments: { command: 'ls' } }] },
      { kind: 'tool-calls', calls: [{ name: 'Bash', arguments: { command: 'a' } }, { name: 'Bash', arguments: '{"command":"b"}' }], reasoning: 'both' },
      { kind: 'length', text: 'cut' },
    ];
    const recordsOf = async (shape: 'vllm' | 'sglang'): Promise<CompletionRecord[]> => {
      const engine = await startFakeEngine({ shape, script });
      const proxy = await startTestProxy({ engineUrl: engine.url, kind: shape });
      try {
        const a = new Anthropic({ baseURL: proxy.url, apiKey: 'golden', maxRetries: 0 });
        const o = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'golden', maxRetries: 0 });
        const tools = [{ name: 'Bash', input_schema: { type: 'object' as const, properties: { command: { type: 'string' } } } }];
        await a.messages.create({ model: 'polar-test-model', max_tokens: 50, system: 'sys', tools, messages: [{ role: 'user', content: 'one' }] });
        await a.messages.stream({ model: 'polar-test-model', max_tokens: 50, tools, messages: [{ role: 'user', content: 'two' }] }).finalMessage();
        await o.chat.completions.create({ model: 'gpt', temperature: 0.3, messages: [{ role: 'user', content: 'three' }], tools: [{ type: 'function', function: { name: 'Bash', parameters: {} } }] });
        await o.chat.completions.stream({ model: 'gpt', max_tokens: 3, messages: [{ role: 'user', content: 'four' }] }).finalChatCompletion();
        return proxy.store.completions.listBySession('golden').map((r) => ({ ...r, engine_id: '<engine>' }));
      } finally {
        await proxy.stop();
        await engine.stop();
      }
    };
    const vllm = await recordsOf('vllm');
    const sglang = await recordsOf('sglang');
    expect(vllm.length).toBe(4);
    expect(vllm.every((r) => r.capture_error === null && r.response_ids.length === r.logprobs.length)).toBe(true);
    expect(sglang).toEqual(vllm);
  });
});

/** Seeded chunking of a byte string into 1..17-byte pieces (splits inside UTF-8 sequences and between \n\n). */
function splitAtRandom(bytes: Uint8Array, seed: number): ReadableStream<Uint8Array> {
  let rest = bytes;
  let state = seed;
  return new ReadableStream({
    pull(controller) {
      if (rest.length === 0) return controller.close();
      state = (state * 1103515245 + 12345) & 0x7fffffff;
      const size = seed === 0 ? rest.length : (state % 17) + 1;
      controller.enqueue(rest.slice(0, size));
      rest = rest.slice(size);
    },
  });
}

describe('SSE split at random points parses to the same events', () => {
  let engine: FakeEngine;
  let proxy: TestProxy;
  beforeAll(async () => {
    engine = await startFakeEngine({
      shape: 'sglang',
      script: [{ kind: 'tool-calls', text: 'Déjà vu — 日本語 🎉 ', calls: [{ name: 'Bash', arguments: { command: 'echo ✓' } }, { name: 'Bash', arguments: { command: 'ls' } }], reasoning: '思考 thinking…' }],
    });
    proxy = await startTestProxy({ engineUrl: engine.url, kind: 'sglang' });
  });
  afterAll(async () => {
    await proxy.stop();
    await engine.stop();
  });

  /** A fetch that answers every call with the recorded bytes, split by `seed`. */
  const replayFetch = (bytes: Uint8Array, seed: number) =>
    (async () => new Response(splitAtRandom(bytes, seed), { status: 200, headers: { 'content-type': 'text/event-stream' } })) as unknown as typeof fetch;

  test('anthropic: every seed gives the same SDK events', async () => {
    const raw = await fetch(`${proxy.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'sse' },
      body: JSON.stringify({ model: 'm', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'go' }] }),
    });
    const bytes = new Uint8Array(await raw.arrayBuffer());
    const eventsFor = async (seed: number) => {
      const client = new Anthropic({ baseURL: 'http://replay.invalid', apiKey: 'x', maxRetries: 0, fetch: replayFetch(bytes, seed) });
      const events: unknown[] = [];
      for await (const event of await client.messages.create({ model: 'm', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'go' }] })) events.push(event);
      return events;
    };
    const baseline = await eventsFor(0);
    expect(baseline.length).toBeGreaterThan(8);
    expect(JSON.stringify(baseline)).toContain('日本語 🎉');
    for (const seed of [1, 2, 3, 42, 1234]) expect(await eventsFor(seed)).toEqual(baseline);
  });

  test('openai chat: every seed gives the same SDK chunks', async () => {
    const raw = await fetch(`${proxy.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sse' },
      body: JSON.stringify({ model: 'm', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'go' }] }),
    });
    const bytes = new Uint8Array(await raw.arrayBuffer());
    const chunksFor = async (seed: number) => {
      const client = new OpenAI({ baseURL: 'http://replay.invalid/v1', apiKey: 'x', maxRetries: 0, fetch: replayFetch(bytes, seed) });
      const chunks: unknown[] = [];
      for await (const chunk of await client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'go' }] })) chunks.push(chunk);
      return chunks;
    };
    const baseline = await chunksFor(0);
    expect(baseline.length).toBeGreaterThan(3);
    expect(JSON.stringify(baseline)).toContain('日本語 🎉');
    for (const seed of [1, 2, 3, 42, 1234]) expect(await chunksFor(seed)).toEqual(baseline);
  });
});
