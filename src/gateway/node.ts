/**
 * The gateway node: owns each session from sandbox start to the rewarded trajectory.
 * Stages: queued → INIT (runtime start, prepare actions, harness install + config) → READY (bounded) → RUNNING
 * (harness process group) → POSTRUN (build, evaluate, filter, store, teardown, callback).
 * This file holds the session table and the stage scheduler; what each stage does is in ./session-stages.ts and
 * ./postrun.ts, rollout membership in ./registration.ts, the HTTP surface in ./session-api.ts.
 * Wire shapes (DispatchSpec, SessionResult, heartbeats): src/core/contracts/.
 */
import { systemClock, type Clock } from '../core/clock.ts';
import { DispatchError, dispatchSpecSchema, formatIssues, formatProblems, runnableProblems, taskSamplingOf, type DispatchSpec, type StageCounts, type TaskSampling } from '../core/contracts/index.ts';
import type { SessionResult, SessionStatus } from '../core/records.ts';
import type { EngineHealth } from '../engines/health.ts';
import { EventHub } from '../observe/events.ts';
import { GatewayMetrics } from '../observe/gateway-metrics.ts';
import type { SessionDirectory } from '../proxy/types.ts';
import { EVALUATORS } from './evaluators/index.ts';
import type { Evaluator } from './evaluators/types.ts';
import { HARNESS_ADAPTERS } from './harnesses/index.ts';
import type { HarnessAdapter } from './harnesses/types.ts';
import {
  errorText, StageAborted,
  type GatewayCapacity, type GatewayNodeOptions, type NodeContext, type ProxyMetricsView, type Session, type SessionEvent, type SessionListFilter, type SessionView,
} from './node-types.ts';
import { postrun, teardown } from './postrun.ts';
import { announceDraining, announceLeaving, handBack, startRegistration } from './registration.ts';
import { createRuntime, describeSandbox, parseRuntimeSpec, type GatewayEndpoint, type SandboxDescription, type RuntimeFactory, type RuntimeSpec } from './runtimes/index.ts';
import { GatewaySocket } from './runtimes/tunnel.ts';
import { evaluatorSourceProblems, uploadSourceProblems } from '../core/upload-roots.ts';
import { reapOrphanSessions } from './runtimes/local.ts';
import { startSessionServer } from './session-api.ts';
import { BeforeSessionFailed, initSession, prepareFreshRuntime, runHarness } from './session-stages.ts';
import { PoolSizer, type PoolSizes } from './pool-sizing.ts';
import { ByteLru } from '../core/byte-lru.ts';

/** A finished session that left memory (GatewayNodeOptions.keepFinishedSessions): its view without the result. */
interface DepartedSession {
  task_id: string;
  sample_index: number;
  attempt: number;
  status: SessionStatus;
  error: string | null;
  /** When it left memory (the node's clock, ms). */
  departedAt: number;
}

/** Departed sessions remembered for `get` and dispatch's 409 (~200 bytes each). */
const MAX_DEPARTED_SESSIONS = 65_536;
/** How long a departed session stays in the heartbeat's session statuses, ms. */
const DEPARTED_HEARTBEAT_MS = 10 * 60_000;

export { DispatchError } from '../core/contracts/index.ts';
export type { DispatchSpec, StageCounts } from '../core/contracts/index.ts';
export type { EngineHealth } from '../engines/health.ts';
export type { GatewayCapacity, GatewayNodeOptions, GatewayStore, SessionEvent, SessionListFilter, SessionView } from './node-types.ts';

/** How long a session waits for a down engine before it ends ERROR, ms (config `gateway.engine_wait_s`). */
export const DEFAULT_ENGINE_WAIT_MS = 600_000;

/**
 * How long the engine must have been down for a waiting session before the node gives it back to the rollout server,
 * ms (config `gateway.engine_handback_s`): longer than a few of the engine checks (every 10 s) so a blip hands nothing
 * back, and a tenth of `DEFAULT_ENGINE_WAIT_MS`, so other nodes get the work long before it would fail here.
 */
export const DEFAULT_ENGINE_HANDBACK_MS = 60_000;
/** After a handback the server declined in part (no other node could run them) or could not be asked, ms. */
const HANDBACK_RETRY_MS = 10_000;
/** Most sessions one handback offers (the server's limit, src/core/contracts/nodes.ts `handbackSchema`); more go next. */
const MAX_HANDBACK = 10_000;

const DEFAULT_CAPACITY: GatewayCapacity = { init_workers: 4, ready_buffer: 4, max_run_workers: 8, postrun_workers: 4 };

