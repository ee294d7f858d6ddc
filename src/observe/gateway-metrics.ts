/**
 * Prometheus metrics of a gateway node, on a registry of their own; `GET /metrics` of the node serves them merged with
 * its proxy's (./proxy-metrics.ts). Names (units in the name, https://prometheus.io/docs/practices/naming/):
 *   polar_gateway_sessions{stage=queued|init|ready|running|postrun}   sessions on the node by stage, now
 *   polar_gateway_pool_occupancy{pool=init|ready|run|postrun}         sessions in the pool / its capacity, 0..1
 *   polar_gateway_stage_duration_seconds{stage=init_queue|init|ready_queue|run|postrun|build|eval|e2e}   per finished session
 *   polar_gateway_session_results_total{status,harness}               finished sessions
 *   polar_gateway_harness_failures_total{harness}                     sessions that ended ERROR or TIMEOUT (not cancelled)
 *   polar_trace_chains_total                                          trajectory chains (traces) built
 *   polar_trace_chain_breaks_total{reason}                            chain breaks by reason (prefix_break, …)
 *   polar_trace_rerendered_joins_total                                joins where the next prompt held a re-rendered answer
 *   polar_trace_trainable_tokens_total                                loss_mask = 1 tokens of built trajectories
 * prom-client: https://github.com/siimon/prom-client
 */
import { Counter, Gauge, Histogram, Registry, register as defaultRegistry } from 'prom-client';
import { isCancelledError } from '../core/contracts/index.ts';
import type { SessionResult } from '../core/records.ts';
import { BREAK_REASONS } from '../trace/trace-parts.ts';

const STAGE_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

/** Stage counts (src/core/contracts StageCounts) and pool capacities, as the node reports them. */
export interface GatewayMetricsSource {
  stageCounts(): { queued: number; init: number; ready: number; running: number; postrun: number };
  capacity: { init_workers: number; ready_buffer: number; max_run_workers: number; postrun_workers: number };
}

export class GatewayMetrics {
  readonly registry = new Registry();
  readonly stageDuration: Histogram<'stage'>;
  readonly results: Counter<'status' | 'harness'>;
  readonly harnessFailures: Counter<'harness'>;
  readonly chains: Counter;
  readonly chainBreaks: Counter<'reason'>;
  readonly rerenderedJoins: Counter;
  readonly trainableTokens: Counter;

  constructor(source: GatewayMetricsSource) {
    const registers = [this.registry];
    new Gauge({
      name: 'polar_gateway_sessions', help: 'Sessions on this node by stage', labelNames: ['stage'], registers,
      collect() {
        for (const [stage, n] of Object.entries(source.stageCounts())) this.set({ stage }, n);
      },
    });
    new Gauge({
      name: 'polar_gateway_pool_occupancy', help: 'Sessions in each worker pool divided by its capacity, 0..1 (ready: the READY buffer)', labelNames: ['pool'], registers,
      collect() {
        const n = source.stageCounts();
        const cap = source.capacity;
        const share = (x: number, c: number) => (c <= 0 ? (x > 0 ? 1 : 0) : x / c);
        this.set({ pool: 'init' }, share(n.init, cap.init_workers));
        this.set({ pool: 'ready' }, share(n.ready, cap.ready_buffer));
        this.set({ pool: 'run' }, share(n.running, cap.max_run_workers));
        this.set({ pool: 'postrun' }, share(n.postrun, cap.postrun_workers));
      },
    });
    this.stageDuration = new Histogram({ name: 'polar_gateway_stage_duration_seconds', help: 'Time finished sessions spent in each stage', labelNames: ['stage'], buckets: STAGE_BUCKETS, registers });
    this.results = new Counter({ name: 'polar_gateway_session_results_total', help: 'Finished sessions by status and harness', labelNames: ['status', 'harness'], registers });
    this.harnessFailures = new Counter({ name: 'polar_gateway_harness_failures_total', help: 'Sessions that ended ERROR or TIMEOUT (cancellations excluded), by harness', labelNames: ['harness'], registers });
    this.chains = new Counter({ name: 'polar_trace_chains_total', help: 'Trajectory chains (traces) built', registers });
    this.chainBreaks = new Counter({ name: 'polar_trace_chain_breaks_total', help: 'Chain breaks by reason: a completion that did not extend an open chain opened a new one', labelNames: ['reason'], registers });
    this.rerenderedJoins = new Counter({ name: 'polar_trace_rerendered_joins_total', help: 'Joins where the next prompt held a re-rendered version of the sampled answer (chat mode)', registers });
    this.trainableTokens = new Counter({ name: 'polar_trace_trainable_tokens_total', help: 'Tokens with loss_mask 1 in built trajectories', registers });
    for (const reason of BREAK_REASONS) this.chainBreaks.inc({ reason }, 0);
  }

  /** Count one finished session. `harness` is the task's agent.harness (default shell). */
  observeResult(result: SessionResult, harness: string): void {
    this.results.inc({ status: result.status, harness });
    const cancelled = result.status === 'CANCELLED' || isCancelledError(result.error);
    if ((result.status === 'ERROR' || result.status === 'TIMEOUT') && !cancelled) this.harnessFailures.inc({ harness });
    const t = result.timing;
    const stages: [string, number][] = [['init_queue', t.init_queue_ms ?? NaN], ['init', t.init_ms], ['ready_queue', t.ready_queue_ms], ['run', t.run_ms], ['postrun', t.postrun_ms], ['build', t.build_ms], ['eval', t.eval_ms], ['e2e', t.e2e_ms]];
    for (const [stage, ms] of stages) if (Number.isFinite(ms) && ms >= 0) this.stageDuration.observe({ stage }, ms / 1000);
    const stats = result.trajectory.metadata.reconstruction_stats;
    if (stats) {
      this.chains.inc(stats.chains);
      for (const [reason, n] of Object.entries(stats.breaks ?? {})) if (n > 0) this.chainBreaks.inc({ reason }, n);
      if (stats.rerender_mismatches) this.rerenderedJoins.inc(stats.rerender_mismatches);
    }
    let trainable = 0;
    for (const trace of result.trajectory.traces) for (const m of trace.loss_mask) trainable += m;
    if (trainable > 0) this.trainableTokens.inc(trainable);
  }

  /** This node's metrics, the `extra` registries' (its proxy's) and prom-client's default one (engine replicas, ./replica-metrics.ts). */
  async text(extra: Registry[] = []): Promise<{ text: string; contentType: string }> {
    const registry = Registry.merge([this.registry, ...extra, defaultRegistry]);
    return { text: await registry.metrics(), contentType: this.registry.contentType };
  }
}
