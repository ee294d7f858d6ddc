/** IR content parts ↔ Anthropic content blocks, shared by the request and response codecs of this dialect. */
import type { IRContentPart, IRReasoning, IRToolCall } from '../../core/ir.ts';
import { toolInputFromArguments } from '../shared/tool-input.ts';
import { mintReasoningSignature } from '../shared/signature.ts';
import type { AnthropicContentBlock } from './schema.ts';

/** One IR part as a wire block (images keep base64 bytes or their URL). */
export function encodePart(part: IRContentPart): AnthropicContentBlock {
  if (part.type === 'text') return { type: 'text', text: part.text };
  return part.data !== undefined
    ? { type: 'image', source: { type: 'base64', media_type: part.mediaType, data: part.data } }
    : { type: 'image', source: { type: 'url', url: part.url ?? '' } };
}

/**
 * Reasoning as wire blocks: a `thinking` block (when there is text or a signature) then a `redacted_thinking` block
 * (when a redacted payload is kept).
 * @param mintSignature true in replies (Claude Code drops a thinking block without a signature); false when echoing a
 *   request, where an absent signature stays empty.
 */
export function encodeReasoning(reasoning: IRReasoning | undefined, mintSignature: boolean): AnthropicContentBlock[] {
  if (!reasoning) return [];
  const blocks: AnthropicContentBlock[] = [];
  if (reasoning.text !== '' || reasoning.signature) {
    const signature = reasoning.signature || (mintSignature ? mintReasoningSignature(reasoning.text) : '');
    blocks.push({ type: 'thinking', thinking: reasoning.text, signature });
  }
  if (reasoning.redacted !== undefined) blocks.push({ type: 'redacted_thinking', data: reasoning.redacted });
  return blocks;
}

/** An IR tool call as a `tool_use` block; invalid argument JSON travels as `{_raw: text}` (see shared/tool-input.ts). */
export function encodeToolUse(call: IRToolCall): AnthropicContentBlock {
  return { type: 'tool_use', id: call.id, name: call.name, input: toolInputFromArguments(call.arguments) };
}