export class GatewayNode {
  readonly nodeId: string;
  readonly capacity: GatewayCapacity;
  readonly events: EventHub;
  /** Prometheus metrics of this node (`GET /metrics`, merged with its proxy's). */
  readonly metrics: GatewayMetrics;
  /** The proxy's metrics (its registry, busy fraction and pause state), when the proxy factory gives them. */
  private proxyMetrics: ProxyMetricsView | null = null;
  private readonly sessions = new Map<string, Session>();
  /** Finished sessions that may leave memory (result stored, delivered when there is a callback), in finish order. */
  private readonly evictable = new Set<string>();
  /** What is left of sessions that left memory: enough for `get`, a 409 on dispatch, and a while in the heartbeat. */
  private readonly departed = new ByteLru<DepartedSession>(MAX_DEPARTED_SESSIONS, () => 1);
  private readonly keepFinished: number;
  private initQueue: Session[] = [];
  private readyQueue: Session[] = [];
  private postrunQueue: Session[] = [];
  private readonly initing = new Set<Session>();
  private readonly runningSet = new Set<Session>();
  private readonly postrunning = new Set<Session>();
  private readonly eventListeners = new Set<(e: SessionEvent) => void>();
  private readonly resultListeners = new Set<(r: SessionResult) => void>();
  private readonly background = new Set<Promise<unknown>>();
  private readonly clock: Clock;
  private readonly harnesses: Readonly<Record<string, HarnessAdapter>>;
  private readonly evaluators: Readonly<Record<string, Evaluator>>;
  private readonly runtimeFactory: RuntimeFactory;
  private order = 0;
  private server: ReturnType<typeof Bun.serve> | null = null;
  private stopHeartbeats: (() => void) | null = null;
  private stopping = new AbortController();
  /** Set by stop(): no new sessions are accepted while the running ones are cancelled and reported. */
  private draining = false;
  private gatewayUrlValue: string | null;
  private readonly ctx: NodeContext;
  /** INIT pool and READY buffer in use: `capacity`'s, or with `poolSizing: auto` what observed stage times call for. */
  private pools: PoolSizes;
  private readonly sizer: PoolSizer | null;
  private readonly engineWaitMs: number;
  /** An engine check asked for after a session failed (GatewayNodeOptions.checkEngine): nothing starts until it answers. */
  private engineRecheck: Promise<void> | null = null;
  /** Sessions whose `beforeSession` failed, held out of every queue while the engine re-check runs: counted as queued. */
  private readonly rechecking = new Set<Session>();
  /** Engine-down wait before a waiting session is handed back to the rollout server, ms; null: never. */
  private readonly engineHandbackMs: number | null;
  /** Sessions offered to the rollout server (out of their queue while it answers); counted in their stage. */
  private readonly handingBack = new Set<Session>();
  private handbackInFlight: Promise<void> | null = null;
  /** No handback before this (node clock ms): one was declined or failed. */
  private nextHandbackAt = 0;
  /**
   * While started: notices an engine that went down while nothing else happened (no dispatch, no stage ending, e.g.
   * harnesses that run for minutes), so the queued and READY sessions start waiting (budget paused, wait clock and
   * handback running) then, not at the next stage change.
   */
  private engineWatch: ReturnType<typeof setInterval> | null = null;
  /** Reads `engineHealth` while sessions wait for the engine (ends them after `engineWaitMs`); null when none wait. */
  private engineWaitTimer: ReturnType<typeof setInterval> | null = null;

  constructor(private readonly opts: GatewayNodeOptions) {
    this.nodeId = opts.nodeId;
    const given = opts.capacity ?? {};
    this.capacity = {
      init_workers: given.init_workers ?? DEFAULT_CAPACITY.init_workers,
      ready_buffer: given.ready_buffer ?? DEFAULT_CAPACITY.ready_buffer,
      max_run_workers: given.max_run_workers ?? DEFAULT_CAPACITY.max_run_workers,
      postrun_workers: given.postrun_workers ?? DEFAULT_CAPACITY.postrun_workers,
    };
    for (const [k, v] of Object.entries(this.capacity)) {
      if (!Number.isInteger(v) || v < (k === 'ready_buffer' ? 0 : 1)) throw new Error(`gateway capacity ${k} must be an integer ≥ ${k === 'ready_buffer' ? 0 : 1}, got ${v}`);
    }
    this.engineWaitMs = opts.engineWaitMs ?? DEFAULT_ENGINE_WAIT_MS;
    if (!(this.engineWaitMs >= 0)) throw new Error(`gateway engineWaitMs must be ≥ 0, got ${opts.engineWaitMs}`);
    this.engineHandbackMs = opts.engineHandbackMs === undefined ? DEFAULT_ENGINE_HANDBACK_MS : opts.engineHandbackMs;
    if (this.engineHandbackMs !== null && !(this.engineHandbackMs >= 0)) throw new Error(`gateway engineHandbackMs must be ≥ 0 or null, got ${opts.engineHandbackMs}`);
    this.keepFinished = opts.keepFinishedSessions ?? 256;
    if (!Number.isInteger(this.keepFinished) || this.keepFinished < 0) throw new Error(`gateway keepFinishedSessions must be an integer ≥ 0, got ${opts.keepFinishedSessions}`);
    this.pools = { init_workers: this.capacity.init_workers, ready_buffer: this.capacity.ready_buffer };
    this.sizer = opts.poolSizing === 'auto' ? new PoolSizer(this.capacity.max_run_workers, this.pools) : null;
    this.clock = opts.clock ?? systemClock;
    this.events = new EventHub(this.clock);
    this.metrics = new GatewayMetrics(this);
    this.resultListeners.add((r) => {
      const s = this.sessions.get(r.session_id);
      this.metrics.observeResult(r, s?.spec.task.agent.harness ?? 'shell');
    });
    this.harnesses = opts.harnesses ?? HARNESS_ADAPTERS;
    this.evaluators = opts.evaluators ?? EVALUATORS;
    this.runtimeFactory = opts.runtimeFactory ?? createRuntime;
    this.gatewayUrlValue = opts.gatewayUrl ?? null;
    this.ctx = {
      nodeId: this.nodeId, opts, clock: this.clock, runtimeFactory: this.runtimeFactory, resultListeners: this.resultListeners,
      stopping: () => this.stopping.signal,
      gatewayUrl: () => this.gatewayUrl(),
      gatewayEndpoint: () => this.gatewayEndpoint(),
      setStatus: (s, status) => this.setStatus(s, status),
      track: (p) => this.track(p),
      finished: (session, stored, delivery) => this.finished(session, stored, delivery),
    };
  }

  // ── public API ────────────────────────────────────────────────────────────────────────────────────────────────

  /** Listen URL of the session API + proxy (after `start`). */
  get url(): string {
    if (!this.server) throw new Error('gateway node not started');
    return `http://${this.server.hostname}:${this.server.port}`;
  }

