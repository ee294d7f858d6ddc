/**
 * Several replicas of one engine behind one EngineClient (`engine.urls`). Routing: a session's calls go to the replica
 * that served its previous call (that replica holds the session's prefix in its KV cache, so multi-turn prefixes are
 * reused); a session's first call, and a call whose replica is draining or failed its health check, go to the usable
 * replica with the fewest calls in flight (least outstanding requests; ties to the lower index).
 *
 * Token data stays correct when a session moves: in token mode all replicas share one set of per-session token buffers
 * (TokenModeEngine `sharedBuffers`), so the moved session's next prompt is its previous prompt + sampled ids extended by
 * the new messages, exactly as on its old replica. Chat mode keeps no per-session state in the proxy; each record names
 * the replica that produced it (`engine_id`).
 *
 * Health: each replica is checked with `GET /v1/models` (health.ts) every `healthIntervalMs`; a failed call with
 * GatewayError 'upstream' or 'timeout' also marks it down until its next successful check. A call that fails with
 * 'upstream' before any of it reached the caller is retried once on another usable replica (see #call).
 */
import { ByteLru } from '../core/byte-lru.ts';
import { GatewayError } from '../core/errors.ts';
import type { IRRequest } from '../core/ir.ts';
import { replicaMetrics, type ReplicaMetrics } from '../observe/replica-metrics.ts';
import { EngineHealthMonitor, engineLivenessCheck, type EngineCheck } from './health.ts';
import type { EngineCallContext, EngineClient, EngineCompletion, EngineKind, EngineProbeReport, EngineStreamEvent, CaptureMode } from './types.ts';

/** One replica's state as `GET /admin/engine/replicas` and the health document show it. */
export interface ReplicaState {
  url: string;
  id: string;
  healthy: boolean;
  /** Why the last health check or call failed; null when healthy. */
  error: string | null;
  draining: boolean;
  outstanding: number;
  requests: number;
  /** Sessions whose calls currently go to this replica (of the `maxAffinitySessions` most recently routed). */
  sessions: number;
}

export interface ReplicaRouterOptions {
  /** Liveness check per replica (default `GET {url}/v1/models`). */
  check?: (url: string) => EngineCheck;
  /** Health check period in ms (default 5000; 0 = no periodic checks). */
  healthIntervalMs?: number;
  /**
   * Session affinity (default true). False routes every call by least outstanding requests alone, so a session's turns
   * land wherever there is room and its prefix is recomputed elsewhere (bench/replicas.ts measures the difference).
   */
  affinity?: boolean;
  /**
   * Sessions whose replica is remembered (default 65,536), most recently routed kept: a session nobody ends (`polar
   * proxy`'s ad-hoc sessions) must not grow the map for ever. A forgotten session is routed like a new one at its next
   * call (least outstanding requests), so it may lose its replica's prefix cache once.
   */
  maxAffinitySessions?: number;
  /** Metrics sink (default: replica metrics on prom-client's default registry). */
  metrics?: ReplicaMetrics;
  log?: (line: string) => void;
}

interface Replica {
  url: string;
  client: EngineClient;
  healthy: boolean;
  error: string | null;
  draining: boolean;
  outstanding: number;
  requests: number;
  monitor: EngineHealthMonitor | null;
}

/** Routes calls over several engine replicas of one kind and mode. See the module comment. */
export class ReplicaRouter implements EngineClient {
  readonly kind: EngineKind;
  readonly mode: CaptureMode;
  readonly id: string;
  readonly #replicas: Replica[];
  readonly #affinity: ByteLru<Replica>;
  readonly #metrics: ReplicaMetrics;
  readonly #log: (line: string) => void;

  /**
   * @param replicas one client per replica URL, all of the same kind and mode.
   * @throws Error when there are no replicas, URLs repeat, or kinds/modes differ.
   */
  constructor(replicas: Array<{ url: string; client: EngineClient }>, private readonly opts: ReplicaRouterOptions = {}) {
    if (replicas.length === 0) throw new Error('engine replicas: at least one URL is needed');
    const urls = replicas.map((r) => r.url);
    const repeated = urls.find((u, i) => urls.indexOf(u) !== i);
    if (repeated) throw new Error(`engine replicas: URL ${repeated} is listed twice`);
    const first = replicas[0]!.client;
    for (const r of replicas) {
      if (r.client.kind !== first.kind || r.client.mode !== first.mode) throw new Error(`engine replicas must share kind and mode: ${r.client.id} is ${r.client.kind}/${r.client.mode}, ${first.id} is ${first.kind}/${first.mode}`);
    }
    this.kind = first.kind;
    this.mode = first.mode;
    this.id = `${first.id.slice(0, first.id.indexOf('@'))}@${urls.join(',')}`;
    this.#affinity = new ByteLru<Replica>(opts.maxAffinitySessions ?? 65_536, () => 1);
    this.#metrics = opts.metrics ?? replicaMetrics();
    this.#log = opts.log ?? ((line) => console.warn(line));
    this.#replicas = replicas.map((r) => ({ url: r.url, client: r.client, healthy: true, error: null, draining: false, outstanding: 0, requests: 0, monitor: null }));
    for (const r of this.#replicas) {
      this.#metrics.healthy.set({ replica: r.url }, 1);
      this.#metrics.draining.set({ replica: r.url }, 0);
      this.#metrics.outstanding.set({ replica: r.url }, 0);
    }
  }

