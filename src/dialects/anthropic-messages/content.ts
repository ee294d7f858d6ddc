/** IR content parts ↔ Anthropic content blocks, shared by the request and response codecs of this dialect. */
import type { IRContentPart, IRReasoning, IRToolCall } from '../../core/ir.ts';
import { argumentsFromToolInput, toolInputFromArguments } from '../shared/tool-input.ts';
import { mintReasoningSignature } from '../shared/signature.ts';
import { parseWire } from '../shared/validate.ts';
import { RedactedThinkingBlockSchema, TextBlockSchema, ThinkingBlockSchema, ToolUseBlockSchema, type AnthropicContentBlock } from './schema.ts';

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

/** An assistant turn's parts as its blocks are decoded, in order. */
export interface AssistantParts {
  content: IRContentPart[];
  toolCalls: IRToolCall[];
  reasoning?: IRReasoning;
}

/**
 * Decode one block of an assistant turn (request history or response) into `parts`: `text` → content, `thinking`
 * → reasoning (several are joined, the last signature kept), `redacted_thinking` → reasoning.redacted, `tool_use` →
 * a tool call. Source: https://docs.anthropic.com/en/api/messages
 * @param at the block's path, for errors (e.g. `messages[1].content[0]`).
 * @returns the tool call for a `tool_use` block, true for the other three kinds, false for any other type (left to
 *   the caller: a warning or an error).
 * @throws GatewayError('invalid-request') when a block of a known kind is malformed.
 */
export function decodeAssistantBlock(block: { type: string }, at: string, parts: AssistantParts): IRToolCall | boolean {
  switch (block.type) {
    case 'text':
      parts.content.push({ type: 'text', text: parseWire(TextBlockSchema, block, at).text });
      return true;
    case 'thinking': {
      const thinking = parseWire(ThinkingBlockSchema, block, at);
      if (parts.reasoning) parts.reasoning.text += thinking.thinking;
      else parts.reasoning = { text: thinking.thinking };
      if (thinking.signature) parts.reasoning.signature = thinking.signature;
      return true;
    }
    case 'redacted_thinking':
      parts.reasoning ??= { text: '' };
      parts.reasoning.redacted = parseWire(RedactedThinkingBlockSchema, block, at).data;
      return true;
    case 'tool_use': {
      const use = parseWire(ToolUseBlockSchema, block, at);
      const call: IRToolCall = { id: use.id, name: use.name, arguments: argumentsFromToolInput(use.input) };
      parts.toolCalls.push(call);
      return call;
    }
    default:
      return false;
  }
}