  /** The directory the proxy uses: a session id resolves while the session is in INIT, READY or RUNNING. */
  readonly directory: SessionDirectory = {
    resolve: (key) => {
      const s = this.sessions.get(key);
      if (!s || !(s.stage === 'init' || s.stage === 'ready' || s.stage === 'running')) return null;
      const policy = s.spec.task.metadata?.policy_version;
      const sampling = taskSamplingCached(s.spec.task);
      return { session_id: s.id, task_id: s.spec.task.task_id, attempt: s.spec.attempt ?? 0, ...(policy !== undefined ? { policy_version: policy } : {}), ...(sampling ? { sampling } : {}) };
    },
  };

  /** Start the HTTP server (session API + proxy fallback) and, when configured, rollout registration + heartbeats. */
  async start(): Promise<void> {
    if (this.server) return;
    this.stopping = new AbortController();
    this.draining = false;
    // Sandboxes a dead predecessor on this work root left (its process was killed): end their process groups and
    // remove their directories, so a restart leaks nothing; the rollout server re-dispatches those sessions.
    const reaped = reapOrphanSessions(this.opts.workRoot);
    if (reaped.dirs > 0) this.opts.log?.(`removed ${reaped.dirs} session director${reaped.dirs === 1 ? 'y' : 'ies'} and ${reaped.groups} process group(s) a previous gateway process left in ${this.opts.workRoot}`);
    const proxy = this.opts.proxy?.(this.directory, { adminToken: this.opts.controlPlaneToken ?? null });
    this.proxyMetrics = proxy?.metrics ?? null;
    this.server = startSessionServer(this, {
      host: this.opts.host ?? '127.0.0.1', port: this.opts.port ?? 0, token: this.opts.controlPlaneToken ?? null, fallback: proxy?.fetch,
    });
    this.gatewayUrlValue ??= this.url;
    if (this.opts.engineHealth) {
      this.engineWatch = setInterval(() => {
        const waiting = this.initQueue.length + this.readyQueue.length > 0;
        if (waiting && this.engineWaitTimer === null && this.engineRecheck === null && this.engineDown() !== null) this.pump();
      }, this.opts.engineWaitPollMs ?? 1000);
      this.engineWatch.unref?.();
    }
    // Network-isolated sandboxes reach this node only through this socket: the model API, none of the session API.
    this.gatewaySocket = await GatewaySocket.open((req, server) => proxy ? proxy.fetch(req, server) : Response.json({ error: 'not found' }, { status: 404 }));
    if (this.opts.rollout) {
      this.stopHeartbeats = startRegistration({
        server: this.opts.rollout.url, nodeId: this.nodeId, url: this.opts.publicUrl ?? this.url, capacity: this.capacity,
        intervalMs: this.opts.rollout.heartbeatIntervalMs ?? 5000, token: this.opts.controlPlaneToken, signal: this.stopping.signal,
        stages: () => this.stageCounts(), sessions: () => this.heartbeatStatuses(), engineOk: () => this.engineHealth()?.ok ?? null,
        pools: () => (this.sizer ? this.poolSizes() : null),
        track: (p) => this.track(p), fetch: this.opts.fetch, log: this.opts.log,
      });
    }
  }

  /**
   * Stop taking sessions (the rollout server is told to drain this node, `DELETE /nodes/{id}`) and interrupt every
   * unfinished one whose harness still runs (process groups end; `reason`, e.g. "interrupted: SIGTERM", is logged on the
   * node's own view). Sessions in POSTRUN get up to `graceMs` (default 30000) to be evaluated and sent; after it they are
   * interrupted too. Nothing is cancelled because a node stopped: an interrupted session's result is neither stored nor
   * sent, and the rollout server runs it again as a new attempt (told at once by `POST /nodes/{id}/leave`, else by the
   * missed heartbeats, or by this node's re-registration). Then aborts what is left and stops the server. Callbacks
   * already on their way get the grace, so a finished run does not log "callback … failed: gateway stopping" for a
   * result the rollout server was storing.
   */
  async stop(opts: { reason?: string; graceMs?: number } = {}): Promise<void> {
    this.draining = true;
    this.stopHeartbeats?.();
    this.stopHeartbeats = null;
    const membership = this.opts.rollout ? { server: this.opts.rollout.url, nodeId: this.nodeId, token: this.opts.controlPlaneToken, fetch: this.opts.fetch, log: this.opts.log } : null;
    // No more dispatches here while the grace runs (each would be refused with 503 and count against the node).
    if (membership) await announceDraining(membership);
    const reason = opts.reason ?? 'gateway stopping';
    const pending = [...this.sessions.values()].filter((s) => s.stage !== 'done');
    // A session whose harness has finished (POSTRUN, or waiting for a POSTRUN slot) gets the grace to be evaluated and
    // sent; the others are interrupted at once.
    for (const s of pending) if (s.stage !== 'postrun' && s.stage !== 'postrun_queued') this.cancel(s.id, reason, { interrupted: true });
    // Callbacks retry under the `stopping` signal: abort it only after the grace period, so the results get through.
    const settled = Promise.allSettled(pending.map((s) => s.done)).then(() => Promise.allSettled([...this.background]));
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([settled, new Promise<void>((resolve) => { timer = setTimeout(resolve, opts.graceMs ?? 30_000); })]);
    clearTimeout(timer);
    for (const s of pending) if (s.stage !== 'done') this.cancel(s.id, reason, { interrupted: true });
    await Promise.allSettled(pending.map((s) => s.done));
    // The finished sessions' results went out above; the interrupted ones run again as new attempts.
    if (membership) await announceLeaving(membership);
    this.stopping.abort(new Error('gateway stopping'));
    await Promise.allSettled(pending.map((s) => s.done));
    await Promise.allSettled([...this.background]);
    this.stopEngineWait();
    if (this.engineWatch) clearInterval(this.engineWatch);
    this.engineWatch = null;
    this.server?.stop(true);
    this.server = null;
    await this.gatewaySocket?.close();
    this.gatewaySocket = null;
  }

