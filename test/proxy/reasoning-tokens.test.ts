/**
 * Reasoning-token counts in chat mode, through the proxy in front of the simulator (engine kind `sim`, vLLM contract,
 * embedded Qwen3: it streams for streaming clients and sends no count of its own, as vLLM builds before
 * vllm-project/vllm PR #45802 do). Every dialect that has the field answers the number of sampled tokens before the
 * `</think>` id, streaming or not, and the stored record says the same: OpenAI Chat
 * `usage.completion_tokens_details.reasoning_tokens`, Responses `usage.output_tokens_details.reasoning_tokens`, Gemini
 * `usageMetadata.thoughtsTokenCount` (with `candidatesTokenCount` the rest). Anthropic has no such field: its
 * `output_tokens` includes thinking (https://docs.anthropic.com/en/api/messages), checked here as the whole sample.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { CompletionRecord } from '../../src/core/records.ts';
import { staticSessions } from '../../src/proxy/sessions.ts';
import { SimServer } from '../../src/sim/server.ts';
import { collectSse } from '../support/sse.ts';
import { startTestProxy, type TestProxy } from '../support/proxy-harness.ts';

const TASK = 'task-think';
const THOUGHT = 'Two plus two is four, a small sum.';
let sim: SimServer;
let proxy: TestProxy;
let thinkClose: number;
const keys = ['chat', 'responses', 'gemini', 'anthropic'].flatMap((d) => [`${d}-json`, `${d}-sse`]);

beforeAll(async () => {
  sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0, scripts: { [TASK]: { variants: { solve: { weight: 1, steps: [{ think: THOUGHT, say: 'The answer is 4.' }] } } } } });
  thinkClose = sim.tokenizer.tokenToId('</think>')!;
  proxy = await startTestProxy({ engineUrl: sim.url, kind: 'sim', sessions: staticSessions(Object.fromEntries(keys.map((k) => [k, { session_id: k, task_id: TASK }]))) });
});
afterAll(async () => {
  await proxy.stop();
  await sim.stop();
});

/** The session's one record, with the count the ids give: the sampled tokens before `</think>`. */
function recordOf(key: string): { rec: CompletionRecord; before: number } {
  const records = proxy.store.completions.listBySession(key);
  expect(records.length).toBe(1);
  const rec = records[0]!;
  expect(rec.capture_error).toBeNull();
  expect(rec.ir_response?.reasoning?.text.trim()).toBe(THOUGHT);
  const before = Array.from(rec.response_ids).indexOf(thinkClose);
  expect(before).toBeGreaterThan(THOUGHT.split(' ').length);
  expect(rec.ir_response?.usage.reasoningTokens).toBe(before);
  return { rec, before };
}

const post = (path: string, key: string, body: unknown) =>
  fetch(`${proxy.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'x-api-key': key, 'x-goog-api-key': key, 'anthropic-version': '2023-06-01' }, body: JSON.stringify(body) });
const ask = 'What is 2+2?';

describe.each([false, true])('chat mode, stream: %p', (stream) => {
  const suffix = stream ? 'sse' : 'json';

  test('OpenAI Chat: usage.completion_tokens_details.reasoning_tokens', async () => {
    const key = `chat-${suffix}`;
    const response = await post('/v1/chat/completions', key, { model: 'm', messages: [{ role: 'user', content: ask }], stream, ...(stream ? { stream_options: { include_usage: true } } : {}) });
    expect(response.status).toBe(200);
    let usage: { completion_tokens: number; completion_tokens_details: { reasoning_tokens: number } };
    if (stream) {
      const { events } = await collectSse(response);
      const chunks = events.filter((e) => e.data !== '[DONE]').map((e) => JSON.parse(e.data) as { usage?: typeof usage | null });
      usage = chunks.findLast((c) => c.usage)!.usage!;
    } else usage = ((await response.json()) as { usage: typeof usage }).usage;
    const { rec, before } = recordOf(key);
    expect(usage.completion_tokens).toBe(rec.response_ids.length);
    expect(usage.completion_tokens_details.reasoning_tokens).toBe(before);
  });

  test('OpenAI Responses: usage.output_tokens_details.reasoning_tokens', async () => {
    const key = `responses-${suffix}`;
    const response = await post('/v1/responses', key, { model: 'm', input: ask, stream });
    expect(response.status).toBe(200);
    let usage: { output_tokens: number; output_tokens_details: { reasoning_tokens: number } };
    if (stream) {
      const { events } = await collectSse(response);
      const completed = events.find((e) => e.event === 'response.completed')!;
      usage = (JSON.parse(completed.data) as { response: { usage: typeof usage } }).response.usage;
    } else usage = ((await response.json()) as { usage: typeof usage }).usage;
    const { rec, before } = recordOf(key);
    expect(usage.output_tokens).toBe(rec.response_ids.length);
    expect(usage.output_tokens_details.reasoning_tokens).toBe(before);
  });

  test('Gemini: usageMetadata.thoughtsTokenCount, candidatesTokenCount the rest', async () => {
    const key = `gemini-${suffix}`;
    const path = stream ? '/v1beta/models/m:streamGenerateContent?alt=sse' : '/v1beta/models/m:generateContent';
    const response = await post(path, key, { contents: [{ role: 'user', parts: [{ text: ask }] }] });
    expect(response.status).toBe(200);
    let usage: { candidatesTokenCount: number; thoughtsTokenCount: number };
    if (stream) {
      const { events } = await collectSse(response);
      usage = events.map((e) => JSON.parse(e.data) as { usageMetadata?: typeof usage }).findLast((c) => c.usageMetadata)!.usageMetadata!;
    } else usage = ((await response.json()) as { usageMetadata: typeof usage }).usageMetadata;
    const { rec, before } = recordOf(key);
    expect(usage.thoughtsTokenCount).toBe(before);
    expect(usage.candidatesTokenCount).toBe(rec.response_ids.length - before);
  });

  test('Anthropic: output_tokens is the whole sample, thinking included (no separate field)', async () => {
    const key = `anthropic-${suffix}`;
    const response = await post('/v1/messages', key, { model: 'm', max_tokens: 512, messages: [{ role: 'user', content: ask }], stream });
    expect(response.status).toBe(200);
    let outputTokens: number;
    if (stream) {
      const { events } = await collectSse(response);
      const delta = events.find((e) => e.event === 'message_delta')!;
      outputTokens = (JSON.parse(delta.data) as { usage: { output_tokens: number } }).usage.output_tokens;
    } else outputTokens = ((await response.json()) as { usage: { output_tokens: number } }).usage.output_tokens;
    const { rec } = recordOf(key);
    expect(outputTokens).toBe(rec.response_ids.length);
  });
});
