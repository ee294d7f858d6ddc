/**
 * The simulator's counters and their Prometheus exposition (prom-client, one registry per server). Gauge and counter
 * names follow vLLM's (`vllm:num_requests_running`, ...) so dashboards built for vLLM read the simulator too.
 * Source: https://docs.vllm.ai/en/latest/design/metrics.html, https://github.com/siimon/prom-client
 */
import { Counter, Gauge, Registry } from 'prom-client';
import type { TimingModel } from './timing.ts';

/** What `SimServer.metrics()` returns. Token counts in tokens, times in ms. */
export interface SimMetrics {
  /** Time with ≥ 1 running sequence / wall time since start, 0..1. */
  busyFraction: number;
  busyMs: number;
  wallMs: number;
  /** ∫ running sequences dt, sequence·ms: Δ runningSeqMs / Δ wallMs is the mean batch over a window. */
  runningSeqMs: number;
  running: number;
  /** Requests waiting for a slot or held by a pause. */
  queueDepth: number;
  paused: boolean;
  requests: number;
  promptTokens: number;
  /** Prompt tokens served from the simulated prefix cache. */
  cachedTokens: number;
  generatedTokens: number;
  policyVersion: string;
}

export class SimCounters {
  requests = 0;
  promptTokens = 0;
  cachedTokens = 0;
  generatedTokens = 0;
  readonly registry = new Registry();
  private readonly requestsTotal: Counter;
  private readonly promptTotal: Counter;
  private readonly generationTotal: Counter;
  private readonly cachedTotal: Counter;

  constructor(timing: TimingModel, policyVersion: () => string) {
    const registers = [this.registry];
    this.requestsTotal = new Counter({ name: 'polar_sim_requests_total', help: 'Completed generation requests.', registers });
    this.promptTotal = new Counter({ name: 'vllm:prompt_tokens_total', help: 'Prompt tokens processed.', registers });
    this.generationTotal = new Counter({ name: 'vllm:generation_tokens_total', help: 'Tokens generated.', registers });
    this.cachedTotal = new Counter({ name: 'polar_sim_cached_prompt_tokens_total', help: 'Prompt tokens served from the prefix cache.', registers });
    new Gauge({ name: 'vllm:num_requests_running', help: 'Sequences running.', registers, collect() { this.set(timing.snapshot().running); } });
    new Gauge({ name: 'vllm:num_requests_waiting', help: 'Requests queued (slot or pause).', registers, collect() { this.set(timing.snapshot().queued); } });
    new Gauge({ name: 'polar_sim_busy_fraction', help: 'Time with at least one running sequence / wall time.', registers, collect() { this.set(timing.snapshot().busyFraction); } });
    new Gauge({ name: 'polar_sim_decode_step_ms', help: 'Time of one decode step at the current decode batch, ms (1000 / decode_tps + decode_step_per_seq_ms × (batch − 1)).', registers, collect() { this.set(timing.stepMs(Math.max(1, timing.snapshot().decoding))); } });
    new Gauge({ name: 'polar_sim_paused', help: '1 while generation is paused.', registers, collect() { this.set(timing.paused ? 1 : 0); } });
    new Gauge({
      name: 'polar_sim_policy_version_info',
      help: 'The policy (weight) version served, as a label.',
      labelNames: ['version'],
      registers,
      collect() {
        this.reset();
        this.labels(policyVersion()).set(1);
      },
    });
  }

  /** Count one finished request. */
  record(promptTokens: number, cachedTokens: number, generatedTokens: number): void {
    this.requests++;
    this.promptTokens += promptTokens;
    this.cachedTokens += cachedTokens;
    this.generatedTokens += generatedTokens;
    this.requestsTotal.inc();
    this.promptTotal.inc(promptTokens);
    this.cachedTotal.inc(cachedTokens);
    this.generationTotal.inc(generatedTokens);
  }

  /** Prometheus text exposition format 0.0.4. */
  exposition(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
