/**
 * The contract of an inference-engine client. Chat mode: the engine renders the template and parses tool calls; we
 * read token ids and logprobs from its extension fields. Source: ARCHITECTURE.md §3 (engines), PROTOCOL-NOTES.md §1.
 */
import type { IRRequest, IRResponse, Warning } from '../core/ir.ts';
import type { LogprobSemantics } from '../core/records.ts';

export type EngineKind = 'sim' | 'vllm' | 'sglang' | 'llamacpp' | 'openai';
export type CaptureMode = 'chat' | 'token';

/** Tokens captured for one completion. */
export interface TokenCapture {
  /** Full prompt as token ids. */
  promptIds: number[];
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
}

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
  /** Prompt length in tokens as the engine would render it (count_tokens). */
  countTokens(request: IRRequest, ctx: EngineCallContext): Promise<number>;
}
