/**
 * IR → OpenAI Chat Completions request body (round-trip tests; an OpenAI-compatible upstream). The one leading system
 * message stays first; tool calls keep their raw argument text; reasoning goes out as `reasoning_content`.
 * Source: https://platform.openai.com/docs/api-reference/chat/create
 */
import type { IRContentPart, IRMessage, IRRequest } from '../../core/ir.ts';
import { imagePartToUrl } from '../shared/images.ts';
import type { ChatToolCall } from './schema.ts';

type WirePart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };

function encodeParts(parts: readonly IRContentPart[]): WirePart[] {
  return parts.map((part) => (part.type === 'text' ? { type: 'text', text: part.text } : { type: 'image_url', image_url: { url: imagePartToUrl(part) } }));
}

/** A single text part as a string (what most servers expect), anything else as a part array. */
function encodeContent(parts: readonly IRContentPart[]): string | WirePart[] {
  const only = parts[0];
  if (parts.length === 1 && only?.type === 'text') return only.text;
  return encodeParts(parts);
}

/** IR message → one wire message. */
export function encodeMessage(message: IRMessage): Record<string, unknown> {
  switch (message.role) {
    case 'system':
    case 'user':
      return { role: message.role, content: encodeContent(message.content) };
    case 'tool':
      return { role: 'tool', tool_call_id: message.toolCallId, content: encodeContent(message.content) };
    case 'assistant': {
      const out: Record<string, unknown> = { role: 'assistant', content: message.content.length === 0 ? null : encodeContent(message.content) };
      if (message.reasoning && message.reasoning.text !== '') out.reasoning_content = message.reasoning.text;
      if (message.toolCalls && message.toolCalls.length > 0) {
        out.tool_calls = message.toolCalls.map(
          (call): ChatToolCall => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } }),
        );
      }
      return out;
    }
  }
}

/** Encode an IR request as a `POST /v1/chat/completions` body (a plain JSON object). */
export function encodeRequest(request: IRRequest): Record<string, unknown> {
  const body: Record<string, unknown> = { model: request.model, messages: request.messages.map(encodeMessage) };
  const s = request.sampling;
  if (s.maxTokens !== undefined) body.max_completion_tokens = s.maxTokens;
  if (s.temperature !== undefined) body.temperature = s.temperature;
  if (s.topP !== undefined) body.top_p = s.topP;
  if (s.topK !== undefined) body.top_k = s.topK;
  if (s.minP !== undefined) body.min_p = s.minP;
  if (s.seed !== undefined) body.seed = s.seed;
  if (s.presencePenalty !== undefined) body.presence_penalty = s.presencePenalty;
  if (s.frequencyPenalty !== undefined) body.frequency_penalty = s.frequencyPenalty;
  if (s.stop !== undefined && s.stop.length > 0) body.stop = [...s.stop];
  if (request.tools.length > 0) {
    body.tools = request.tools.map((tool) => {
      const fn: Record<string, unknown> = { name: tool.name };
      if (tool.description !== undefined) fn.description = tool.description;
      fn.parameters = tool.parameters;
      const strict = tool.origin.extra?.strict;
      if (typeof strict === 'boolean') fn.strict = strict;
      return { type: 'function', function: fn };
    });
    const choice = request.toolChoice;
    if (choice !== undefined) body.tool_choice = typeof choice === 'string' ? choice : { type: 'function', function: { name: choice.name } };
  }
  if (request.parallelToolCalls !== undefined) body.parallel_tool_calls = request.parallelToolCalls;
  if (request.reasoning) {
    if (request.reasoning.effort !== undefined) body.reasoning_effort = request.reasoning.effort;
    body.chat_template_kwargs = { enable_thinking: request.reasoning.enabled };
  }
  if (request.user !== undefined) body.user = request.user;
  if (request.stream) {
    body.stream = true;
    if (request.streamUsage !== undefined) body.stream_options = { include_usage: request.streamUsage };
  }
  return body;
}
