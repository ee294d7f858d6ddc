/**
 * Engine client factory (docs/architecture.md#chat-mode-and-token-mode). Chat mode: the engine renders the template (vllm, sglang, sim,
 * openai). Token mode: the proxy renders, tokenises and parses itself and calls the engine's token endpoint (vllm,
 * sglang, sim, llamacpp; see token-engine.ts). llama.cpp has no chat-mode capture; openai has no token endpoint.
 */
import { engineBaseUrl } from './http.ts';
import type { Clock } from '../core/clock.ts';
import type { IdGenerator } from '../core/ids.ts';
import type { LogprobSemantics } from '../core/records.ts';
import type { ChatModeEngine } from './chat-engine.ts';
import { DEFAULT_SAMPLING, type ReasoningField, type SamplingDefaults, type SystemMessagePlacement } from './chat-request.ts';
import { createOpenAIEngine } from './openai.ts';
import { createSglangEngine } from './sglang.ts';
import { createSimEngine } from './sim.ts';
import type { CaptureMode, EngineClient, EngineKind, EngineStreamSetting } from './types.ts';
import { createVllmEngine } from './vllm.ts';
import { tokenBackendFor } from './token-backends.ts';
import { TokenModeEngine, type TokenEngineOptions } from './token-engine.ts';
import { ReplicaRouter, type ReplicaRouterOptions } from './replicas.ts';
import type { TokenBufferOptions } from '../tokenization/token-buffer.ts';

export type { EngineClient, EngineKind, CaptureMode, EngineCompletion, EngineCallContext, TokenCapture, EngineProbeReport } from './types.ts';
export { DEFAULT_SAMPLING, type SamplingDefaults, type ReasoningField } from './chat-request.ts';
export { ChatModeEngine } from './chat-engine.ts';
export { TokenModeEngine, GoldenMismatchError, type TokenEngineOptions, type TokenEngineStats } from './token-engine.ts';
export { ReplicaRouter, type ReplicaRouterOptions, type ReplicaState } from './replicas.ts';
export type { GoldenStats } from './golden-check.ts';

export const ENGINE_KINDS: readonly EngineKind[] = ['sim', 'vllm', 'sglang', 'llamacpp', 'openai'];

export interface EngineConfig {
  kind: EngineKind;
  /** Base URL without `/v1`, e.g. `http://127.0.0.1:8000`. */
  url: string;
  /**
   * Replicas of the engine (base URLs); two or more route through a ReplicaRouter (replicas.ts) with session affinity
   * and least-outstanding-requests routing, and `url` is ignored. Absent or one entry: a single client.
   */
  urls?: string[];
  /** Replicas: options of the router (health-check period, metrics, log). */
  replicas?: ReplicaRouterOptions;
  /** Sent as `Authorization: Bearer` to the engine. */
  apiKey?: string;
  /** Model name to send; default: the first model listed by the engine. */
  servedModel?: string;
  mode: CaptureMode;
  /** Per-call limit in ms (0 = none). */
  timeoutMs: number;
  /** Sampling values sent when the client gave none (partial: the rest from DEFAULT_SAMPLING). */
  defaults?: Partial<SamplingDefaults>;
  /** Force the reasoning echo field instead of probing. */
  reasoningField?: ReasoningField;
  /**
   * Placement of system messages after the first turn (default `merge`); `in-place` for templates that allow it;
   * `auto`: detected at probe time where the engine can render a conversation (vLLM), else `merge`.
   */
  systemMessages?: SystemMessagePlacement | 'auto';
  logprobSemantics?: LogprobSemantics;
  /** Stream from the engine for streaming clients (default `auto`: when the start-up probe's streamed capture is sound). */
  stream?: EngineStreamSetting;
  now?: Clock;
  newId?: IdGenerator;
  /** Token mode: Hugging Face directory of the served model's tokenizer and chat template (absent = embedded Qwen3). */
  tokenizerDir?: string;
  /** Token mode: model family override (a name in tokenization/families.ts); default detected from the chat template. */
  family?: string;
  /** Token mode: serve even when the start-up golden check finds a rendering mismatch (default false: refuse). */
  allowGoldenMismatch?: boolean;
  /** Token mode: fraction of turns golden-checked against the engine's own rendering, in [0, 1] (default 0.02). */
  goldenRate?: number;
  /** Token mode: bounds of the per-session token buffers. */
  tokenBuffers?: TokenBufferOptions;
  /** Token mode: where golden-check mismatches are reported (default console.warn). */
  log?: (message: string) => void;
}

