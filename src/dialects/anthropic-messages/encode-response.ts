/**
 * IR response → Anthropic Messages response body. Block order is the API's: thinking (always with a signature, minted
 * when the engine gave none) → redacted_thinking → one text block → tool_use blocks. The stream encoder emits the same
 * blocks, so a reassembled stream equals this body.
 * Source: https://docs.anthropic.com/en/api/messages (response shape).
 */
import type { CodecContext } from '../../core/dialect.ts';
import type { IRResponse } from '../../core/ir.ts';
import { textOf } from '../../core/ir.ts';
import { encodeReasoning, encodeToolUse } from './content.ts';
import { encodeStopReason, encodeStopSequence } from './finish-reason.ts';
import type { AnthropicContentBlock } from './schema.ts';
import { encodeUsage, type AnthropicUsage } from './usage.ts';

export interface AnthropicMessage {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: AnthropicContentBlock[];
  stop_reason: string;
  stop_sequence: string | null;
  usage: AnthropicUsage;
}

/** Encode the non-streaming reply. Assistant images (never produced by engines) are not representable and are left out. */
export function encodeResponse(response: IRResponse, _ctx?: CodecContext): AnthropicMessage {
  const content: AnthropicContentBlock[] = encodeReasoning(response.reasoning, true);
  const text = textOf(response.content);
  if (text !== '') content.push({ type: 'text', text });
  for (const call of response.toolCalls) content.push(encodeToolUse(call));
  return {
    id: response.id,
    type: 'message',
    role: 'assistant',
    model: response.model,
    content,
    stop_reason: encodeStopReason(response.finishReason, response.toolCalls.length > 0),
    stop_sequence: encodeStopSequence(response.finishReason, response.toolCalls.length > 0),
    usage: encodeUsage(response.usage),
  };
}
