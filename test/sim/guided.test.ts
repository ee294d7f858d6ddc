/** The simulator's guided decoding: JSON valid for the schema on every route that takes a schema. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { jsonForSchema } from '../../src/sim/guided.ts';
import { SimServer } from '../../src/sim/server.ts';

describe('jsonForSchema', () => {
  test('const, enum, refs, unions, bounds and nesting', () => {
    const schema = {
      type: 'object',
      $defs: { Item: { type: 'object', properties: { id: { type: 'integer', exclusiveMinimum: 3 } } } },
      properties: {
        kind: { enum: ['user', 'model'] },
        fixed: { const: 42 },
        score: { type: 'number', minimum: 0.5, maximum: 1 },
        name: { type: 'string', minLength: 5, maxLength: 6 },
        when: { type: 'string', format: 'date-time' },
        maybe: { anyOf: [{ type: 'null' }, { type: 'boolean' }] },
        items: { type: 'array', minItems: 2, items: { $ref: '#/$defs/Item' } },
        both: { allOf: [{ properties: { x: { type: 'integer' } } }, { properties: { y: { type: 'string', maxLength: 1 } } }] },
      },
    };
    expect(jsonForSchema(schema)).toEqual({
      kind: 'user',
      fixed: 42,
      score: 0.5,
      name: 'ok ok',
      when: '2026-01-01T00:00:00Z',
      maybe: false,
      items: [{ id: 4 }, { id: 4 }],
      both: { x: 0, y: 'o' },
    });
  });
});

let sim: SimServer;
beforeAll(async () => {
  sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0 });
});
afterAll(() => sim.stop());

const schema = { type: 'object', properties: { next_speaker: { type: 'string', enum: ['user', 'model'] }, reasoning: { type: 'string' } } };
const expected = { next_speaker: 'user', reasoning: 'ok' };
const post = async (path: string, body: unknown) => (await fetch(`${sim.url}${path}`, { method: 'POST', body: JSON.stringify(body) })).json() as Promise<Record<string, any>>;

test('every route answers with JSON for the schema; without one the script (here: the default answer) speaks', async () => {
  const prompt = sim.tokenizer.encode('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n');
  const chat = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], response_format: { type: 'json_schema', json_schema: { name: 'n', schema } } });
  expect(JSON.parse(chat.choices[0].message.content)).toEqual(expected);
  const completion = await post('/v1/completions', { prompt, max_tokens: 200, response_format: { type: 'json_schema', json_schema: { name: 'n', schema } } });
  expect(JSON.parse(completion.choices[0].text)).toEqual(expected);
  const structured = await post('/v1/completions', { prompt, max_tokens: 200, structured_outputs: { json: schema } });
  expect(JSON.parse(structured.choices[0].text)).toEqual(expected);
  const sglang = await post('/generate', { input_ids: prompt, sampling_params: { max_new_tokens: 200, json_schema: JSON.stringify(schema) } });
  expect(JSON.parse(sglang.text)).toEqual(expected);
  const llama = await post('/completion', { prompt, n_predict: 200, json_schema: schema });
  expect(JSON.parse(llama.content)).toEqual(expected);
  const free = await post('/v1/completions', { prompt, max_tokens: 200 });
  expect(() => JSON.parse(free.choices[0].text)).toThrow();
  const bad = await fetch(`${sim.url}/generate`, { method: 'POST', body: JSON.stringify({ input_ids: prompt, sampling_params: { json_schema: '{nope' } }) });
  expect(bad.status).toBe(400);
  expect(await bad.text()).toContain('sampling_params.json_schema');
});