/**
 * Create the engine client for a configuration. Call `probe()` on it once before serving.
 * @throws Error when the kind is unknown, the URL is not http(s), or the mode/kind pair is not supported yet.
 */
export function createEngineClient(config: EngineConfig): EngineClient & Pick<ChatModeEngine, 'probeReport'> {
  const urls = config.urls ?? [];
  if (urls.length >= 2) {
    const sharedBuffers = { buffers: null };
    const clients = urls.map((url) => ({ url: url.replace(/\/+$/, ''), client: createOneClient({ ...config, url, urls: undefined }, sharedBuffers) }));
    return new ReplicaRouter(clients, { log: config.log, ...config.replicas });
  }
  return createOneClient(urls.length === 1 ? { ...config, url: urls[0]! } : config, undefined);
}

function createOneClient(config: EngineConfig, sharedBuffers: TokenEngineOptions['sharedBuffers']): EngineClient & Pick<ChatModeEngine, 'probeReport'> {
  if (config.mode !== 'chat' && config.mode !== 'token') throw new Error(`unknown capture mode ${JSON.stringify(config.mode)} (expected chat or token)`);
  let url: URL;
  try {
    url = new URL(config.url);
  } catch {
    throw new Error(`engine URL ${JSON.stringify(config.url)} is not a valid URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`engine URL must be http(s), got ${JSON.stringify(config.url)}`);
  const opts = {
    url: engineBaseUrl(config.url),
    apiKey: config.apiKey,
    servedModel: config.servedModel,
    timeoutMs: config.timeoutMs,
    defaults: { ...DEFAULT_SAMPLING, ...config.defaults },
    reasoningField: config.reasoningField,
    systemMessages: config.systemMessages,
    logprobSemantics: config.logprobSemantics,
    stream: config.stream,
    now: config.now,
    newId: config.newId,
  };
  if (config.mode === 'token') {
    const backend = tokenBackendFor(config.kind);
    if (!backend) {
      if (!(ENGINE_KINDS as readonly string[]).includes(config.kind)) throw new Error(`unknown engine kind ${JSON.stringify(config.kind)} (expected one of ${ENGINE_KINDS.join(', ')})`);
      throw new Error(`engine kind "${config.kind}" has no token endpoint; token mode needs sim, vllm, sglang or llamacpp`);
    }
    return new TokenModeEngine(backend, {
      ...opts,
      ...(config.kind === 'sim' ? { idPrefix: 'sim' } : {}),
      tokenizerDir: config.tokenizerDir,
      family: config.family,
      allowGoldenMismatch: config.allowGoldenMismatch,
      goldenRate: config.goldenRate,
      buffers: config.tokenBuffers,
      sharedBuffers,
      log: config.log,
    });
  }
  switch (config.kind) {
    case 'vllm':
      return createVllmEngine(opts);
    case 'sglang':
      return createSglangEngine(opts);
    case 'sim':
      return createSimEngine(opts);
    case 'openai':
      return createOpenAIEngine(opts);
    case 'llamacpp':
      throw new Error('engine kind "llamacpp" has no chat-mode capture; use token mode (--mode token)');
    default:
      throw new Error(`unknown engine kind ${JSON.stringify(config.kind)} (expected one of ${ENGINE_KINDS.join(', ')})`);
  }
}
