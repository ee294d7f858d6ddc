/**
 * Anthropic Messages response body → IR response (round-trip tests; an Anthropic-shaped upstream).
 * Source: https://docs.anthropic.com/en/api/messages
 */
import type { CodecContext } from '../../core/dialect.ts';
import type { IRResponse } from '../../core/ir.ts';
import { parseWire } from '../shared/validate.ts';
import { decodeAssistantBlock, type AssistantParts } from './content.ts';
import { decodeStopReason } from './finish-reason.ts';
import { MessageResponseSchema } from './schema.ts';
import { decodeUsage } from './usage.ts';

/**
 * Decode a Messages response. Several thinking blocks are joined (last signature kept); unknown block types are
 * reported as warnings.
 * @throws GatewayError('invalid-request') when the body is not a Messages response.
 */
export function decodeResponse(body: unknown, ctx: CodecContext): IRResponse {
  const wire = parseWire(MessageResponseSchema, body);
  const parts: AssistantParts = { content: [], toolCalls: [] };
  const warnings: IRResponse['warnings'] = [];
  wire.content.forEach((block, i) => {
    const at = `content[${i}]`;
    if (decodeAssistantBlock(block, at, parts) === false) warnings.push({ code: 'unsupported-content', message: `${at} of type ${block.type} was dropped` });
  });
  const { content, toolCalls, reasoning } = parts;
  const response: IRResponse = {
    id: wire.id,
    model: wire.model,
    content,
    toolCalls,
    finishReason: decodeStopReason(wire.stop_reason),
    usage: decodeUsage(wire.usage),
    warnings,
    createdAt: ctx.now(),
  };
  if (reasoning) response.reasoning = reasoning;
  return response;
}
