/**
 * IR → OpenAI Chat Completions request body (round-trip tests; an OpenAI-compatible upstream). The one leading system
 * message stays first; tool calls keep their raw argument text; reasoning goes out as `reasoning_content`. Messages
 * come from the one Chat message encoder (encode-messages.ts).
 * Source: https://platform.openai.com/docs/api-reference/chat/create
 */
import type { IRMessage, IRRequest } from '../../core/ir.ts';
import { encodeChatMessages, type ChatEncodeOptions, type ChatWireMessage } from './encode-messages.ts';

/** A faithful re-encoding: system messages where they are, parts kept, reasoning as `reasoning_content`. */
const REQUEST_ENCODING: ChatEncodeOptions = { reasoningField: 'reasoning_content', systemMessages: 'keep', joinText: null, toolResultImages: 'parts' };

/** IR message → one wire message (encode-messages.ts with this dialect's faithful options). */
export function encodeMessage(message: IRMessage): ChatWireMessage {
  return encodeChatMessages([message], REQUEST_ENCODING).messages[0]!;
}

/** Encode an IR request as a `POST /v1/chat/completions` body (a plain JSON object). */
export function encodeRequest(request: IRRequest): Record<string, unknown> {
  const body: Record<string, unknown> = { model: request.model, messages: encodeChatMessages(request.messages, REQUEST_ENCODING).messages };
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
  const format = request.responseFormat;
  if (format?.type === 'json_object') body.response_format = { type: 'json_object' };
  else if (format?.type === 'json_schema') {
    body.response_format = { type: 'json_schema', json_schema: { name: format.name ?? 'response', schema: format.schema, ...(format.strict !== undefined ? { strict: format.strict } : {}) } };
  }
  if (request.stream) {
    body.stream = true;
    if (request.streamUsage !== undefined) body.stream_options = { include_usage: request.streamUsage };
  }
  return body;
}
