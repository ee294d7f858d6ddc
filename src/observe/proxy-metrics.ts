/**
 * Prometheus metrics of the proxy (the model-API boundary), on a registry of their own so several proxies in one
 * process never clash. Served at `GET /metrics` by `polar proxy` and, merged with the node's, by every gateway node.
 * Names (prefix `polar_proxy_`, units in the name per https://prometheus.io/docs/practices/naming/):
 *   polar_proxy_requests_total{dialect,engine,status}      every answered model-API call (status = HTTP status): a
 *                                                          call a dialect's handler took (completions, token counts,
 *                                                          tokenize, a dialect's model listing); not unknown paths,
 *                                                          wrong methods, `/`, the OpenAI `/v1/models`, admin calls
 *   polar_proxy_errors_total{dialect,engine,status}        the subset with status ≥ 400
 *   polar_proxy_stream_errors_total{dialect,engine,kind}   streams answered 200 that ended in an in-band error event
 *                                                          (kind: upstream, timeout, aborted, …; GatewayError kinds)
 *   polar_proxy_added_latency_seconds{dialect,engine}      proxy time around the engine call (total − engine)
 *   polar_proxy_engine_latency_seconds{dialect,engine}     engine time of each captured completion
 *   polar_proxy_tokens_total{kind=prompt|sampled|trainable} tokens captured; trainable = sampled with ids + logprobs
 *   polar_proxy_completions_total{engine}                  completion records committed
 *   polar_proxy_capture_errors_total{engine}               records committed with a capture error
 *   polar_proxy_engine_in_flight                           engine calls in flight now
 *   polar_proxy_engine_busy_seconds_total                  time with ≥ 1 engine call in flight
 *   polar_proxy_engine_busy_fraction                       the same over the last 60 s (or since start), 0..1
 *   polar_proxy_inference_paused                           1 while inference is paused (POST /admin/inference/pause), else 0
 * prom-client: https://github.com/siimon/prom-client
 */
import { createMiddleware } from 'hono/factory';
import { Counter, Gauge, Histogram, Registry, register as defaultRegistry } from 'prom-client';
import type { CompletionRecord } from '../core/records.ts';
import { promptIdsLength } from '../core/int32-twin.ts';

/** What the metrics read of the proxy's pause gate (src/proxy/inference-gate.ts `InferenceGate`). */
export interface PauseState {
  readonly isPaused: boolean;
  /** ms epoch, null while not paused. */
  readonly pausedSince: number | null;
}

const ADDED_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
const ENGINE_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
/** Window of `polar_proxy_engine_busy_fraction`, ms. */
export const BUSY_WINDOW_MS = 60_000;

/** Trainable tokens of one record: its sampled tokens when their ids and logprobs were captured soundly. */
export function trainableTokens(rec: Pick<CompletionRecord, 'capture_error' | 'response_ids' | 'logprobs'>): number {
  return rec.capture_error === null && rec.logprobs.length === rec.response_ids.length ? rec.response_ids.length : 0;
}

export class ProxyMetrics {
  readonly registry = new Registry();
  readonly requests: Counter<'dialect' | 'engine' | 'status'>;
  readonly errors: Counter<'dialect' | 'engine' | 'status'>;
  readonly streamErrors: Counter<'dialect' | 'engine' | 'kind'>;
  readonly addedLatency: Histogram<'dialect' | 'engine'>;
  readonly engineLatency: Histogram<'dialect' | 'engine'>;
  readonly tokens: Counter<'kind'>;
  readonly completions: Counter<'engine'>;
  readonly captureErrors: Counter<'engine'>;
  #inFlight = 0;
  #busySince = 0;
  #busyMs = 0;
  #points: { at: number; busyMs: number }[];
  #gate: PauseState | null = null;

