/**
 * Gemini GenerateContentResponse → IR (round-trip tests; a Gemini upstream). Thought parts → reasoning, text parts →
 * content, functionCall parts → tool calls (ids minted with `ctx.newId('call')` when absent).
 * Source: https://ai.google.dev/api/generate-content#generatecontentresponse
 */
import { z } from 'zod';
import type { CodecContext } from '../../core/dialect.ts';
import type { IRContentPart, IRResponse, IRToolCall } from '../../core/ir.ts';
import { argumentsFromToolInput } from '../shared/tool-input.ts';
import { parseWire } from '../shared/validate.ts';
import { decodeFinishReason } from './finish-reason.ts';
import { PartSchema } from './schema.ts';
import { decodeUsage } from './usage.ts';

const ResponseSchema = z.looseObject({
  candidates: z
    .array(z.looseObject({ content: z.looseObject({ parts: z.array(PartSchema).nullish() }).nullish(), finishReason: z.string().nullish() }))
    .min(1),
  usageMetadata: z.unknown().optional(),
  modelVersion: z.string().nullish(),
  responseId: z.string().nullish(),
});

/**
 * Decode a response body (candidate 0).
 * @throws GatewayError('invalid-request') when the body has no candidates.
 */
export function decodeResponse(body: unknown, ctx: CodecContext): IRResponse {
  const response = parseWire(ResponseSchema, body, 'response');
  const candidate = response.candidates[0]!;
  let reasoning = '';
  let text = '';
  const toolCalls: IRToolCall[] = [];
  for (const part of candidate.content?.parts ?? []) {
    if (part.functionCall) {
      toolCalls.push({ id: part.functionCall.id || ctx.newId('call'), name: part.functionCall.name, arguments: argumentsFromToolInput(part.functionCall.args ?? {}) });
    } else if (part.text !== undefined) {
      if (part.thought) reasoning += part.text;
      else text += part.text;
    }
  }
  const content: IRContentPart[] = text ? [{ type: 'text', text }] : [];
  return {
    id: response.responseId ?? ctx.newId('resp'),
    model: response.modelVersion ?? '',
    content,
    ...(reasoning ? { reasoning: { text: reasoning } } : {}),
    toolCalls,
    finishReason: decodeFinishReason(candidate.finishReason, toolCalls.length > 0),
    usage: decodeUsage(response.usageMetadata),
    warnings: [],
    createdAt: ctx.now(),
  };
}
