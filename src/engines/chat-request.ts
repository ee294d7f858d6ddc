/**
 * IR → OpenAI Chat request body, shared by every chat-mode engine (vLLM, SGLang, any OpenAI-compatible server, the
 * simulator). The engine renders the chat template itself, so the body must be exactly what the template expects:
 * one leading system message, tool results as strings, reasoning echoed under the field name the server reads.
 * Source: ARCHITECTURE.md §3 (engines, chat mode), PROTOCOL-NOTES.md §1.1–1.2 and §3 (across dialects).
 */
import type { IRContentPart, IRMessage, IRRequest, IRToolChoice, Warning } from '../core/ir.ts';
import { textOf } from '../core/ir.ts';

/**
 * Sampling values sent when the client gave none. Every one is always sent: omitted fields fall back to the model's
 * generation_config.json on vLLM and to 128/16-token caps elsewhere (PROTOCOL-NOTES §1.1), which silently changes
 * the behaviour policy.
 */
export interface SamplingDefaults {
  temperature: number;
  topP: number;
  /** -1 disables top-k on vLLM and SGLang. */
  topK: number;
  minP: number;
  /** Output cap in tokens. */
  maxTokens: number;
  /**
   * `chat_template_kwargs.enable_thinking` when the request says nothing about reasoning; undefined = don't send the
   * kwarg (the template's own default applies).
   */
  enableThinking?: boolean;
}

export const DEFAULT_SAMPLING: SamplingDefaults = { temperature: 1, topP: 1, topK: -1, minP: 0, maxTokens: 8192 };

/** Field under which an assistant turn's reasoning is echoed back: vLLM ≥ 0.10 reads `reasoning`, SGLang and older vLLM `reasoning_content`. */
export type ReasoningField = 'reasoning' | 'reasoning_content';

export interface ChatRequestOptions {
  /** The served model name that replaces the requested one. */
  servedModel: string;
  defaults: SamplingDefaults;
  reasoningField: ReasoningField;
  /** Engine-specific capture flags merged into the body (e.g. vLLM `return_token_ids`). */
  extra?: Record<string, unknown>;
  /** Where system messages go; see {@link SystemMessagePlacement}. Default `merge`. */
  systemMessages?: SystemMessagePlacement;
}

/**
 * `merge`: every system message joins one leading system message (Qwen3.5-style templates reject any other order).
 * `in-place`: the leading run of system messages is merged, and a later one (Claude Code sends a mid-conversation
 * system message after a user turn) stays where it is, so the prompt keeps extending the previous turn's prompt;
 * only for templates that render a system turn anywhere (Qwen3's does).
 */
export type SystemMessagePlacement = 'merge' | 'in-place';

type ChatContent = string | Array<{ type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } }>;

/** An OpenAI Chat message as sent to the engine. */
export interface EngineChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: ChatContent | null;
  tool_calls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
  name?: string;
  reasoning?: string;
  reasoning_content?: string;
}

function imageUrl(part: Extract<IRContentPart, { type: 'image' }>): string {
  return part.url ?? `data:${part.mediaType};base64,${part.data ?? ''}`;
}

/** Text-only content becomes one string (what string-content templates expect); images force the parts form. */
function encodeContent(parts: readonly IRContentPart[]): ChatContent {
  if (parts.every((part) => part.type === 'text')) return parts.map((part) => (part as { text: string }).text).join('\n');
  return parts.map((part) =>
    part.type === 'text' ? { type: 'text' as const, text: part.text } : { type: 'image_url' as const, image_url: { url: imageUrl(part) } },
  );
}

function encodeToolChoice(choice: IRToolChoice): unknown {
  return typeof choice === 'string' ? choice : { type: 'function', function: { name: choice.name } };
}

/**
 * Build the engine's OpenAI Chat body from an IR request.
 * - System messages are merged (text joined with "\n\n") into one leading system message: Qwen3.5-style templates
 *   reject a system message anywhere else. With `systemMessages: 'in-place'` only the leading run is merged.
 * - Tool results become strings; an image inside a tool result cannot be expressed there and is replaced by a
 *   placeholder with a warning.
 * - `stream` is always false: capture is most reliable from one non-streaming call (PROTOCOL-NOTES §1.4).
 * @returns the JSON body and the warnings the translation produced (lossy features), never throws.
 */