  /**
   * Accept a session (status REGISTERED, queued for INIT by dispatch_priority then FIFO).
   * @throws DispatchError 400 on a bad spec (unknown harness/evaluator, bad runtime), 409 on a known session id.
   */
  dispatch(raw: DispatchSpec | unknown): { session_id: string; status: SessionStatus } {
    const parsed = dispatchSpecSchema.safeParse(raw);
    if (!parsed.success) throw new DispatchError(`invalid session spec: ${formatIssues(parsed.error)}`, 400);
    const spec = parsed.data;
    const held = this.get(spec.session_id, { result: false });
    if (held) {
      // A server that adopts a departed session learns its end from the heartbeat: it rides there 10 minutes more.
      const gone = this.departed.get(spec.session_id);
      if (gone) this.departed.set(spec.session_id, { ...gone, departedAt: this.clock() });
      // The rollout server adopts what the node holds (it never dispatches a session twice): say which attempt it is.
      throw new DispatchError(`session ${spec.session_id} already exists on node ${this.nodeId}`, 409, {
        session_id: held.session_id, attempt: held.attempt, status: held.status,
      });
    }
    if (this.draining || this.stopping.signal.aborted) throw new DispatchError('node is stopping', 503);
    const task = spec.task;
    const problems = runnableProblems(task, { harnesses: Object.keys(this.harnesses), evaluators: Object.keys(this.evaluators) });
    if (problems.length > 0) throw new DispatchError(formatProblems(problems), 400);
    const adapter = this.harnesses[(task.agent.harness ?? 'shell').replaceAll('-', '_')]!;
    const evaluator = task.evaluator ? this.evaluators[task.evaluator.strategy]! : this.evaluators.session_completed;
    let runtimeSpec: RuntimeSpec;
    try {
      runtimeSpec = parseRuntimeSpec(task.runtime, this.opts.runtimeDefaults);
    } catch (error) {
      throw new DispatchError((error as Error).message, 400);
    }
    if (this.opts.uploadRoots) {
      const outside = [...uploadSourceProblems(runtimeSpec.prepare, this.opts.uploadRoots), ...evaluatorSourceProblems(task.evaluator, this.opts.uploadRoots)];
      if (outside.length > 0) throw new DispatchError(`invalid session spec: ${outside.join('; ')}`, 400);
    }
    const refresh = task.evaluator?.refresh_runtime === true;
    let resolveDone!: (r: SessionResult) => void;
    const done = new Promise<SessionResult>((r) => { resolveDone = r; });
    const session: Session = {
      spec, id: spec.session_id, order: this.order++, priority: task.dispatch_priority ?? 0, stage: 'queued', status: 'REGISTERED',
      abort: new AbortController(), end: null, runtimeSpec, adapter, evaluator: evaluator ?? null,
      needsDiff: evaluator?.needsDiff(task.evaluator?.config ?? {}, refresh) ?? false,
      runtime: null, evalRuntime: null, launch: null, toolDirs: [], proc: null, harness: null, harnessLog: null, deadlineTimer: null, deadlineAt: null, deadlineLeftMs: null, engineWaitSince: null, agentTimer: null,
      t: { dispatched: this.clock(), build: 0, eval: 0 }, result: null, done, resolveDone,
    };
    this.sessions.set(session.id, session);
    this.insertByPriority(session);
    this.emit(session);
    this.pump();
    return { session_id: session.id, status: session.status };
  }

  /**
   * Cancel a session at any stage: the running stage is aborted (harness process group killed), cleanup still runs,
   * and the final status is ERROR with error "cancelled". Returns false for unknown or finished sessions.
   */
  cancel(sessionId: string, reason?: string, opts: { interrupted?: boolean } = {}): boolean {
    const s = this.sessions.get(sessionId);
    if (!s || s.stage === 'done') return false;
    if (s.end?.kind === 'cancelled') return true;
    s.end = { kind: 'cancelled', ...(reason ? { reason } : {}), ...(opts.interrupted ? { interrupted: true } : {}) };
    s.abort.abort(new StageAborted('cancelled'));
    this.endWaiting(s);
    return true;
  }

  /**
   * A session's current view, or null when unknown. A session that left memory (keepFinishedSessions) has its result
   * read back from the store, unless `result: false` (its view then has `result: null`; the status and attempt are
   * its own either way).
   */
  get(sessionId: string, opts: { result?: boolean } = {}): SessionView | null {
    const s = this.sessions.get(sessionId);
    if (s) return this.viewOf(s);
    const gone = this.departed.get(sessionId);
    if (!gone) return null;
    return this.departedView(sessionId, gone, opts.result === false ? null : this.departedResult(sessionId, gone));
  }

  /**
   * The sessions the node knows that match `filter`, at most `filter.limit` (default all): first those in memory, in
   * dispatch order (so the running ones always fit in a page), then those that left memory (keepFinishedSessions),
   * most recently departed first, without their result (`get` reads it from the store). Listing departed ones keeps
   * the rollout server's reconcile adopting them instead of dispatching them again. Views are built only for the
   * entries returned.
   */
  list(filter: SessionListFilter = {}): SessionView[] {
    const limit = filter.limit ?? Infinity;
    const wanted = (v: { status: SessionStatus; task_id: string }) => (filter.status == null || v.status === filter.status) && (filter.taskId == null || v.task_id === filter.taskId);
    const out: SessionView[] = [];
    for (const s of this.sessions.values()) {
      if (out.length >= limit) return out;
      const view = this.viewOf(s);
      if (wanted(view)) out.push(view);
    }
    if (out.length >= limit || this.departed.size === 0) return out;
    const departed = [...this.departed.entries()];
    for (let i = departed.length - 1; i >= 0 && out.length < limit; i--) {
      const [id, gone] = departed[i]!;
      if (wanted(gone)) out.push(this.departedView(id, gone, null));
    }
    return out;
  }

