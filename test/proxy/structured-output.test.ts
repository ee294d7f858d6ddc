/**
 * Structured output end to end: a JSON-schema request in each dialect reaches the simulator as guided decoding (chat
 * mode: `response_format` on chat completions; token mode: `response_format` on the vLLM-contract completions route)
 * and the client gets JSON that matches its schema, without a `response-format-ignored` warning.
 */
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI, Type } from '@google/genai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { staticSessions } from '../../src/proxy/sessions.ts';
import { SimServer } from '../../src/sim/server.ts';
import { startTestProxy, type TestProxy } from '../support/proxy-harness.ts';

const script = { variants: { solve: { weight: 1, steps: [{ say: 'Prose, not JSON.' }] } } };
const loopSchema = {
  type: 'object',
  properties: { unproductive_state_analysis: { type: 'string' }, unproductive_state_confidence: { type: 'number', minimum: 0, maximum: 1 } },
  required: ['unproductive_state_analysis', 'unproductive_state_confidence'],
};

let sim: SimServer;
const proxies: Record<'chat' | 'token', TestProxy> = {} as never;

beforeAll(async () => {
  sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0, scripts: { 'task-json': script } });
  const sessions = staticSessions(Object.fromEntries(['chat', 'token'].map((m) => [`sess-${m}`, { session_id: `sess-${m}`, task_id: 'task-json' }])));
  for (const mode of ['chat', 'token'] as const) proxies[mode] = await startTestProxy({ engineUrl: sim.url, kind: 'sim', sessions, mode });
});
afterAll(async () => {
  for (const proxy of Object.values(proxies)) await proxy.stop();
  await sim.stop();
});

function expectMatches(value: unknown): void {
  expect(value).toEqual({ unproductive_state_analysis: expect.any(String), unproductive_state_confidence: expect.any(Number) });
}

function lastWarnings(proxy: TestProxy, session: string): string[] {
  const records = proxy.store.completions.listBySession(session);
  return records.at(-1)!.warnings;
}

describe.each(['chat', 'token'] as const)('%s mode', (mode) => {
  const session = `sess-${mode}`;
  const system = 'You are a loop detector.';

  test('Gemini responseMimeType + responseSchema (OpenAPI types) is answered with JSON for the schema', async () => {
    const ai = new GoogleGenAI({ apiKey: session, httpOptions: { baseUrl: proxies[mode].url, retryOptions: { attempts: 1 } } as never });
    const result = await ai.models.generateContent({
      model: 'gemini-2.5-flash',
      contents: 'Is the conversation stuck?',
      config: {
        systemInstruction: system,
        responseMimeType: 'application/json',
        responseSchema: { type: Type.OBJECT, properties: { unproductive_state_analysis: { type: Type.STRING }, unproductive_state_confidence: { type: Type.NUMBER } }, required: ['unproductive_state_analysis', 'unproductive_state_confidence'] },
      },
    });
    expectMatches(JSON.parse(result.text ?? ''));
    expect(lastWarnings(proxies[mode], session).join(' ')).not.toMatch(/not enforced/);
  });

  test('OpenAI Chat response_format json_schema and json_object', async () => {
    const client = new OpenAI({ baseURL: `${proxies[mode].url}/v1`, apiKey: session, maxRetries: 0 });
    const schema = await client.chat.completions.create({
      model: 'm',
      messages: [{ role: 'system', content: system }, { role: 'user', content: 'stuck?' }],
      response_format: { type: 'json_schema', json_schema: { name: 'loop', schema: loopSchema, strict: true } },
    });
    expectMatches(JSON.parse(schema.choices[0]!.message.content ?? ''));
    const object = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'any JSON' }], response_format: { type: 'json_object' } });
    expect(JSON.parse(object.choices[0]!.message.content ?? '')).toEqual({});
    const prose = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'talk' }] });
    expect(prose.choices[0]!.message.content).toContain('Prose, not JSON.');
  });

  test('OpenAI Responses text.format json_schema', async () => {
    const client = new OpenAI({ baseURL: `${proxies[mode].url}/v1`, apiKey: session, maxRetries: 0 });
    const response = await client.responses.create({ model: 'm', instructions: system, input: 'stuck?', text: { format: { type: 'json_schema', name: 'loop', schema: loopSchema } } });
    expectMatches(JSON.parse(response.output_text));
  });

  test('Anthropic output_config.format json_schema', async () => {
    const client = new Anthropic({ baseURL: proxies[mode].url, apiKey: session, maxRetries: 0 });
    const message = await client.messages.create({ model: 'claude', max_tokens: 256, system, messages: [{ role: 'user', content: 'stuck?' }], output_config: { format: { type: 'json_schema', schema: loopSchema } } });
    const text = message.content.filter((b) => b.type === 'text').map((b) => (b as { text: string }).text).join('');
    expectMatches(JSON.parse(text));
  });
});

test('token mode renders a structured-output turn with thinking off and says so', async () => {
  const client = new OpenAI({ baseURL: `${proxies.token.url}/v1`, apiKey: 'sess-token', maxRetries: 0 });
  await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'json please' }], response_format: { type: 'json_object' } });
  expect(lastWarnings(proxies.token, 'sess-token').join(' ')).toMatch(/rendered with thinking off/);
  const record = proxies.token.store.completions.listBySession('sess-token').at(-1)!;
  expect(sim.tokenizer.decode(record.prompt_ids).endsWith('<think>\n\n</think>\n\n')).toBe(true);
});
