/**
 * Sampling values outside a provider's documented range (src/dialects/shared/sampling-range.ts): an `out-of-range`
 * warning per field, the value kept as sent; Anthropic's required `max_tokens` missing: a `missing-field` warning.
 * End to end: the warnings reach `x-polar-warnings`, the call still succeeds and the engine gets the value.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { IRRequest } from '../../src/core/ir.ts';
import { anthropicMessages } from '../../src/dialects/anthropic-messages/index.ts';
import { gemini } from '../../src/dialects/gemini/index.ts';
import { openaiChat } from '../../src/dialects/openai-chat/index.ts';
import { openaiResponses } from '../../src/dialects/openai-responses/index.ts';
import { startFakeEngine, type FakeEngine } from '../support/fake-engine.ts';
import { startTestProxy, type TestProxy } from '../support/proxy-harness.ts';
import { codecContext } from '../support/dialects.ts';

const ranged = (ir: IRRequest) => ir.warnings.filter((w) => w.code === 'out-of-range' || w.code === 'missing-field');
const user = [{ role: 'user', content: 'hi' }];

describe('decoders', () => {
  test('Anthropic Messages: temperature and top_p over 1, and a missing max_tokens', () => {
    const inRange = anthropicMessages.decodeRequest({ model: 'm', max_tokens: 10, temperature: 1, top_p: 0, messages: user }, codecContext());
    expect(ranged(inRange)).toEqual([]);
    const ir = anthropicMessages.decodeRequest({ model: 'm', temperature: 5, top_p: 1.5, messages: user }, codecContext());
    expect(ranged(ir).map((w) => w.code)).toEqual(['out-of-range', 'out-of-range', 'missing-field']);
    expect(ranged(ir)[0]!.message).toBe("temperature 5 is outside the Anthropic Messages API's documented range 0 to 1; it was sent to the engine as is");
    expect(ranged(ir)[1]!.message).toContain('top_p 1.5');
    expect(ranged(ir)[2]!.message).toContain('max_tokens is required');
    expect(ir.sampling).toEqual({ temperature: 5, topP: 1.5 });
  });

  test('OpenAI Chat: temperature over 2 and penalties below -2; temperature 1.5 is fine', () => {
    expect(ranged(openaiChat.decodeRequest({ model: 'm', temperature: 1.5, presence_penalty: 2, messages: user }, codecContext()))).toEqual([]);
    const ir = openaiChat.decodeRequest({ model: 'm', temperature: 2.5, frequency_penalty: -3, presence_penalty: -2.5, top_p: -0.1, messages: user }, codecContext());
    expect(ranged(ir).map((w) => w.message.split(' ')[0])).toEqual(['temperature', 'top_p', 'presence_penalty', 'frequency_penalty']);
    expect(ranged(ir)[0]!.message).toContain("OpenAI Chat API's documented range 0 to 2");
    expect(ir.sampling.temperature).toBe(2.5);
  });

  test('OpenAI Responses and Gemini name their own fields', () => {
    const responses = openaiResponses.decodeRequest({ model: 'm', input: 'hi', temperature: 3, top_p: 0.5 }, codecContext());
    expect(ranged(responses).map((w) => w.message)).toEqual(["temperature 3 is outside the OpenAI Responses API's documented range 0 to 2; it was sent to the engine as is"]);
    const body = { contents: [{ role: 'user', parts: [{ text: 'hi' }] }], generationConfig: { temperature: 0.7, topP: 2 } };
    const fromGemini = gemini.decodeRequest(body, codecContext({ pathModel: 'm' }));
    expect(ranged(fromGemini).map((w) => w.message)).toEqual(["generationConfig.topP 2 is outside the Gemini API's documented range 0 to 1; it was sent to the engine as is"]);
    expect(fromGemini.sampling.topP).toBe(2);
  });
});

describe('through the proxy', () => {
  let engine: FakeEngine;
  let proxy: TestProxy;
  beforeAll(async () => {
    engine = await startFakeEngine({ shape: 'vllm', script: [{ kind: 'text', text: 'ok' }] });
    proxy = await startTestProxy({ engineUrl: engine.url, kind: 'vllm' });
  });
  afterAll(async () => {
    await proxy.stop();
    await engine.stop();
  });

  test('an Anthropic call with temperature 5 and no max_tokens is answered, warned about, and sampled at 5', async () => {
    const response = await fetch(`${proxy.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'range-test', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'm', temperature: 5, messages: user }),
    });
    expect(response.status).toBe(200);
    const warnings = response.headers.get('x-polar-warnings') ?? '';
    expect(warnings).toContain('out-of-range');
    expect(warnings).toContain('missing-field');
    expect(((await response.json()) as { type: string }).type).toBe('message');
    expect(engine.chatRequests().at(-1)!.body.temperature).toBe(5);
    const [record] = proxy.store.completions.listBySession('range-test');
    expect(record!.warnings.some((w) => w.startsWith('out-of-range'))).toBe(true);
  });
});