  /** `engine` labels every series with the engine kind (sim, vllm, sglang, llamacpp, openai). `now` in ms. */
  constructor(readonly engine: string, private readonly now: () => number = Date.now) {
    const registers = [this.registry];
    const both = ['dialect', 'engine'] as const;
    this.requests = new Counter({ name: 'polar_proxy_requests_total', help: 'Model-API calls answered, by dialect, engine and HTTP status', labelNames: ['dialect', 'engine', 'status'], registers });
    this.errors = new Counter({ name: 'polar_proxy_errors_total', help: 'Model-API calls answered with status >= 400, by dialect, engine and status', labelNames: ['dialect', 'engine', 'status'], registers });
    this.streamErrors = new Counter({ name: 'polar_proxy_stream_errors_total', help: 'Streamed calls answered 200 whose stream ended in an in-band error event, by dialect, engine and error kind', labelNames: ['dialect', 'engine', 'kind'], registers });
    this.addedLatency = new Histogram({ name: 'polar_proxy_added_latency_seconds', help: 'Latency the proxy adds around the engine call (total minus engine time)', labelNames: both, buckets: ADDED_BUCKETS, registers });
    this.engineLatency = new Histogram({ name: 'polar_proxy_engine_latency_seconds', help: 'Engine time of each captured completion', labelNames: both, buckets: ENGINE_BUCKETS, registers });
    this.tokens = new Counter({ name: 'polar_proxy_tokens_total', help: 'Tokens captured: prompt, sampled, trainable (sampled with ids and logprobs)', labelNames: ['kind'], registers });
    this.completions = new Counter({ name: 'polar_proxy_completions_total', help: 'Completion records committed', labelNames: ['engine'], registers });
    this.captureErrors = new Counter({ name: 'polar_proxy_capture_errors_total', help: 'Completion records committed with a capture error', labelNames: ['engine'], registers });
    const self = this;
    new Gauge({ name: 'polar_proxy_engine_in_flight', help: 'Engine calls in flight', registers, collect() { this.set(self.#inFlight); } });
    new Counter({ name: 'polar_proxy_engine_busy_seconds_total', help: 'Time with at least one engine call in flight', registers, collect() { this.reset(); this.inc(self.busyMs() / 1000); } });
    new Gauge({ name: 'polar_proxy_inference_paused', help: 'Whether inference is paused (POST /admin/inference/pause until /resume): 1 paused, 0 not', registers, collect() { this.set(self.#gate?.isPaused ? 1 : 0); } });
    new Gauge({ name: 'polar_proxy_engine_busy_fraction', help: 'Share of the last 60 s (or of the time since start) with at least one engine call in flight, 0..1', registers, collect() { this.set(self.busyFraction()); } });
    for (const kind of ['prompt', 'sampled', 'trainable']) this.tokens.inc({ kind }, 0);
    this.completions.inc({ engine }, 0);
    this.captureErrors.inc({ engine }, 0);
    this.#points = [{ at: now(), busyMs: 0 }];
  }

  /** Report the pause state of `gate` (the proxy's InferenceGate) in `polar_proxy_inference_paused` and `inferencePause()`. */
  trackInferenceGate(gate: PauseState): void {
    this.#gate = gate;
  }

  /** Whether inference is paused and since when (ms epoch), for `GET /health`; not paused without a tracked gate. */
  inferencePause(): { inference_paused: boolean; paused_since: number | null } {
    const paused = this.#gate?.isPaused ?? false;
    return { inference_paused: paused, paused_since: paused ? (this.#gate!.pausedSince ?? null) : null };
  }

  /** Busy time so far, ms (the running stretch included). */
  busyMs(): number {
    return this.#busyMs + (this.#inFlight > 0 ? this.now() - this.#busySince : 0);
  }

  /** Busy share over the last {@link BUSY_WINDOW_MS} (or since start), 0..1. */
  busyFraction(): number {
    const at = this.now();
    const busy = this.busyMs();
    this.#points.push({ at, busyMs: busy });
    while (this.#points.length > 2 && this.#points[1]!.at <= at - BUSY_WINDOW_MS) this.#points.shift();
    const from = this.#points[0]!;
    const span = at - from.at;
    return span <= 0 ? (this.#inFlight > 0 ? 1 : 0) : Math.min(1, Math.max(0, (busy - from.busyMs) / span));
  }

  /** An engine call started; call the returned function once when it ended. */
  engineCallStarted(): () => void {
    if (this.#inFlight++ === 0) this.#busySince = this.now();
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      if (--this.#inFlight === 0) this.#busyMs += this.now() - this.#busySince;
    };
  }

  /** Count one committed record: tokens, engine and added latency, capture errors. */
  observeRecord(rec: CompletionRecord): void {
    const labels = { dialect: rec.dialect, engine: this.engine };
    this.completions.inc({ engine: this.engine });
    if (rec.capture_error !== null) this.captureErrors.inc({ engine: this.engine });
    this.tokens.inc({ kind: 'prompt' }, promptIdsLength(rec));
    this.tokens.inc({ kind: 'sampled' }, rec.response_ids.length);
    this.tokens.inc({ kind: 'trainable' }, trainableTokens(rec));
    this.engineLatency.observe(labels, rec.timings.engine_ms / 1000);
    this.addedLatency.observe(labels, Math.max(0, rec.timings.total_ms - rec.timings.engine_ms) / 1000);
  }

  /** A stream that had sent its 200 ended in the dialect's in-band error event instead of its answer. */
  observeStreamError(dialect: string, kind: string): void {
    this.streamErrors.inc({ dialect, engine: this.engine, kind });
  }

  /**
   * Hono middleware counting every answered model-API call by the dialect its handler chose (`c.get('dialect')`).
   * A call no dialect's handler took (an unknown path, a wrong method, `/`, the OpenAI `/v1/models`, `/admin/*`, a
   * session's completions listing, `/metrics`) is not a model-API call and is not counted.
   */
  middleware() {
    return createMiddleware<{ Variables: { dialect?: { name: string } } }>(async (c, next) => {
      await next();
      const dialect = c.get('dialect');
      if (!dialect) return;
      const labels = { dialect: dialect.name, engine: this.engine, status: String(c.res.status) };
      this.requests.inc(labels);
      if (c.res.status >= 400) this.errors.inc(labels);
    });
  }

  /** This proxy's metrics plus prom-client's default registry (engine replicas, ./replica-metrics.ts). */
  async text(): Promise<string> {
    return Registry.merge([this.registry, defaultRegistry]).metrics();
  }
}
