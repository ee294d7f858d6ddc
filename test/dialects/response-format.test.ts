/** Structured-output fields of the four dialects → IR `responseFormat`, bad values as 400s naming the path, and back. */
import { describe, expect, test } from 'bun:test';
import { GatewayError } from '../../src/core/errors.ts';
import { anthropicMessages } from '../../src/dialects/anthropic-messages/index.ts';
import { gemini } from '../../src/dialects/gemini/index.ts';
import { openaiChat } from '../../src/dialects/openai-chat/index.ts';
import { openaiResponses } from '../../src/dialects/openai-responses/index.ts';
import { codecContext } from '../support/dialects.ts';

const schema = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] };
const chat = (format: unknown) => openaiChat.decodeRequest({ model: 'm', messages: [{ role: 'user', content: 'x' }], response_format: format }, codecContext());
const responses = (format: unknown) => openaiResponses.decodeRequest({ model: 'm', input: 'x', text: { format } }, codecContext());
const anthropic = (config: unknown) => anthropicMessages.decodeRequest({ model: 'm', max_tokens: 9, messages: [{ role: 'user', content: 'x' }], output_config: config }, codecContext());
const gem = (config: Record<string, unknown>) => gemini.decodeRequest({ contents: [{ role: 'user', parts: [{ text: 'x' }] }], generationConfig: config }, codecContext({ pathModel: 'g', pathStream: false }));

function param(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(GatewayError);
    return (error as GatewayError).details.param;
  }
  throw new Error('expected a GatewayError');
}

describe('decode', () => {
  test('OpenAI Chat response_format', () => {
    expect(chat({ type: 'text' }).responseFormat).toBeUndefined();
    expect(chat({ type: 'json_object' }).responseFormat).toEqual({ type: 'json_object' });
    expect(chat({ type: 'json_schema', json_schema: { name: 'n', strict: true, schema: { $schema: 'https://json-schema.org/draft/2020-12/schema', ...schema } } }).responseFormat).toEqual({ type: 'json_schema', name: 'n', strict: true, schema });
    expect(chat({ type: 'json_schema', json_schema: { name: 'n' } }).responseFormat).toEqual({ type: 'json_object' });
    expect(param(() => chat({ type: 'xml' }))).toBe('response_format.type');
    expect(param(() => chat({ type: 'json_schema' }))).toBe('response_format.json_schema');
  });

  test('OpenAI Responses text.format', () => {
    expect(responses({ type: 'text' }).responseFormat).toBeUndefined();
    expect(responses({ type: 'json_object' }).responseFormat).toEqual({ type: 'json_object' });
    expect(responses({ type: 'json_schema', name: 'n', schema }).responseFormat).toEqual({ type: 'json_schema', name: 'n', schema });
    expect(param(() => responses({ type: 'json_schema', name: 'n' }))).toBe('text.format.schema');
    expect(param(() => responses({ type: 'yaml' }))).toBe('text.format.type');
  });

  test('Anthropic output_config.format (json_schema only; effort reported)', () => {
    const ir = anthropic({ format: { type: 'json_schema', schema }, effort: 'high' });
    expect(ir.responseFormat).toEqual({ type: 'json_schema', schema });
    expect(ir.warnings.map((w) => w.message).join(' ')).toMatch(/output_config\.effort/);
    expect(anthropic({ effort: 'low' }).responseFormat).toBeUndefined();
    expect(param(() => anthropic({ format: { type: 'json_object' } }))).toBe('output_config.format.type');
  });

  test('Gemini responseMimeType with responseSchema (OpenAPI) or responseJsonSchema', () => {
    expect(gem({ responseMimeType: 'application/json' }).responseFormat).toEqual({ type: 'json_object' });
    expect(gem({ responseMimeType: 'application/json', responseSchema: { type: 'OBJECT', properties: { a: { type: 'STRING', nullable: true } } } }).responseFormat).toEqual({
      type: 'json_schema',
      schema: { type: 'object', properties: { a: { type: ['string', 'null'] } } },
    });
    expect(gem({ responseMimeType: 'application/json', responseJsonSchema: schema }).responseFormat).toEqual({ type: 'json_schema', schema });
    const enumMime = gem({ responseMimeType: 'text/x.enum', responseSchema: { type: 'STRING', enum: ['a'] } });
    expect(enumMime.responseFormat).toBeUndefined();
    expect(enumMime.warnings.map((w) => w.code)).toContain('response-format-ignored');
    expect(gem({ responseSchema: schema }).warnings.map((w) => w.code)).toContain('response-format-ignored');
  });
});

test('encodeRequest writes the format back in each dialect', () => {
  const ir = chat({ type: 'json_schema', json_schema: { name: 'n', schema } });
  expect((openaiChat.encodeRequest(ir) as Record<string, unknown>).response_format).toEqual({ type: 'json_schema', json_schema: { name: 'n', schema } });
  expect((openaiResponses.encodeRequest(ir) as { text: unknown }).text).toEqual({ format: { type: 'json_schema', name: 'n', schema } });
  expect((anthropicMessages.encodeRequest(ir) as Record<string, unknown>).output_config).toEqual({ format: { type: 'json_schema', schema } });
  expect((gemini.encodeRequest(ir) as { generationConfig: unknown }).generationConfig).toEqual({ responseMimeType: 'application/json', responseJsonSchema: schema });
  for (const codec of [openaiChat, openaiResponses, anthropicMessages]) {
    const again = codec.decodeRequest(codec.encodeRequest(ir), codecContext());
    expect(again.responseFormat?.type).toBe('json_schema');
  }
});
