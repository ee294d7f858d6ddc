/**
 * The contract of an inference-engine client. Chat mode: the engine renders the template and parses tool calls; we
 * read token ids and logprobs from its extension fields. Token mode: the proxy renders and tokenises, the engine samples
 * from token ids (token-engine.ts). Either mode may stream (`stream`), translating engine chunks as they arrive.
 * Source: docs/architecture.md#chat-mode-and-token-mode, docs/protocol-notes.md#inference-engines.
 */
import type { IRRequest, IRResponse, IRToolCall, Warning } from '../core/ir.ts';
import type { IRStreamEvent } from '../core/stream.ts';
import type { LogprobSemantics } from '../core/records.ts';
import type { TokenIds } from '../core/int32-twin.ts';

export type EngineKind = 'sim' | 'vllm' | 'sglang' | 'llamacpp' | 'openai';
export type CaptureMode = 'chat' | 'token';

/** Tokens captured for one completion. */
export interface TokenCapture {
  /**
   * Full prompt as token ids: an Int32Array when read from an engine's answer without building a JS array
   * (engines/answer-json.ts); the record's `prompt_ids` gets the array only when something reads it
   * (core/int32-twin.ts `definePromptIds`).
   */
  promptIds: TokenIds;
  /** Sampled ids, including the EOS when the turn ended on it. */
  responseIds: number[];
  /** One logprob per sampled id (float32-rounded). */
  logprobs: number[];
  logprobSemantics: LogprobSemantics;
  /** Set when lengths disagree or fields are missing; the record stores it and the counter counts it. */
  captureError: string | null;
}

export interface EngineCallContext {
  /** Polar session id, forwarded to the engine (header `x-polar-session`, SGLang `rid` prefix) for attribution. */
  sessionId: string;
  /** Polar task id, forwarded as header `x-polar-task` when known (the simulator picks its script by it). */
  taskId?: string;
  /** Unique per call. */
  requestId: string;
  signal?: AbortSignal;
}

export interface EngineCompletion {
  /** Response in IR with the *requested* model name restored. */
  response: IRResponse;
  /** Null for engines without capture (`openai`). */
  capture: TokenCapture | null;
  /** Policy/weight version the engine reported (SGLang meta_info.weight_version, vLLM /weight_info), if any. */
  policyVersion: string | null;
  warnings: Warning[];
  /** Wall time of the engine call, ms. */
  engineMs: number;
  /**
   * Tool calls to store on the record instead of `response.toolCalls` (token mode: malformed calls reach the client
   * as text but stay on the record, flagged `parserInvalid`, so the training filter sees them). Absent = the response's.
   */
  recordToolCalls?: IRToolCall[];
  /** The engine that produced it when it differs from the client's own id (a replica behind replicas.ts). */
  engineId?: string;
}

/**
 * What a streaming engine call reports as it goes: the prompt length as soon as it is known (token mode: before
 * sampling; chat mode: the engine's first chunk), then content deltas in the order a client must see them.
 */
export type EngineStreamEvent =
  /** The engine accepted the call (2xx status): errors after this one are mid-stream. */
  | { type: 'answered' }
  | { type: 'prompt'; inputTokens: number }
  | Extract<IRStreamEvent, { type: 'reasoning-delta' | 'reasoning-end' | 'text-delta' | 'text-end' | 'tool-call-start' | 'tool-call-delta' | 'tool-call-end' }>;

/** `engine.stream`: `auto` streams when the start-up probe found a sound streamed capture, `always` and `never` force it. */
export type EngineStreamSetting = 'auto' | 'always' | 'never';

export interface EngineClient {
  readonly kind: EngineKind;
  /** e.g. `vllm@http://127.0.0.1:8000`. */
  readonly id: string;
  readonly mode: CaptureMode;
  /** Probe the server's features (token-id fields, served model); call once at start-up. */
  probe(): Promise<void>;
  /** Served model name (after probe). */
  servedModel(): string;
  /**
   * One non-streaming completion. Throws GatewayError: 'upstream' (engine 5xx, bad body), 'timeout',
   * 'context-overflow' (prompt longer than the engine's context), 'invalid-request' (engine 400).
   */
  complete(request: IRRequest, ctx: EngineCallContext): Promise<EngineCompletion>;
  /**
   * Whether `stream` serves streaming clients (the `engine.stream` setting and, for `auto`, the probe's verdict).
   * Absent or false: streaming clients get the non-streaming call replayed as a synthetic stream.
   */
  streams?(): boolean;
  /**
   * One streamed completion: `onEvent` gets each delta as the engine produces it; resolves with the same completion
   * `complete` would (record assembled from the chunks and cross-checked: sum of delta ids = completion tokens =
   * logprob count). Errors before the first event throw exactly as `complete`'s.
   */
  stream?(request: IRRequest, ctx: EngineCallContext, onEvent: (event: EngineStreamEvent) => void): Promise<EngineCompletion>;
  /** Prompt length in tokens as the engine would render it (count_tokens). */
  countTokens(request: IRRequest, ctx: EngineCallContext): Promise<number>;
  /** What `probe()` found (null before a successful probe); optional for engines that have nothing to report. */
  probeReport?(): EngineProbeReport | null;
  /** Engine-side counters for the proxy's health document (token mode: token buffers, golden checks). */
  stats?(): Record<string, unknown>;
  /** Forget per-session state (token mode's token buffers) when a session ends. */
  endSession?(sessionId: string): void;
}

/** The result of an engine's start-up feature probe. */
export interface EngineProbeReport {
  servedModel: string;
  /** Model ids listed by GET /v1/models. */
  models: string[];
  /** Field under which prior reasoning is echoed to this engine. */
  reasoningField: 'reasoning' | 'reasoning_content';
  /** False on SGLang builds that reject `return_token_ids`. */
  acceptsReturnTokenIds: boolean;
  /**
   * The served model's end-of-think token id (`</think>`) as the engine tokenizes it; reasoning tokens are the sampled
   * tokens before it when the engine sends no count. Null: not a single token, no /tokenize, or no capture.
   */
  thinkCloseId?: number | null;
  /** JSON paths the probe completion's prompt ids, sampled ids and logprobs were read from (null = missing). */
  captureFields: { promptIds: string | null; responseIds: string | null; logprobs: string | null };
  /** Why the probe completion's capture was unusable (null when sound or when the engine captures nothing). */
  captureError: string | null;
  /** Whether a streamed probe completion came back with a sound capture (null when not probed: `engine.stream: never`). */
  streamCapture?: { ok: boolean; error: string | null } | null;
  /** Where later system messages go, whether that was detected (`systemMessages: auto`), and why. */
  systemMessages?: { placement: 'merge' | 'in-place'; auto: boolean; reason: string };
}
