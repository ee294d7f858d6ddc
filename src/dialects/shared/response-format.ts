/**
 * Structured-output requests of the four dialects → IR `responseFormat`, so the engine enforces them with guided
 * decoding instead of the model answering prose that the client cannot parse (a client that asks for JSON usually
 * retries until it gets JSON).
 * - OpenAI Chat `response_format`: `{type: "text" | "json_object"}` or `{type: "json_schema", json_schema: {name, schema, strict}}`
 *   (https://platform.openai.com/docs/api-reference/chat/create#chat-create-response_format).
 * - OpenAI Responses `text.format`: `{type: "text" | "json_object"}` or `{type: "json_schema", name, schema, strict}`
 *   (https://platform.openai.com/docs/api-reference/responses/create#responses-create-text).
 * - Anthropic Messages `output_config.format`: `{type: "json_schema", schema}` (structured outputs; no JSON-object mode)
 *   (https://platform.claude.com/docs/en/build-with-claude/structured-outputs).
 * - Gemini is decoded in dialects/gemini/decode-request.ts (`responseMimeType` + `responseSchema`/`responseJsonSchema`).
 */
import { GatewayError } from '../../core/errors.ts';
import type { IRResponseFormat } from '../../core/ir.ts';
import { isRecord } from './validate.ts';

function bad(param: string, message: string): GatewayError {
  return new GatewayError('invalid-request', `${param}: ${message}`, { param });
}

function schemaAt(value: unknown, param: string): Record<string, unknown> {
  if (!isRecord(value)) throw bad(param, 'must be a JSON Schema object');
  const { $schema: _drop, ...rest } = value;
  return rest;
}

function named(format: IRResponseFormat & { type: 'json_schema' }, name: unknown, strict: unknown): IRResponseFormat {
  if (typeof name === 'string' && name !== '') format.name = name;
  if (typeof strict === 'boolean') format.strict = strict;
  return format;
}

/**
 * Decode OpenAI Chat `response_format`.
 * @returns undefined for absent / `text`; the IR format otherwise.
 * @throws GatewayError('invalid-request') naming `response_format…` for an unknown type or a missing schema.
 */
export function decodeChatResponseFormat(value: unknown): IRResponseFormat | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isRecord(value)) throw bad('response_format', 'must be an object with a type');
  switch (value.type) {
    case 'text':
      return undefined;
    case 'json_object':
      return { type: 'json_object' };
    case 'json_schema': {
      const spec = value.json_schema;
      if (!isRecord(spec)) throw bad('response_format.json_schema', 'is required for type "json_schema"');
      // OpenAI allows a json_schema without `schema` (any JSON); treat it as JSON mode.
      if (spec.schema === undefined) return { type: 'json_object' };
      return named({ type: 'json_schema', schema: schemaAt(spec.schema, 'response_format.json_schema.schema') }, spec.name, spec.strict);
    }
    default:
      throw bad('response_format.type', `must be "text", "json_object" or "json_schema" (got ${JSON.stringify(value.type)})`);
  }
}

/**
 * Decode OpenAI Responses `text.format`.
 * @returns undefined for absent / `text`; the IR format otherwise.
 * @throws GatewayError('invalid-request') naming `text.format…` for an unknown type or a missing schema.
 */
export function decodeResponsesTextFormat(value: unknown): IRResponseFormat | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isRecord(value)) throw bad('text.format', 'must be an object with a type');
  switch (value.type) {
    case 'text':
      return undefined;
    case 'json_object':
      return { type: 'json_object' };
    case 'json_schema':
      return named({ type: 'json_schema', schema: schemaAt(value.schema, 'text.format.schema') }, value.name, value.strict);
    default:
      throw bad('text.format.type', `must be "text", "json_object" or "json_schema" (got ${JSON.stringify(value.type)})`);
  }
}

/**
 * Decode Anthropic `output_config.format` (`{type: "json_schema", schema}`; the API has no schema-less JSON mode).
 * @returns undefined when absent.
 * @throws GatewayError('invalid-request') naming `output_config.format…`.
 */
export function decodeAnthropicOutputFormat(value: unknown): IRResponseFormat | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isRecord(value)) throw bad('output_config.format', 'must be an object with a type');
  if (value.type !== 'json_schema') throw bad('output_config.format.type', `must be "json_schema" (got ${JSON.stringify(value.type)})`);
  return { type: 'json_schema', schema: schemaAt(value.schema, 'output_config.format.schema') };
}
