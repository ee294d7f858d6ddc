/**
 * The internal representation (IR) every dialect decodes into and encodes from: 4 codecs, not 12 translators.
 * OpenAI-Chat-like, but lossless for RL: reasoning with its signature, tool calls with ids, tool results with errors,
 * non-function tools mapped to functions with their origin kept, sampling parameters kept exactly.
 * Source: docs/architecture.md#the-proxy (IR hub); field names are camelCase because the IR never leaves the process.
 */

/** Bump when a field changes meaning; stored with every CompletionRecord. */
export const IR_VERSION = 1 as const;

export type DialectName = 'anthropic-messages' | 'openai-chat' | 'openai-responses' | 'gemini';

/** One piece of message content. Images keep their bytes (base64) or URL; the proxy never fetches URLs. */
export type IRContentPart =
  | { type: 'text'; text: string }
  | { type: 'image'; mediaType: string; data?: string; url?: string };

/** A model-requested tool call. `arguments` is the raw JSON text (kept even when it is not valid JSON). */
export interface IRToolCall {
  /** Call id as the client knows it (minted by the proxy when the wire format has none). */
  id: string;
  /** The function name the model sees (flattened, e.g. `ns__tool` for a Responses namespace tool). */
  name: string;
  /** Raw argument text, normally a JSON object; a `custom` tool's free-text input is wrapped as {"input": text}. */
  arguments: string;
  /** True when the engine's parser flagged this call as malformed (training filter gives reward 0). */
  parserInvalid?: boolean;
}

/** Reasoning ("thinking") text of an assistant turn with the provider's opaque signature, if any. */
export interface IRReasoning {
  text: string;
  /** Anthropic thinking signature / Responses encrypted_content / Gemini thoughtSignature, opaque. */
  signature?: string;
  /** Anthropic redacted_thinking payload, kept to be echoed back only. */
  redacted?: string;
}

export type IRMessage =
  | { role: 'system'; content: IRContentPart[] }
  | { role: 'user'; content: IRContentPart[] }
  | { role: 'assistant'; content: IRContentPart[]; reasoning?: IRReasoning; toolCalls?: IRToolCall[] }
  | { role: 'tool'; toolCallId: string; name?: string; content: IRContentPart[]; isError?: boolean };

/** Where a tool came from, so a call can be mapped back to the client's own item type. */
export interface IRToolOrigin {
  kind: 'function' | 'custom' | 'namespace' | 'other';
  /** The client's own name when it differs from the flattened `IRTool.name`. */
  originalName?: string;
  /** Responses `namespace` tool: the namespace name. */
  namespace?: string;
  /** Anything the dialect needs to re-encode the call (e.g. a custom tool's grammar format). */
  extra?: Record<string, unknown>;
}

/** A tool exposed to the model as a function with a JSON-schema `parameters` object. */
export interface IRTool {
  name: string;
  description?: string;
  /** JSON Schema of the arguments object ($schema and cache_control already stripped). */
  parameters: Record<string, unknown>;
  origin: IRToolOrigin;
}

export type IRToolChoice = 'auto' | 'none' | 'required' | { name: string };

/**
 * Sampling parameters, each passed to the engine exactly as the client sent it; `undefined` means "not given"
 * (the engine adapter then sends the configured default explicitly). Never clamped silently.
 */
export interface IRSampling {
  temperature?: number;
  topP?: number;
  topK?: number;
  minP?: number;
  /** The one output cap: max_tokens / max_completion_tokens / max_output_tokens / maxOutputTokens, in tokens. */
  maxTokens?: number;
  stop?: string[];
  seed?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
}

/** A lossy or unsupported feature: reported in the `x-polar-warnings` header and on the record, never dropped silently. */
export interface Warning {
  code: string;
  message: string;
}

/**
 * Structured output the client asked for: any JSON object (`json_object`) or JSON matching a JSON Schema
 * (`json_schema`). Engines enforce it with guided decoding (vLLM/SGLang `response_format`, SGLang `json_schema`,
 * llama.cpp `json_schema`); Gemini's OpenAPI-style `responseSchema` arrives here already converted to JSON Schema.
 */
export type IRResponseFormat =
  | { type: 'json_object' }
  | { type: 'json_schema'; schema: Record<string, unknown>; name?: string; strict?: boolean };

/** The JSON Schema a format asks for (`json_object` = any JSON object), for engines that take a schema only. */
export function responseFormatSchema(format: IRResponseFormat): Record<string, unknown> {
  return format.type === 'json_schema' ? format.schema : { type: 'object' };
}

export interface IRRequest {
  version: typeof IR_VERSION;
  /** Model name the client asked for; the engine adapter replaces it with the served model and restores it in replies. */
  model: string;
  messages: IRMessage[];
  tools: IRTool[];
  toolChoice?: IRToolChoice;
  parallelToolCalls?: boolean;
  sampling: IRSampling;
  /** Reasoning switch (Anthropic thinking, Responses reasoning.effort, Gemini thinkingConfig); maps to enable_thinking. */
  reasoning?: { enabled: boolean; budgetTokens?: number; effort?: string };
  stream: boolean;
  /** OpenAI Chat stream_options.include_usage. */
  streamUsage?: boolean;
  /** Provider user id (Anthropic metadata.user_id is a JSON *string*; kept opaque). */
  user?: string;
  /** Structured output (JSON mode / JSON schema); absent = free text. */
  responseFormat?: IRResponseFormat;
  warnings: Warning[];
}

/** The unified finish reason plus the raw provider/engine value. Unknown values map to `other`, never throw. */
export interface FinishReason {
  unified: 'stop' | 'length' | 'tool-calls' | 'content-filter' | 'error' | 'other';
  raw?: string;
  /**
   * The client's stop string that ended the turn (vLLM `stop_reason`, SGLang `matched_stop`, or token mode's own
   * match); absent when the turn ended on an end-of-turn token or for any other reason.
   */
  stopSequence?: string;
}

/** Token counts, in tokens. */
export interface IRUsage {
  inputTokens: number;
  outputTokens: number;
  /** Prompt tokens served from the engine's prefix cache (0 when unknown). */
  cachedInputTokens: number;
  /** Output tokens inside reasoning (0 when unknown). */
  reasoningTokens: number;
}

export interface IRResponse {
  id: string;
  /** The model name the client asked for (restored by the engine adapter). */
  model: string;
  /** Assistant text parts, in order. */
  content: IRContentPart[];
  reasoning?: IRReasoning;
  toolCalls: IRToolCall[];
  finishReason: FinishReason;
  usage: IRUsage;
  warnings: Warning[];
  /** Unix ms. */
  createdAt: number;
}

/** Join the text parts of a content list. */
export function textOf(parts: readonly IRContentPart[]): string {
  let out = '';
  for (const part of parts) if (part.type === 'text') out += part.text;
  return out;
}