  private viewOf(s: Session): SessionView {
    return {
      session_id: s.id, task_id: s.spec.task.task_id, sample_index: s.spec.sample_index, attempt: s.spec.attempt ?? 0,
      status: s.status, node_id: this.nodeId, error: s.result?.error ?? null, result: s.result,
    };
  }

  private departedView(sessionId: string, gone: DepartedSession, result: SessionResult | null): SessionView {
    const { departedAt: _departedAt, ...view } = gone;
    return { session_id: sessionId, ...view, node_id: this.nodeId, result };
  }

  /** A departed session's result, read back from the store: only its own attempt's (a later one may have replaced it). */
  private departedResult(sessionId: string, gone: DepartedSession): SessionResult | null {
    const result = this.opts.store.results.get(sessionId);
    return result !== null && (result.attempt ?? 0) === gone.attempt ? result : null;
  }

  /** Resolves with the SessionResult once the session finished. Throws Error for an unknown session. */
  wait(sessionId: string): Promise<SessionResult> {
    const s = this.sessions.get(sessionId);
    if (!s) {
      const gone = this.departed.get(sessionId);
      const result = gone ? this.departedResult(sessionId, gone) : null;
      if (result) return Promise.resolve(result);
      throw new Error(`unknown session ${sessionId}`);
    }
    return s.done;
  }

  /** How this node's sessions are contained by default (`GET /health` `sandbox`). */
  sandbox(): SandboxDescription {
    return describeSandbox(this.opts.runtimeDefaults ?? {});
  }

  /** Engine reachability for `GET /health`, or null when the node was given no health source. */
  engineHealth(): EngineHealth | null {
    return this.opts.engineHealth?.() ?? null;
  }

  engineBusyFraction(): number | null {
    return this.proxyMetrics?.busyFraction?.() ?? null;
  }

  /** Whether this node's proxy has inference paused (POST /admin/inference/pause) and since when; null without a proxy. */
  inferencePause(): { inference_paused: boolean; paused_since: number | null } | null {
    return this.proxyMetrics?.inferencePause?.() ?? null;
  }

  /** Prometheus exposition of the node's metrics and its proxy's. */
  metricsText(): Promise<{ text: string; contentType: string }> {
    return this.metrics.text(this.proxyMetrics ? [this.proxyMetrics.registry] : []);
  }

  /** The INIT pool and READY buffer in use now (differs from `capacity` only with `poolSizing: auto`). */
  poolSizes(): PoolSizes {
    return { ...this.pools };
  }

  /**
   * Sessions by stage, as `GET /health` and the heartbeat report them (the rollout server plans its dispatches with
   * them): every unfinished session is in exactly one count. One being re-checked after its `beforeSession` failed
   * counts as queued (it goes back there, or to POSTRUN); one offered to the rollout server counts in its stage.
   */
  stageCounts(): StageCounts {
    let offeredReady = 0;
    for (const s of this.handingBack) if (s.stage === 'ready') offeredReady++;
    return {
      queued: this.initQueue.length + this.rechecking.size + (this.handingBack.size - offeredReady),
      init: this.initing.size,
      ready: this.readyQueue.length + offeredReady,
      running: this.runningSet.size,
      postrun: this.postrunQueue.length + this.postrunning.size,
    };
  }

  /** Subscribe to finished sessions; returns the unsubscribe function. */
  onResult(cb: (result: SessionResult) => void): () => void {
    this.resultListeners.add(cb);
    return () => this.resultListeners.delete(cb);
  }

  /** Subscribe to state changes; returns the unsubscribe function. */
  onEvent(cb: (event: SessionEvent) => void): () => void {
    this.eventListeners.add(cb);
    return () => this.eventListeners.delete(cb);
  }

  // ── scheduling ────────────────────────────────────────────────────────────────────────────────────────────────

  /**
   * Into the INIT queue by dispatch priority: behind its priority peers (a new session, FIFO), or ahead of them
   * (`ahead`: one going back to the queue it had reached the front of).
   */
  private insertByPriority(s: Session, ahead = false): void {
    const at = this.initQueue.findIndex((x) => (ahead ? x.priority <= s.priority : x.priority < s.priority));
    if (at === -1) this.initQueue.push(s);
    else this.initQueue.splice(at, 0, s);
  }

  /**
   * Move sessions forward as capacity allows. INIT pulls only while the sessions in INIT and READY fit in READY's
   * bound plus the free RUNNING slots, so every session leaving INIT has a place and READY never exceeds its bound.
   */
  private pump(): void {
    const cap = this.capacity;
    const pools = this.pools;
    // The engine is down (or being checked after a failure): queued and READY sessions wait, running ones go on.
    const held = this.engineRecheck !== null || this.engineDown() !== null;
    if (!held) {
      if (this.engineWaitTimer) this.stopEngineWait();
      while (this.runningSet.size < cap.max_run_workers && this.readyQueue.length > 0) this.startRun(this.readyQueue.shift()!);
      while (
        this.initQueue.length > 0 &&
        this.initing.size < pools.init_workers &&
        this.initing.size + this.readyQueue.length < pools.ready_buffer + (cap.max_run_workers - this.runningSet.size)
      ) this.startInit(this.initQueue.shift()!);
    } else if (this.engineRecheck === null) {
      this.waitForEngine();
    }
    while (this.postrunQueue.length > 0 && this.postrunning.size < cap.postrun_workers) this.startPostrun(this.postrunQueue.shift()!);
  }

