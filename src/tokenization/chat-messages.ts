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

/** The template quirks `normalizeChatMessages` applies (a family entry satisfies it; families.ts). */
export interface MessageQuirks {
  /** Field the template reads reasoning from (`reasoning_content` when absent; null: reasoning is left out). */
  reasoningField?: 'reasoning_content' | 'thinking' | null;
  /** Tool-call arguments as parsed objects (default, vLLM) or as the JSON text (templates that concatenate it). */
  toolArguments?: 'object' | 'string';
}

/**
 * Normalise messages for a text-only chat template, as vLLM does. Invalid JSON in tool-call arguments is kept as the
 * raw string (the Qwen3 template inserts a string verbatim) instead of failing the request. Keys whose value is
 * undefined are dropped (a template's `'tool_calls' in message` must not see them).
 * @param quirks the model family's template quirks (default: vLLM's behaviour, reasoning as `reasoning_content`).
 * @returns new message objects; the input is not modified.
 */
export function normalizeChatMessages(messages: readonly ChatMessage[], quirks: MessageQuirks = {}): Record<string, unknown>[] {
  const reasoningField = quirks.reasoningField === undefined ? 'reasoning_content' : quirks.reasoningField;
  return messages.map((message) => {
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(message)) if (value !== undefined) out[key] = value;
    out.content = contentText(message.content);
    delete out.reasoning;
    delete out.reasoning_content;
    const reasoning = message.reasoning_content ?? message.reasoning;
    if (typeof reasoning === 'string' && reasoningField !== null) out[reasoningField] = reasoning;
    if (message.role === 'assistant' && Array.isArray(message.tool_calls)) {
      out.tool_calls = message.tool_calls.map((call) => {
        const args = call.function.arguments;
        let parsed: unknown = args;
        if (quirks.toolArguments === 'string') parsed = typeof args === 'string' ? (args === '' ? '{}' : args) : JSON.stringify(args);
        else if (typeof args === 'string') {
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
