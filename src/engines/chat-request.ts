/**
 * IR → OpenAI Chat request body, shared by every chat-mode engine (vLLM, SGLang, any OpenAI-compatible server, the
 * simulator). The engine renders the chat template itself, so the body must be exactly what the template expects:
 * one leading system message, tool results as strings, reasoning echoed under the field name the server reads.
 * Source: https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html (extra sampling parameters),
 * https://docs.sglang.ai/basic_usage/openai_api_completions.html.
 */
import type { IRRequest, IRToolChoice, Warning } from '../core/ir.ts';
import {
  encodeChatMessages, encodeChatTools, ENGINE_CHAT_ENCODING, type ReasoningField, type SystemMessagePlacement as ChatSystemPlacement,
} from '../dialects/openai-chat/encode-messages.ts';

/**
 * Sampling values sent when the client gave none. Every one is always sent: omitted fields fall back to the model's
 * generation_config.json on vLLM and to 128/16-token caps elsewhere, which silently changes
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

export type { ReasoningField } from '../dialects/openai-chat/encode-messages.ts';

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

/** Engines take a leading system message (`merge`) or, for templates that allow it, later ones in place. */
export type SystemMessagePlacement = Exclude<ChatSystemPlacement, 'keep'>;

function encodeToolChoice(choice: IRToolChoice): unknown {
  return typeof choice === 'string' ? choice : { type: 'function', function: { name: choice.name } };
}

/**
 * Build the engine's OpenAI Chat body from an IR request. The messages come from the one Chat encoder
 * (dialects/openai-chat/encode-messages.ts) with {@link ENGINE_CHAT_ENCODING} plus this engine's reasoning field and
 * system placement, so exports (which use the same encoder) show exactly what the engine saw.
 * - `stream` is false here: the streaming path sets it (engines/chat-engine.ts).
 * - `responseFormat` becomes `response_format` (the engine's guided decoding), never dropped.
 * @returns the JSON body, the warnings the translation produced (lossy features), and whether a message holds a
 *   non-text part (an image: `nonText`, for text-only renderers); never throws.
 */
export function buildChatRequest(request: IRRequest, opts: ChatRequestOptions): { body: Record<string, unknown>; warnings: Warning[]; nonText: boolean } {
  const { messages, warnings, nonText } = encodeChatMessages(request.messages, {
    ...ENGINE_CHAT_ENCODING, reasoningField: opts.reasoningField, systemMessages: opts.systemMessages ?? 'merge',
  });
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
    body.tools = encodeChatTools(request.tools);
    if (request.toolChoice !== undefined) body.tool_choice = encodeToolChoice(request.toolChoice);
    if (request.parallelToolCalls !== undefined) body.parallel_tool_calls = request.parallelToolCalls;
  }
  const enableThinking = request.reasoning?.enabled ?? d.enableThinking;
  if (enableThinking !== undefined) body.chat_template_kwargs = { enable_thinking: enableThinking };
  if (request.user !== undefined) body.user = request.user;
  // Guided decoding: vLLM, SGLang and llama.cpp's server all take OpenAI's response_format on chat completions
  // (https://docs.vllm.ai/en/latest/features/structured_outputs.html, https://docs.sglang.ai/advanced_features/structured_outputs.html).
  const format = request.responseFormat;
  if (format?.type === 'json_object') body.response_format = { type: 'json_object' };
  else if (format?.type === 'json_schema') {
    body.response_format = { type: 'json_schema', json_schema: { name: format.name ?? 'response', schema: format.schema, ...(format.strict !== undefined ? { strict: format.strict } : {}) } };
  }
  Object.assign(body, opts.extra);
  return { body, warnings, nonText };
}