  /** Why the engine is down as last checked (`engineHealth`), or null when it is up or the node has no health source. */
  private engineDown(): string | null {
    const health = this.opts.engineHealth?.();
    return health && !health.ok ? (health.error ?? 'not reachable') : null;
  }

  /**
   * The engine is down: mark the queued and READY sessions as waiting (a READY one's total budget pauses) and read
   * `engineHealth` every `engineWaitPollMs` until it is up (then pump) or a session has waited `engineWaitMs` (it ends
   * ERROR, `engine down: …`).
   */
  private waitForEngine(): void {
    const now = this.clock();
    let marked = 0;
    for (const s of [...this.initQueue, ...this.readyQueue]) {
      if (s.engineWaitSince !== null) continue;
      s.engineWaitSince = now;
      marked++;
      if (s.stage === 'ready') this.pauseDeadline(s);
    }
    if (this.initQueue.length + this.readyQueue.length === 0) {
      if (this.engineWaitTimer) this.stopEngineWait();
      return;
    }
    if (this.engineWaitTimer) return;
    this.opts.log?.(`engine down (${this.engineDown() ?? 'being checked'}): ${marked} queued or READY session(s) wait for it, at most ${this.engineWaitMs / 1000} s each (gateway.engine_wait_s); running ones go on`);
    this.engineWaitTimer = setInterval(() => this.engineWaitTick(), this.opts.engineWaitPollMs ?? 1000);
    this.engineWaitTimer.unref?.();
  }

  private engineWaitTick(): void {
    if (this.engineRecheck !== null) return;
    const down = this.engineDown();
    if (down === null) {
      this.opts.log?.(`engine is back: starting the ${this.initQueue.length + this.readyQueue.length} session(s) that waited for it`);
      this.pump();
      return;
    }
    const now = this.clock();
    for (const s of [...this.initQueue, ...this.readyQueue]) {
      if (s.engineWaitSince === null || now - s.engineWaitSince < this.engineWaitMs || s.end !== null) continue;
      const waited = Math.round((now - s.engineWaitSince) / 100) / 10;
      s.end = { kind: 'error', error: `engine down: not started after waiting ${waited} s for the engine (gateway.engine_wait_s ${this.engineWaitMs / 1000}): ${down}` };
      this.endWaiting(s);
    }
    this.maybeHandBack(now, down);
  }

  /**
   * The engine is still down: offer the rollout server the waiting sessions that have waited `engineHandbackMs` and
   * whose harness never started (none captured a completion of this attempt), one request at a time. They leave their
   * queue while it answers; those it took back leave the node (`release`), the others return to their queue.
   */
  private maybeHandBack(now: number, down: string): void {
    const rollout = this.opts.rollout;
    const after = this.engineHandbackMs;
    if (!rollout || after === null || this.handbackInFlight !== null || this.draining || now < this.nextHandbackAt) return;
    const due = [...this.initQueue, ...this.readyQueue].filter((s) =>
      s.end === null && s.engineWaitSince !== null && now - s.engineWaitSince >= after && s.proc === null && !this.capturedAny(s)).slice(0, MAX_HANDBACK);
    if (due.length === 0) return;
    const offered = new Set(due);
    this.initQueue = this.initQueue.filter((x) => !offered.has(x));
    this.readyQueue = this.readyQueue.filter((x) => !offered.has(x));
    for (const s of due) this.handingBack.add(s);
    const since = due.reduce((min, s) => Math.min(min, s.engineWaitSince!), now);
    const waited = Math.round((now - since) / 100) / 10;
    const reason = `engine down for ${waited} s (gateway.engine_handback_s ${after / 1000}): ${down}`;
    const membership = { server: rollout.url, nodeId: this.nodeId, token: this.opts.controlPlaneToken, fetch: this.opts.fetch, log: this.opts.log };
    const job = handBack(membership, due.map((s) => s.id), reason).then((taken) => this.handbackAnswered(due, taken, reason));
    this.handbackInFlight = job;
    this.track(job);
  }

  /** Whether the session's current attempt captured a model call (then it started work: never handed back). */
  private capturedAny(s: Session): boolean {
    const attempt = s.spec.attempt ?? 0;
    return this.opts.store.completions.attemptCounts(s.id).some((c) => c.attempt === attempt && c.completions > 0);
  }

  /** The rollout server answered a handback (`taken`: the ids it queued again; null: it could not be asked). */
  private handbackAnswered(offered: Session[], taken: string[] | null, reason: string): void {
    this.handbackInFlight = null;
    const took = new Set(taken ?? []);
    const back: Session[] = [];
    let released = 0;
    for (const s of offered) {
      // Cancelled or interrupted meanwhile: endWaiting took it to POSTRUN (a result the server may take as stale).
      if (!this.handingBack.delete(s) || s.end !== null) continue;
      if (took.has(s.id)) {
        this.release(s, reason);
        released++;
      } else back.push(s);
    }
    if (released > 0) this.opts.log?.(`handed ${released} unstarted session(s) back to the rollout server: ${reason}`);
    if (back.length > 0 || taken === null) this.nextHandbackAt = this.clock() + HANDBACK_RETRY_MS;
    if (back.length > 0) this.returnToQueues(back);
  }

  /** Sessions the server did not take back: to the front of their queue, in order, still waiting for the engine. */
  private returnToQueues(back: Session[]): void {
    const ready = back.filter((s) => s.stage === 'ready');
    this.readyQueue.unshift(...ready);
    for (const s of back.filter((x) => x.stage !== 'ready').reverse()) this.insertByPriority(s, true);
    // The engine came back while the server answered: their wait ends here (stopEngineWait already ran).
    if (this.engineWaitTimer === null) {
      for (const s of back) {
        s.engineWaitSince = null;
        if (s.deadlineLeftMs !== null) this.armDeadline(s, s.deadlineLeftMs);
        s.deadlineLeftMs = null;
      }
    }
    this.pump();
  }

