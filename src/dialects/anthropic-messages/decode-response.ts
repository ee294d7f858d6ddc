/**
 * Anthropic Messages response body → IR response (round-trip tests; an Anthropic-shaped upstream).
 * Source: https://docs.anthropic.com/en/api/messages
 */
import type { CodecContext } from '../../core/dialect.ts';
import type { IRContentPart, IRReasoning, IRResponse, IRToolCall } from '../../core/ir.ts';
import { argumentsFromToolInput } from '../shared/tool-input.ts';
import { parseWire } from '../shared/validate.ts';
import { decodeStopReason } from './finish-reason.ts';
import {
  MessageResponseSchema,
  RedactedThinkingBlockSchema,
  TextBlockSchema,
  ThinkingBlockSchema,
  ToolUseBlockSchema,
} from './schema.ts';
import { decodeUsage } from './usage.ts';

/**
 * Decode a Messages response. Several thinking blocks are joined (last signature kept); unknown block types are
 * reported as warnings.
 * @throws GatewayError('invalid-request') when the body is not a Messages response.
 */
export function decodeResponse(body: unknown, ctx: CodecContext): IRResponse {
  const wire = parseWire(MessageResponseSchema, body);
  const content: IRContentPart[] = [];
  const toolCalls: IRToolCall[] = [];
  const warnings: IRResponse['warnings'] = [];
  let reasoning: IRReasoning | undefined;
  wire.content.forEach((block, i) => {
    const at = `content[${i}]`;
    switch (block.type) {
      case 'text':
        content.push({ type: 'text', text: parseWire(TextBlockSchema, block, at).text });
        break;
      case 'thinking': {
        const thinking = parseWire(ThinkingBlockSchema, block, at);
        reasoning = { ...reasoning, text: (reasoning?.text ?? '') + thinking.thinking };
        if (thinking.signature) reasoning.signature = thinking.signature;
        break;
      }
      case 'redacted_thinking':
        reasoning = { text: reasoning?.text ?? '', ...reasoning, redacted: parseWire(RedactedThinkingBlockSchema, block, at).data };
        break;
      case 'tool_use': {
        const use = parseWire(ToolUseBlockSchema, block, at);
        toolCalls.push({ id: use.id, name: use.name, arguments: argumentsFromToolInput(use.input) });
        break;
      }
      default:
        warnings.push({ code: 'unsupported-content', message: `${at} of type ${block.type} was dropped` });
    }
  });
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
