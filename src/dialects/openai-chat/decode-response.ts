/**
 * OpenAI `chat.completion` body → IR response (round-trip tests; an OpenAI-compatible upstream). Reads
 * `reasoning_content` or (vLLM ≥ 0.11) `reasoning`; only `choices[0]` is used.
 * Source: https://platform.openai.com/docs/api-reference/chat/object
 */
import type { CodecContext } from '../../core/dialect.ts';
import type { IRResponse } from '../../core/ir.ts';
import { parseWire } from '../shared/validate.ts';
import { decodeFinishReason } from './finish-reason.ts';
import { ChatResponseSchema } from './schema.ts';
import { decodeUsage } from './usage.ts';

/**
 * Decode a chat completion. `created` (Unix s) becomes `createdAt` in ms; without it the context clock is used.
 * @throws GatewayError('invalid-request') when the body is not a chat completion with at least one choice.
 */
export function decodeResponse(body: unknown, ctx: CodecContext): IRResponse {
  const wire = parseWire(ChatResponseSchema, body);
  const choice = wire.choices[0]!;
  const message = choice.message;
  const response: IRResponse = {
    id: wire.id,
    model: wire.model,
    content: message.content != null && message.content !== '' ? [{ type: 'text', text: message.content }] : [],
    toolCalls: (message.tool_calls ?? []).map((call) => ({ id: call.id, name: call.function.name, arguments: call.function.arguments ?? '' })),
    finishReason: decodeFinishReason(choice.finish_reason),
    usage: decodeUsage(wire.usage),
    warnings: wire.choices.length > 1 ? [{ code: 'extra-choices', message: `only choices[0] of ${wire.choices.length} was used` }] : [],
    createdAt: wire.created !== undefined ? wire.created * 1000 : ctx.now(),
  };
  const reasoning = message.reasoning_content ?? message.reasoning;
  if (reasoning != null && reasoning !== '') response.reasoning = { text: reasoning };
  return response;
}