  /**
   * The rollout server took the session back: it leaves this node as if never dispatched here (no result, no record,
   * so a dispatch of it here again is accepted); a READY one's sandbox is torn down in the background. A `wait` on it
   * from before stays pending (the session ends on another node); `get` and `wait` from now on know it no more.
   */
  private release(s: Session, reason: string): void {
    this.clearTimers(s);
    this.sessions.delete(s.id);
    s.stage = 'done';
    s.abort.abort(new StageAborted('handed back'));
    if (s.runtime || s.evalRuntime) this.track(teardown(this.ctx, s));
    this.events.publish('session_handed_back', {
      session_id: s.id, task_id: s.spec.task.task_id, sample_index: s.spec.sample_index, attempt: s.spec.attempt ?? 0, node_id: this.nodeId, reason,
    });
  }

  /** The engine is up (or nothing waits): stop reading it, resume the paused budgets, clear the waits. */
  private stopEngineWait(): void {
    if (this.engineWaitTimer) clearInterval(this.engineWaitTimer);
    this.engineWaitTimer = null;
    for (const s of [...this.initQueue, ...this.readyQueue]) {
      s.engineWaitSince = null;
      if (s.deadlineLeftMs !== null && s.end === null) this.armDeadline(s, s.deadlineLeftMs);
      s.deadlineLeftMs = null;
    }
  }

  /**
   * A session's INIT or RUN ended in an error: check the engine before starting another session (pump holds while the
   * check runs), so an engine that died since its last periodic check fails one wave, not the queue.
   */
  private recheckEngine(): Promise<void> | null {
    const check = this.opts.checkEngine;
    if (!check || this.stopping.signal.aborted) return null;
    this.engineRecheck ??= check().then(() => {}, () => {}).finally(() => {
      this.engineRecheck = null;
      this.pump();
    });
    this.track(this.engineRecheck);
    return this.engineRecheck;
  }

  /** `poolSizing: auto`: record a finished INIT or RUN (clean ones only) and resize INIT and READY. */
  private observeStage(stage: 'init' | 'run', ms: number): void {
    if (!this.sizer) return;
    this.sizer.observe(stage, ms);
    this.pools = this.sizer.sizes();
  }

  private setStatus(s: Session, status: SessionStatus): void {
    if (s.status === status) return;
    s.status = status;
    this.emit(s);
  }

  private emit(s: Session): void {
    const event: SessionEvent = {
      session_id: s.id, task_id: s.spec.task.task_id, status: s.status, node_id: this.nodeId, sample_index: s.spec.sample_index,
      at: this.clock(), ...(s.result ? { error: s.result.error } : {}),
    };
    this.events.publish('session', event);
    for (const cb of this.eventListeners) {
      try { cb(event); } catch { /* a listener's failure must not stall the session */ }
    }
  }

  private toPostrun(s: Session): void {
    this.clearTimers(s);
    this.initing.delete(s);
    this.runningSet.delete(s);
    s.stage = 'postrun_queued';
    this.postrunQueue.push(s);
    this.setStatus(s, 'POST_RUN');
    this.pump();
  }

  private clearTimers(s: Session): void {
    if (s.deadlineTimer) clearTimeout(s.deadlineTimer);
    if (s.agentTimer) clearTimeout(s.agentTimer);
    s.deadlineTimer = s.agentTimer = null;
    s.deadlineLeftMs = null;
    s.engineWaitSince = null;
  }

  /** Stop the total budget's clock (a READY session waiting for the engine); `armDeadline` resumes it. */
  private pauseDeadline(s: Session): void {
    if (!s.deadlineTimer || s.deadlineAt === null) return;
    clearTimeout(s.deadlineTimer);
    s.deadlineTimer = null;
    s.deadlineLeftMs = Math.max(0, s.deadlineAt - this.clock());
  }

  /**
   * The total budget (timeout_seconds) runs from the start of INIT, `ms` of it left (all of it by default), except
   * while the session waits in READY for a down engine; it aborts whatever stage the session is in.
   */
  private armDeadline(s: Session, ms = s.spec.task.timeout_seconds * 1000): void {
    s.deadlineAt = this.clock() + ms;
    s.deadlineTimer = setTimeout(() => {
      if (s.end !== null || s.stage === 'done' || s.stage === 'postrun' || s.stage === 'postrun_queued') return;
      s.end = { kind: 'timeout', timeoutKind: 'total' };
      s.abort.abort(new StageAborted('timeout'));
      this.endWaiting(s);
    }, ms);
  }

  /**
   * A session that ended (its `end` set) while waiting in the queue or READY leaves it for POSTRUN; one in any other
   * stage is left to the stage it is in, which sees the end when it returns.
   */
  private endWaiting(s: Session): void {
    if (this.handingBack.delete(s)) {
      // Offered to the rollout server and ended meanwhile (cancel, stop): POSTRUN reports it as usual.
    } else if (s.stage === 'queued') this.initQueue = this.initQueue.filter((x) => x !== s);
    else if (s.stage === 'ready') this.readyQueue = this.readyQueue.filter((x) => x !== s);
    else return;
    this.toPostrun(s);
  }

