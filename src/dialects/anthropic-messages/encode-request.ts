/**
 * IR → Anthropic Messages request body (round-trip tests; an Anthropic-shaped upstream). Consecutive user and tool
 * messages become one user turn (tool_result blocks first, as the API requires alternating roles). A system message
 * right after a user turn stays in place as a `{role: "system"}` message; every other goes to the top-level `system`.
 * Fields Anthropic has no place for (seed, min_p, penalties) are left out.
 * Source: https://docs.anthropic.com/en/api/messages
 */
import { responseFormatSchema, type IRMessage, type IRRequest } from '../../core/ir.ts';
import { encodePart, encodeReasoning, encodeToolUse } from './content.ts';
import type { AnthropicContentBlock } from './schema.ts';

interface WireMessage {
  role: 'user' | 'assistant' | 'system';
  content: AnthropicContentBlock[];
}

/** Encode an IR request as a `POST /v1/messages` body (a plain JSON object). */
export function encodeRequest(request: IRRequest): Record<string, unknown> {
  const system: AnthropicContentBlock[] = [];
  const messages: WireMessage[] = [];
  const userTurn = (): AnthropicContentBlock[] => {
    const last = messages.at(-1);
    if (last?.role === 'user') return last.content;
    const fresh: WireMessage = { role: 'user', content: [] };
    messages.push(fresh);
    return fresh.content;
  };
  for (const message of request.messages) encodeMessage(message);

  function encodeMessage(message: IRMessage): void {
    switch (message.role) {
      case 'system': {
        const text: AnthropicContentBlock[] = [];
        for (const part of message.content) if (part.type === 'text') text.push({ type: 'text', text: part.text });
        // A system message right after a user turn stays where it is (mid-conversation system message); the API
        // allows one nowhere else, so leading ones and any other go to the top-level `system` as before.
        // https://platform.claude.com/docs/en/build-with-claude/mid-conversation-system-messages
        if (messages.at(-1)?.role === 'user') {
          if (text.length > 0) messages.push({ role: 'system', content: text });
        } else system.push(...text);
        return;
      }
      case 'user':
        userTurn().push(...message.content.map(encodePart));
        return;
      case 'tool': {
        const only = message.content[0];
        const content = message.content.length === 1 && only?.type === 'text' ? only.text : message.content.map(encodePart);
        const block: AnthropicContentBlock = { type: 'tool_result', tool_use_id: message.toolCallId, content };
        if (message.isError) block.is_error = true;
        userTurn().push(block);
        return;
      }
      case 'assistant':
        messages.push({
          role: 'assistant',
          content: [
            ...encodeReasoning(message.reasoning, false),
            ...message.content.map(encodePart),
            ...(message.toolCalls ?? []).map(encodeToolUse),
          ],
        });
        return;
    }
  }

  const body: Record<string, unknown> = { model: request.model, messages };
  if (system.length > 0) body.system = system;
  const s = request.sampling;
  if (s.maxTokens !== undefined) body.max_tokens = s.maxTokens;
  if (s.temperature !== undefined) body.temperature = s.temperature;
  if (s.topP !== undefined) body.top_p = s.topP;
  if (s.topK !== undefined) body.top_k = s.topK;
  if (s.stop !== undefined && s.stop.length > 0) body.stop_sequences = [...s.stop];
  if (request.tools.length > 0) {
    body.tools = request.tools.map((tool) => {
      const wire: Record<string, unknown> = { name: tool.name };
      if (tool.description !== undefined) wire.description = tool.description;
      wire.input_schema = tool.parameters;
      const eager = tool.origin.extra?.eager_input_streaming;
      if (typeof eager === 'boolean') wire.eager_input_streaming = eager;
      return wire;
    });
    const choice = request.toolChoice;
    const wireChoice: Record<string, unknown> | undefined =
      choice === undefined
        ? request.parallelToolCalls === false
          ? { type: 'auto' }
          : undefined
        : choice === 'auto'
          ? { type: 'auto' }
          : choice === 'required'
            ? { type: 'any' }
            : choice === 'none'
              ? { type: 'none' }
              : { type: 'tool', name: choice.name };
    if (wireChoice) {
      if (request.parallelToolCalls !== undefined) wireChoice.disable_parallel_tool_use = !request.parallelToolCalls;
      body.tool_choice = wireChoice;
    }
  }
  if (request.reasoning) {
    const r = request.reasoning;
    body.thinking = !r.enabled
      ? { type: 'disabled' }
      : r.budgetTokens !== undefined
        ? { type: 'enabled', budget_tokens: r.budgetTokens }
        : { type: 'adaptive' };
  }
  if (request.user !== undefined) body.metadata = { user_id: request.user };
  // The Messages API has no schema-less JSON mode: json_object is sent as a schema for any object.
  if (request.responseFormat) body.output_config = { format: { type: 'json_schema', schema: responseFormatSchema(request.responseFormat) } };
  if (request.stream) body.stream = true;
  return body;
}