  /**
   * Probe every replica; replicas that fail are marked down (logged) and checked again by the health monitor.
   * @throws the first replica's error when no replica could be probed.
   */
  async probe(): Promise<void> {
    const results = await Promise.allSettled(this.#replicas.map((r) => r.client.probe()));
    results.forEach((result, i) => {
      if (result.status === 'rejected') this.#markDown(this.#replicas[i]!, result.reason);
    });
    if (results.every((r) => r.status === 'rejected')) throw (results[0] as PromiseRejectedResult).reason;
    this.#startHealth();
  }

  #startHealth(): void {
    const interval = this.opts.healthIntervalMs ?? 5000;
    if (interval <= 0) return;
    for (const r of this.#replicas) {
      if (r.monitor) continue;
      const check = this.opts.check?.(r.url) ?? engineLivenessCheck({ url: r.url });
      r.monitor = new EngineHealthMonitor({
        describe: `engine replica ${r.url}`, intervalMs: interval, log: this.#log,
        check: async () => {
          try {
            await check();
            // Coming back: a replica whose probe failed at start-up is probed now, before it takes calls.
            if (!r.healthy) await r.client.probe();
            this.#markUp(r);
          } catch (error) {
            this.#markDown(r, error);
            throw error;
          }
        },
      });
      void r.monitor.start();
    }
  }

  /** Stop the periodic health checks (orderly shutdown, tests). */
  close(): void {
    for (const r of this.#replicas) r.monitor?.stop();
  }

  /** Run one health check of every replica now. */
  async checkHealth(): Promise<void> {
    this.#startHealth();
    await Promise.all(this.#replicas.map((r) => r.monitor?.checkNow()));
  }

  #markDown(r: Replica, error: unknown): void {
    r.healthy = false;
    r.error = error instanceof Error ? error.message : String(error);
    this.#metrics.healthy.set({ replica: r.url }, 0);
  }

  #markUp(r: Replica): void {
    r.healthy = true;
    r.error = null;
    this.#metrics.healthy.set({ replica: r.url }, 1);
  }