  private startInit(s: Session): void {
    s.stage = 'init';
    this.initing.add(s);
    s.t.initStart = this.clock();
    this.setStatus(s, 'INITIALIZING');
    this.armDeadline(s);
    const job = initSession(this.ctx, s).then(
      () => {
        s.t.initEnd = this.clock();
        this.initing.delete(s);
        if (s.end !== null) return this.toPostrun(s);
        this.observeStage('init', s.t.initEnd - s.t.initStart!);
        s.stage = 'ready';
        this.readyQueue.push(s);
        this.setStatus(s, 'READY');
        this.pump();
      },
      (error: unknown) => {
        s.t.initEnd = this.clock();
        const recheck = s.end === null ? this.recheckEngine() : null;
        if (recheck && error instanceof BeforeSessionFailed) {
          // Nothing of the session started yet: if the engine turns out to be down, the session waits in the queue.
          this.initing.delete(s);
          this.clearTimers(s);
          this.rechecking.add(s);
          void recheck.then(() => {
            this.rechecking.delete(s);
            if (s.end === null && this.engineDown() !== null && !this.draining) return this.requeue(s);
            s.end ??= { kind: 'error', error: `init failed: ${errorText(error)}` };
            this.toPostrun(s);
          });
          return;
        }
        if (s.end === null) s.end = { kind: 'error', error: `init failed: ${errorText(error)}` };
        this.toPostrun(s);
      },
    );
    this.track(job);
  }

  /** Back to the queue, ahead of its priority peers (its `beforeSession` failed while the engine was down). */
  private requeue(s: Session): void {
    s.stage = 'queued';
    this.insertByPriority(s, true);
    this.setStatus(s, 'REGISTERED');
    this.pump();
  }

  private gatewaySocket: GatewaySocket | null = null;

  /** The node as a sandbox reaches it: the port of the harnesses' base URL, tunnelled to the node's Unix socket. */
  private gatewayEndpoint(): GatewayEndpoint | null {
    if (!this.gatewaySocket) return null;
    return { port: Number(new URL(this.gatewayUrl()).port || 80), socket: this.gatewaySocket.path };
  }

  private gatewayUrl(): string {
    return (this.gatewayUrlValue ?? `http://${this.opts.host ?? '127.0.0.1'}:${this.opts.port ?? 0}`).replace(/\/+$/, '');
  }

  private startRun(s: Session): void {
    s.stage = 'running';
    this.runningSet.add(s);
    s.t.runStart = this.clock();
    this.setStatus(s, 'RUNNING');
    const agentTimeout = s.spec.task.metadata?.agent_timeout;
    if (typeof agentTimeout === 'number' && agentTimeout > 0) {
      s.agentTimer = setTimeout(() => {
        if (s.end !== null || s.stage !== 'running') return;
        s.end = { kind: 'timeout', timeoutKind: 'agent' };
        s.abort.abort(new StageAborted('agent timeout'));
      }, agentTimeout * 1000);
    }
    if (s.spec.task.evaluator?.refresh_runtime) {
      s.evalRuntime = prepareFreshRuntime(this.ctx, s);
      s.evalRuntime.catch(() => {}); // reported when the evaluator asks for it
    }
    const job = runHarness(this.ctx, s).then(
      () => {
        s.t.runEnd = this.clock();
        if (s.end === null) this.observeStage('run', s.t.runEnd - s.t.runStart!);
        if (s.end?.kind === 'error') this.recheckEngine();
        this.toPostrun(s);
      },
      (error: unknown) => {
        s.t.runEnd = this.clock();
        if (s.end === null) s.end = { kind: 'error', error: `run failed: ${errorText(error)}` };
        if (s.end.kind === 'error') this.recheckEngine();
        this.toPostrun(s);
      },
    );
    this.track(job);
  }

  private startPostrun(s: Session): void {
    s.stage = 'postrun';
    this.postrunning.add(s);
    s.t.postrunStart = this.clock();
    const job = postrun(this.ctx, s)
      .catch((error: unknown) => this.opts.log?.(`postrun of ${s.id} failed unexpectedly: ${errorText(error)}`))
      .finally(() => {
        this.postrunning.delete(s);
        this.pump();
      });
    this.track(job);
  }

  /** A session's result is out (postrun): once stored and delivered it may leave memory, oldest first. */
  private finished(s: Session, stored: boolean, delivery: Promise<boolean> | null): void {
    if (!stored) return; // only in memory: kept whole
    if (delivery === null) this.mayEvict(s);
    else void delivery.then((delivered) => delivered && this.mayEvict(s));
  }

  private mayEvict(s: Session): void {
    this.evictable.add(s.id);
    for (const id of this.evictable) {
      if (this.evictable.size <= this.keepFinished) break;
      this.evictable.delete(id);
      const gone = this.sessions.get(id);
      if (!gone || gone.stage !== 'done') continue;
      this.sessions.delete(id);
      this.departed.set(id, {
        task_id: gone.spec.task.task_id, sample_index: gone.spec.sample_index, attempt: gone.spec.attempt ?? 0,
        status: gone.status, error: gone.result?.error ?? null, departedAt: this.clock(),
      });
    }
  }

  /** The heartbeat's session statuses: every session in memory, and those that left it in the last 10 minutes. */
  private heartbeatStatuses(): Record<string, SessionStatus> {
    const out: Record<string, SessionStatus> = {};
    const since = this.clock() - DEPARTED_HEARTBEAT_MS;
    for (const [id, gone] of this.departed.entries()) if (gone.departedAt >= since) out[id] = gone.status;
    for (const x of this.sessions.values()) out[x.id] = x.status;
    return out;
  }

  private track(p: Promise<unknown>): void {
    this.background.add(p);
    void p.finally(() => this.background.delete(p));
  }

}

/** Each task's sampling, read once (the proxy resolves a session on every model call); null when it sets none. */
const samplingByTask = new WeakMap<object, TaskSampling | null>();
function taskSamplingCached(task: DispatchSpec['task']): TaskSampling | null {
  let sampling = samplingByTask.get(task);
  if (sampling === undefined) {
    // A dispatched task passed runnableProblems, which reads the same settings: this does not throw.
    sampling = taskSamplingOf(task.agent.settings);
    samplingByTask.set(task, sampling);
  }
  return sampling;
}