export function buildChatRequest(request: IRRequest, opts: ChatRequestOptions): { body: Record<string, unknown>; warnings: Warning[] } {
  const warnings: Warning[] = [];
  const systemTexts: string[] = [];
  const messages: EngineChatMessage[] = [];
  const inPlace = opts.systemMessages === 'in-place';
  for (const message of request.messages) {
    const encoded = encodeMessage(message, opts.reasoningField, warnings);
    if (encoded !== 'system') messages.push(encoded);
    else if (inPlace && messages.length > 0) messages.push({ role: 'system', content: textOf(message.content) });
    else systemTexts.push(textOf(message.content));
  }
  if (request.messages.some((m) => m.role === 'system' && m.content.some((p) => p.type === 'image'))) {
    warnings.push({ code: 'system-image-dropped', message: 'images in the system prompt are not sent to the engine' });
  }
  if (systemTexts.length > 0) messages.unshift({ role: 'system', content: systemTexts.join('\n\n') });

  const s = request.sampling;
  const d = opts.defaults;
  const body: Record<string, unknown> = {
    model: opts.servedModel,
    messages,
    stream: false,
    temperature: s.temperature ?? d.temperature,
    top_p: s.topP ?? d.topP,
    top_k: s.topK ?? d.topK,
    min_p: s.minP ?? d.minP,
    max_tokens: s.maxTokens ?? d.maxTokens,
  };
  if (s.stop && s.stop.length > 0) body.stop = s.stop;
  if (s.seed !== undefined) body.seed = s.seed;
  if (s.presencePenalty !== undefined) body.presence_penalty = s.presencePenalty;
  if (s.frequencyPenalty !== undefined) body.frequency_penalty = s.frequencyPenalty;
  if (request.tools.length > 0) {
    body.tools = request.tools.map((tool) => ({
      type: 'function',
      function: { name: tool.name, ...(tool.description !== undefined ? { description: tool.description } : {}), parameters: tool.parameters },
    }));
    if (request.toolChoice !== undefined) body.tool_choice = encodeToolChoice(request.toolChoice);
    if (request.parallelToolCalls !== undefined) body.parallel_tool_calls = request.parallelToolCalls;
  }
  const enableThinking = request.reasoning?.enabled ?? d.enableThinking;
  if (enableThinking !== undefined) body.chat_template_kwargs = { enable_thinking: enableThinking };
  if (request.user !== undefined) body.user = request.user;
  Object.assign(body, opts.extra);
  return { body, warnings };
}

function encodeMessage(message: IRMessage, reasoningField: ReasoningField, warnings: Warning[]): EngineChatMessage | 'system' {
  switch (message.role) {
    case 'system':
      return 'system';
    case 'user':
      return { role: 'user', content: encodeContent(message.content) };
    case 'assistant': {
      const text = textOf(message.content);
      // The engine's parsers hand back the whitespace between </think> and <tool_call> as content ("\n\n"); echoed
      // as content, the template renders it again plus its own separator, and the next prompt no longer extends
      // what was sampled. Whitespace-only content next to tool calls goes back as null, as most harnesses do.
      const out: EngineChatMessage = { role: 'assistant', content: text.trim() === '' && message.toolCalls?.length ? null : text };
      if (message.content.some((p) => p.type === 'image')) {
        warnings.push({ code: 'assistant-image-dropped', message: 'images in assistant turns are not sent to the engine' });
      }
      if (message.reasoning?.text) out[reasoningField] = message.reasoning.text;
      if (message.toolCalls && message.toolCalls.length > 0) {
        out.tool_calls = message.toolCalls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } }));
      }
      return out;
    }
    case 'tool': {
      let text = '';
      for (const part of message.content) {
        if (part.type === 'text') text += (text ? '\n' : '') + part.text;
        else {
          text += (text ? '\n' : '') + '[image]';
          warnings.push({ code: 'tool-result-image', message: 'an image in a tool result was replaced by "[image]" (chat templates take tool results as strings)' });
        }
      }
      const out: EngineChatMessage = { role: 'tool', tool_call_id: message.toolCallId, content: text };
      if (message.name !== undefined) out.name = message.name;
      return out;
    }
  }
}