  /** The replicas' state, in configuration order. */
  replicas(): ReplicaState[] {
    const sessions = new Map<Replica, number>();
    for (const r of this.#affinity.values()) sessions.set(r, (sessions.get(r) ?? 0) + 1);
    return this.#replicas.map((r) => ({ url: r.url, id: r.client.id, healthy: r.healthy, error: r.error, draining: r.draining, outstanding: r.outstanding, requests: r.requests, sessions: sessions.get(r) ?? 0 }));
  }

  /**
   * Drain (or undrain) one replica: it takes no new sessions, and sessions routed to it move to another replica at
   * their next call; calls in flight on it finish there.
   * @throws GatewayError 'not-found' when no replica has this URL.
   */
  setDraining(url: string, draining: boolean): ReplicaState {
    const index = this.#replicas.findIndex((r) => r.url === url.replace(/\/+$/, '') || r.url === url);
    if (index < 0) throw new GatewayError('not-found', `no engine replica with URL ${JSON.stringify(url)} (replicas: ${this.#replicas.map((r) => r.url).join(', ')})`);
    const r = this.#replicas[index]!;
    r.draining = draining;
    this.#metrics.draining.set({ replica: r.url }, draining ? 1 : 0);
    return this.replicas()[index]!;
  }

  /** The replica for a session's next call (see the module comment). @throws GatewayError 'upstream' when none is usable. */
  #pick(sessionId: string): Replica {
    const usable = (r: Replica) => r.healthy && !r.draining;
    const held = this.#affinity.get(sessionId);
    if (held && usable(held) && this.opts.affinity !== false) {
      this.#affinity.set(sessionId, held); // most recently routed: kept over sessions that went quiet
      this.#metrics.routed.inc({ replica: held.url, reason: 'hit' });
      return held;
    }
    let best: Replica | null = null;
    for (const r of this.#replicas) if (usable(r) && (best === null || r.outstanding < best.outstanding)) best = r;
    if (!best) {
      const why = this.#replicas.map((r) => `${r.url}: ${r.draining ? 'draining' : r.error ?? 'down'}`).join('; ');
      throw new GatewayError('upstream', `no engine replica is usable (${why})`);
    }
    this.#affinity.set(sessionId, best);
    this.#metrics.routed.inc({ replica: best.url, reason: held === undefined ? 'new' : held === best ? 'hit' : 'moved' });
    return best;
  }

  /**
   * Run a call on the session's replica. A call that fails there with GatewayError 'upstream' (connection refused,
   * 5xx, a broken stream) before anything of it reached the caller (`delivered()` false) is retried once on another
   * usable replica: the failed replica is marked down, the session's affinity moves, and the caller sees one answer.
   * In token mode the shared token buffers are only committed after a successful call, so the retried call renders
   * the same prompt on the new replica. A timeout or a caller's abort is not retried (the engine may still be working).
   */
  async #call<T>(ctx: EngineCallContext, run: (client: EngineClient) => Promise<T>, delivered: () => boolean = () => false): Promise<T> {
    const first = this.#pick(ctx.sessionId);
    try {
      return await this.#attempt(first, ctx, run);
    } catch (error) {
      const retryable = error instanceof GatewayError && error.kind === 'upstream' && !(ctx.signal?.aborted ?? false) && !delivered();
      if (!retryable || !this.#replicas.some((r) => r !== first && r.healthy && !r.draining)) throw error;
      const second = this.#pick(ctx.sessionId);
      this.#log(`engine replica ${first.url} failed a call of session ${ctx.sessionId} (${error.message}); retrying it on ${second.url}`);
      return await this.#attempt(second, ctx, run);
    }
  }

  async #attempt<T>(r: Replica, ctx: EngineCallContext, run: (client: EngineClient) => Promise<T>): Promise<T> {
    r.outstanding++;
    r.requests++;
    this.#metrics.requests.inc({ replica: r.url });
    this.#metrics.outstanding.set({ replica: r.url }, r.outstanding);
    try {
      return await run(r.client);
    } catch (error) {
      this.#metrics.errors.inc({ replica: r.url });
      // An unreachable or stuck replica takes no more calls until its health check passes again.
      if (error instanceof GatewayError && (error.kind === 'upstream' || error.kind === 'timeout') && !(ctx.signal?.aborted ?? false)) this.#markDown(r, error);
      throw error;
    } finally {
      r.outstanding--;
      this.#metrics.outstanding.set({ replica: r.url }, r.outstanding);
    }
  }

  servedModel(): string {
    const probed = this.#replicas.find((r) => r.healthy) ?? this.#replicas[0]!;
    return probed.client.servedModel();
  }

  complete(request: IRRequest, ctx: EngineCallContext): Promise<EngineCompletion> {
    return this.#call(ctx, async (client) => ({ engineId: client.id, ...(await client.complete(request, ctx)) }));
  }

  streams(): boolean {
    return this.#replicas.every((r) => !r.healthy || (r.client.streams?.() ?? false));
  }

  stream(request: IRRequest, ctx: EngineCallContext, onEvent: (event: EngineStreamEvent) => void): Promise<EngineCompletion> {
    // Once an event went to the caller, a failure is final: a retry would stream a second answer after the first part.
    let delivered = false;
    const forward = (event: EngineStreamEvent) => {
      delivered = true;
      onEvent(event);
    };
    return this.#call(ctx, async (client) => {
      if (!client.stream) throw new GatewayError('internal', `engine ${client.id} does not stream`);
      return { engineId: client.id, ...(await client.stream(request, ctx, forward)) };
    }, () => delivered);
  }

  countTokens(request: IRRequest, ctx: EngineCallContext): Promise<number> {
    return this.#call(ctx, (client) => client.countTokens(request, ctx));
  }

  probeReport(): EngineProbeReport | null {
    for (const r of this.#replicas) {
      const report = r.client.probeReport?.();
      if (report) return report;
    }
    return null;
  }

  stats(): Record<string, unknown> {
    return { replicas: this.replicas().map((state, i) => ({ ...state, stats: this.#replicas[i]!.client.stats?.() ?? null })) };
  }

  endSession(sessionId: string): void {
    this.#affinity.delete(sessionId);
    // Shared token buffers: ending the session on one replica drops them for all; each client is told anyway.
    for (const r of this.#replicas) r.client.endSession?.(sessionId);
  }
}
