/**
 * OpenAI-chat-shaped messages and the normalisation vLLM applies before it renders a chat template: text parts joined
 * with "\n", null content → "", tool-call `arguments` JSON strings parsed into objects (so the template's `tojson`
 * re-serialises them), `reasoning`/`reasoning_content` passed as `reasoning_content`.
 * Source: vLLM vllm/entrypoints/chat_utils.py (`_parse_chat_message_content`, `_postprocess_messages`).
 */

/** One content part of an OpenAI chat message (only text reaches a text-only template). */
export type ChatContentPart = { type: 'text'; text: string } | { type: string; [key: string]: unknown };

export interface ChatToolCall {
  id?: string;
  type?: string;
  function: { name: string; arguments: string | Record<string, unknown> };
}

/** An OpenAI-chat-shaped message (extra fields are passed through to the template). */
export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool' | string;
  content?: string | ChatContentPart[] | null;
  tool_calls?: ChatToolCall[] | null;
  tool_call_id?: string;
  name?: string;
  reasoning?: string | null;
  reasoning_content?: string | null;
  [key: string]: unknown;
}

/** An OpenAI-shaped tool definition. */
export interface ChatTool {
  type: 'function' | string;
  function: { name: string; description?: string; parameters?: Record<string, unknown>; [key: string]: unknown };
}

/** Join the text parts of a message's content ("\n" between parts, as vLLM does for string-content templates). */
export function contentText(content: ChatMessage['content']): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  const texts: string[] = [];
  for (const part of content) if (part.type === 'text' && typeof part.text === 'string') texts.push(part.text);
  return texts.join('\n');
}

/**
 * Normalise messages for a text-only chat template, as vLLM does. Invalid JSON in tool-call arguments is kept as the
 * raw string (the Qwen3 template inserts a string verbatim) instead of failing the request.
 * @returns new message objects; the input is not modified.
 */
export function normalizeChatMessages(messages: readonly ChatMessage[]): Record<string, unknown>[] {
  return messages.map((message) => {
    const out: Record<string, unknown> = { ...message, content: contentText(message.content) };
    delete out.reasoning;
    const reasoning = message.reasoning_content ?? message.reasoning;
    if (typeof reasoning === 'string') out.reasoning_content = reasoning;
    else delete out.reasoning_content;
    if (message.role === 'assistant' && Array.isArray(message.tool_calls)) {
      out.tool_calls = message.tool_calls.map((call) => {
        const args = call.function.arguments;
        let parsed: unknown = args;
        if (typeof args === 'string') {
          if (args === '') parsed = {};
          else {
            try {
              parsed = JSON.parse(args);
            } catch {
              parsed = args;
            }
          }
        }
        return { ...call, function: { ...call.function, arguments: parsed } };
      });
    } else if (message.tool_calls === null) delete out.tool_calls;
    return out;
  });
}
