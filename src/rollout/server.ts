/**
 * The rollout server (ARCHITECTURE.md §6): TaskRequests in, num_samples sessions dispatched to gateway nodes by stage
 * pressure, idempotent session results back, evaluated groups with GRPO and leave-one-out advantages out to a trainer.
 * Polar-compatible endpoints (NVIDIA-NeMo/ProRL-Agent-Server `src/polar`), on Bun.serve `routes`.
 * Every state change is written to SQLite before it is acknowledged, so a kill -9 loses nothing: on restart the server
 * asks each node about the sessions it had dispatched and re-dispatches the ones no node knows.
 */
import { timingSafeEqual as bytesEqual } from 'node:crypto';
import type { Clock } from '../core/clock.ts';
import { systemClock } from '../core/clock.ts';
import { newSessionSecret } from '../core/ids.ts';
import type { SessionResult, TaskRequest } from '../core/records.ts';
import { EventHub } from '../observe/events.ts';
import { createRolloutMetrics, type RolloutMetrics } from '../observe/metrics.ts';
import { grpoAdvantages, leaveOneOutAdvantages, type GrpoStd } from '../trace/advantages.ts';
import { httpNodeClient, type NodeClient } from './node-client.ts';
import { pickNode, type SchedulableNode } from './scheduler.ts';
import { formatIssues, heartbeatSchema, LIVE_SESSION_STATUSES, nodeRegistrationSchema, parseSessionResult, parseTaskRequest, type StageCounts } from './schemas.ts';
import { groupFromRow, putGroup, type GroupRecord, type GroupTrajectory, type NodeRow, type RolloutStore, type SessionRow, type TaskCallbackRow } from './store-port.ts';

/** Statuses after which a session never changes again (rollout-side CANCELLED included). */
const FINAL_SESSION = new Set(['COMPLETED', 'ERROR', 'TIMEOUT', 'CANCELLED']);
const ACTIVE_TASK = 'RUNNING';
const LIVE_SESSION = new Set<string>(LIVE_SESSION_STATUSES);
const NO_STAGES: StageCounts = { init: 0, ready: 0, running: 0, postrun: 0, queued: 0 };

/** A group as the trainer API serves it; `trajectories` only when asked for (`include=trajectories`). */
export type ServedGroup = GroupRecord & { acked_at: number | null; grpo_std: GrpoStd; trajectories?: GroupTrajectory[] };

export interface RolloutServerOptions {
  store: RolloutStore;
  host?: string;
  /** 0 picks a free port (default). */
  port?: number;
  /** Bearer token required on every call except /health and /metrics; null/undefined disables the check. */
  controlPlaneToken?: string | null;
  /** A node without a heartbeat for this long is unhealthy and its sessions are re-dispatched (ms, default 30 000). */
  heartbeatTimeoutMs?: number;
  /** How often timers run (heartbeat check, dispatch retry, trainer callbacks), ms (default 500). */
  tickMs?: number;
  /** Retries of a trainer callback before it is marked failed (default 5). */
  callbackRetries?: number;
  /** URL nodes use to reach this server; default http://host:port once listening. */
  publicUrl?: string;
  clock?: Clock;
  /** Builds the client for a node URL; default HTTP with the control-plane token. */
  nodeClient?: (url: string) => NodeClient;
  fetch?: typeof fetch;
  /** Extra fields for `GET /health` (`polar serve` adds `engine: {ok, error}`). */
  health?: () => Record<string, unknown>;
}

/** Thrown by request handlers; rendered as `{error}` with this HTTP status. */
class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

interface NodeState {
  row: NodeRow;
  client: NodeClient;
  dispatchedSinceHeartbeat: number;
}

/** A rollout server usable in-process (`start()`/`stop()`) or behind `polar rollout` / `polar serve`. */
export class RolloutServer {
  readonly store: RolloutStore;
  readonly events: EventHub;
  readonly metrics: RolloutMetrics;
  readonly #opts: Required<Pick<RolloutServerOptions, 'host' | 'port' | 'heartbeatTimeoutMs' | 'tickMs' | 'callbackRetries'>>;
  readonly #token: string | null;
  readonly #clock: Clock;
  readonly #makeClient: (url: string) => NodeClient;
  readonly #fetch: typeof fetch;
  readonly #healthExtra: (() => Record<string, unknown>) | undefined;
  #server: ReturnType<typeof Bun.serve> | null = null;
  #publicUrl: string | null;
  #timer: ReturnType<typeof setInterval> | null = null;
  #nodes = new Map<string, NodeState>();
  /** node_id → session ids dispatched there and not final. */
  #inFlight = new Map<string, Set<string>>();
  #pumping: Promise<void> | null = null;
  #pumpAgain = false;
  #callbacksInFlight = new Set<string>();
  /** Trainer callback deliveries in progress; stop() aborts and awaits them so none writes to a closed store. */
  #callbackJobs = new Set<Promise<void>>();
  #stopCallbacks = new AbortController();
  #callbackNextTry = new Map<string, number>();
  #stopped = false;

  constructor(options: RolloutServerOptions) {
    this.store = options.store;
    this.#clock = options.clock ?? systemClock;
    this.#token = options.controlPlaneToken ?? null;
    this.#fetch = options.fetch ?? fetch;
    this.#healthExtra = options.health;
    this.#opts = {
      host: options.host ?? '127.0.0.1',
      port: options.port ?? 0,
      heartbeatTimeoutMs: options.heartbeatTimeoutMs ?? 30_000,
      tickMs: options.tickMs ?? 500,
      callbackRetries: options.callbackRetries ?? 5,
    };
    this.#publicUrl = options.publicUrl ?? null;
    this.#makeClient = options.nodeClient ?? ((url) => httpNodeClient(url, { controlPlaneToken: this.#token, fetch: this.#fetch }));
    this.events = new EventHub(this.#clock);
    this.metrics = createRolloutMetrics();
    this.#loadState();
  }

  /** Base URL of the listening server (throws before start()). */
  get url(): string {
    if (!this.#server) throw new Error('rollout server not started');
    return `http://${this.#opts.host}:${this.#server.port}`;
  }

  /** URL gateway nodes post session results to. */
  get callbackUrl(): string {
    return `${this.#publicUrl ?? this.url}/callbacks/session_result`;
  }

  /** Listen, start the timers and resume any work found in the store. */
  start(): this {
    if (this.#server) return this;
    this.#stopped = false;
    this.#stopCallbacks = new AbortController();
    this.#server = Bun.serve({
      hostname: this.#opts.host,
      port: this.#opts.port,
      idleTimeout: 0,
      routes: this.#routes(),
      fetch: () => json({ error: 'not found' }, 404),
      error: (error) => json({ error: error.message }, 500),
    });
    this.#timer = setInterval(() => void this.tick(), this.#opts.tickMs);
    void this.#resume();
    return this;
  }

  /**
   * Stop listening and the timers; in-flight node calls are left to finish. Trainer callbacks in flight are aborted
   * and stay pending in the store, so the next start delivers them.
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    this.#stopCallbacks.abort();
    await this.#server?.stop(true);
    this.#server = null;
    await this.#pumping;
    await Promise.allSettled([...this.#callbackJobs]);
  }

  // ---------------------------------------------------------------------------------------------- task intake

  /**
   * Accept a TaskRequest: persist it and its num_samples sessions (ids from newSessionSecret), then dispatch.
   * Re-submitting a task_id that exists returns its current status and creates nothing.
   * @throws Error (→ 400) on an invalid TaskRequest.
   */
  submit(input: unknown): { task_id: string; status: string; sessions: number } {
    const task = parseTaskRequest(input);
    const existing = this.store.tasks.get(task.task_id);
    if (existing) return { task_id: task.task_id, status: existing.status, sessions: this.store.sessions.listByTask(task.task_id).length };
    this.store.transaction(() => {
      this.store.tasks.upsert(task, ACTIVE_TASK);
      for (let i = 0; i < task.num_samples; i++) {
        this.store.sessions.insert({ session_id: newSessionSecret(), task_id: task.task_id, sample_index: i, status: 'REGISTERED', node_id: null, attempt: 0 });
      }
    });
    this.metrics.tasksSubmitted.inc();
    this.events.publish('task_submitted', { task_id: task.task_id, num_samples: task.num_samples });
    this.pump();
    return { task_id: task.task_id, status: ACTIVE_TASK, sessions: task.num_samples };
  }

  /** Task status with per-session status, reward and node; null for an unknown task. */
  taskStatus(taskId: string) {
    const row = this.store.tasks.get(taskId);
    if (!row) return null;
    const results = new Map(this.store.results.listByTask(taskId).map((r) => [r.session_id, r]));
    const sessions = this.store.sessions.listByTask(taskId).map((s) => {
      const result = results.get(s.session_id);
      return { session_id: s.session_id, sample_index: s.sample_index, status: s.status, node_id: s.node_id, attempt: s.attempt, reward: result ? rewardOf(result) : null, error: result?.error ?? null };
    });
    const groupRow = this.store.groups.get(taskId);
    const group = groupRow ? groupFromRow(groupRow) : null;
    return { task_id: taskId, status: row.status, num_samples: row.task.num_samples, created_at: row.created_at, updated_at: row.updated_at, sessions, results: results.size, group };
  }

  /** Cancel a task: unfinished sessions are cancelled on their nodes; the trainer callback reports CANCELLED. */
  async cancelTask(taskId: string): Promise<{ task_id: string; status: string; cancelled: number }> {
    const row = this.store.tasks.get(taskId);
    if (!row) throw new HttpError(404, `unknown task ${taskId}`);
    if (row.status !== ACTIVE_TASK) return { task_id: taskId, status: row.status, cancelled: 0 };
    const cancelled = await this.#cancelSessions(this.store.sessions.listByTask(taskId).filter((s) => !FINAL_SESSION.has(s.status)));
    this.store.transaction(() => {
      this.store.tasks.setStatus(taskId, 'CANCELLED');
      this.#queueCallback(taskId);
    });
    this.events.publish('task_finished', { task_id: taskId, status: 'CANCELLED' });
    void this.#deliverCallbacks();
    return { task_id: taskId, status: 'CANCELLED', cancelled };
  }

  /** Counts of tasks, sessions and nodes by state. */
  status() {
    const tasks: Record<string, number> = {};
    for (const t of this.store.tasks.list()) tasks[t.status] = (tasks[t.status] ?? 0) + 1;
    const sessions: Record<string, number> = {};
    for (const t of this.store.tasks.list()) for (const s of this.store.sessions.listByTask(t.task.task_id)) sessions[s.status] = (sessions[s.status] ?? 0) + 1;
    return { tasks, sessions, nodes: this.listNodes(), groups_ready: this.store.groups.listReady().length };
  }

  // ---------------------------------------------------------------------------------------------- nodes

  /** Register (or re-register) a node; sessions it had but no longer knows are re-dispatched. */
  registerNode(input: unknown): NodeRow {
    const parsed = nodeRegistrationSchema.safeParse(input);
    if (!parsed.success) throw new HttpError(400, `invalid registration: ${formatIssues(parsed.error)}`);
    const now = this.#clock();
    const previous = this.#nodes.get(parsed.data.node_id)?.row;
    const row: NodeRow = {
      ...parsed.data,
      stages: previous?.stages ?? { init: 0, ready: 0, running: 0, postrun: 0, queued: 0 },
      healthy: true,
      draining: false,
      last_heartbeat: now,
      registered_at: now,
    };
    this.store.nodes.upsert(row);
    this.#nodes.set(row.node_id, { row, client: this.#makeClient(row.url), dispatchedSinceHeartbeat: 0 });
    this.events.publish('node_registered', { node_id: row.node_id, url: row.url });
    if (previous) void this.#reconcileNode(row.node_id);
    this.pump();
    return row;
  }

  /** Record a heartbeat's stage counts; an unhealthy node becomes healthy again. @throws HttpError 404 for an unknown node. */
  heartbeat(nodeId: string, input: unknown): NodeRow {
    const state = this.#nodes.get(nodeId);
    if (!state) throw new HttpError(404, `unknown node ${nodeId}: register first`);
    const parsed = heartbeatSchema.safeParse(input);
    if (!parsed.success) throw new HttpError(400, `invalid heartbeat: ${formatIssues(parsed.error)}`);
    const recovered = !state.row.healthy;
    state.row = { ...state.row, stages: parsed.data.stages, healthy: true, last_heartbeat: this.#clock() };
    state.dispatchedSinceHeartbeat = 0;
    this.store.transaction(() => {
      this.store.nodes.upsert(state.row);
      if (parsed.data.sessions) this.#refreshSessionStages(nodeId, parsed.data.sessions);
    });
    if (recovered) this.events.publish('node_healthy', { node_id: nodeId });
    this.pump();
    return state.row;
  }

  /**
   * Take a node's view of the sessions it runs (RUNNING, POST_RUN, …) into the store, for `GET /rollout/task/{id}`.
   * Only sessions this server dispatched to that node and still has open move; final statuses come with results.
   */
  #refreshSessionStages(nodeId: string, statuses: Record<string, string>): void {
    const mine = this.#inFlight.get(nodeId);
    if (!mine) return;
    for (const [sessionId, status] of Object.entries(statuses)) {
      if (!LIVE_SESSION.has(status) || !mine.has(sessionId)) continue;
      const current = this.store.sessions.get(sessionId);
      if (!current || current.node_id !== nodeId || FINAL_SESSION.has(current.status) || current.status === status) continue;
      this.store.sessions.update(sessionId, { status });
    }
  }

  /** Drain a node: it gets no new sessions; the ones it runs finish. @throws HttpError 404 for an unknown node. */
  drainNode(nodeId: string): { node_id: string; draining: true; in_flight: number } {
    const state = this.#nodes.get(nodeId);
    if (!state) throw new HttpError(404, `unknown node ${nodeId}`);
    state.row = { ...state.row, draining: true };
    this.store.nodes.upsert(state.row);
    this.events.publish('node_draining', { node_id: nodeId });
    return { node_id: nodeId, draining: true, in_flight: this.#inFlight.get(nodeId)?.size ?? 0 };
  }

  /**
   * Every known node with its in-flight count and heartbeat age (ms). An unhealthy node's `stages` are zeros with
   * `stages_stale: true`; what it last reported stays in `last_reported_stages`.
   */
  listNodes() {
    const now = this.#clock();
    return [...this.#nodes.values()].map(({ row }) => ({
      ...row,
      stages: row.healthy ? row.stages : { ...NO_STAGES },
      stages_stale: !row.healthy,
      last_reported_stages: row.stages,
      in_flight: this.#inFlight.get(row.node_id)?.size ?? 0,
      heartbeat_age_ms: now - row.last_heartbeat,
    }));
  }

  // ---------------------------------------------------------------------------------------------- results

  /**
   * Store a session's result, once: a second result for the same session is acknowledged and ignored.
   * Finishes the task (group + advantages + trainer callback) when its last session ends, or early at
   * early_stop_min_usable_sessions usable results.
   * @throws HttpError 400 on an invalid result, 404 for an unknown session, 409 when task_id does not match.
   */
  async acceptResult(input: unknown): Promise<{ session_id: string; accepted: boolean; duplicate: boolean }> {
    let result: SessionResult;
    try {
      result = parseSessionResult(input);
    } catch (error) {
      throw new HttpError(400, (error as Error).message);
    }
    const session = this.store.sessions.get(result.session_id);
    if (!session) throw new HttpError(404, 'unknown session');
    if (session.task_id !== result.task_id) throw new HttpError(409, `session belongs to task ${session.task_id}, not ${result.task_id}`);
    // A gateway sharing this store (`polar serve`, `polar run`, one db file for every process) has already put the
    // result when its callback arrives, so "new" means: the session is not final yet, whoever stored the row.
    const stored = this.store.transaction(() => {
      const current = this.store.sessions.get(session.session_id);
      // A session this server cancelled (task cancel, early stop) reports ERROR "cancelled": keep it as CANCELLED so
      // groups, exports and task status never count it as a failure. A sample that completed first stays COMPLETED.
      const cancelled = current?.status === 'CANCELLED' && result.status !== 'COMPLETED';
      const fresh = this.store.results.put(cancelled ? { ...result, status: 'CANCELLED' } : result);
      if (cancelled && !fresh) this.store.results.setStatus(session.session_id, 'CANCELLED', ['ERROR', 'TIMEOUT']);
      if (!current || FINAL_SESSION.has(current.status)) return false;
      const kept = fresh ? result : (this.store.results.get(session.session_id) ?? result);
      this.store.sessions.update(session.session_id, { status: kept.status });
      return true;
    });
    if (!stored) {
      this.metrics.duplicateResults.inc();
      return { session_id: result.session_id, accepted: false, duplicate: true };
    }
    this.metrics.sessionResults.inc({ status: result.status });
    for (const [nodeId, set] of this.#inFlight) if (set.delete(session.session_id) && nodeId !== result.node_id) void this.#cancelOn(nodeId, session.session_id);
    this.events.publish('session_result', { session_id: session.session_id, task_id: session.task_id, status: result.status, reward: rewardOf(result), node_id: result.node_id });
    await this.#checkTask(session.task_id);
    this.pump();
    return { session_id: result.session_id, accepted: true, duplicate: false };
  }

  // ---------------------------------------------------------------------------------------------- trainer API

  /**
   * Evaluated groups not yet acknowledged, oldest first; one per task.
   * @param opts.std GRPO std for `grpo_advantages` (default population, as stored); opts.trajectories adds each group's
   *   GroupTrajectory list (full token data; large).
   */
  readyGroups(opts: { std?: GrpoStd; trajectories?: boolean } = {}): ServedGroup[] {
    return this.store.groups.listReady().map((row) => this.#serveGroup(groupFromRow(row), opts));
  }

  /**
   * The usable sessions of a task's evaluated group with their stored SessionResults (token ids, loss masks, logprobs)
   * and per-session GRPO and leave-one-out advantages, in sample order; acknowledged groups too. Null when the task has
   * no evaluated group.
   */
  groupTrajectories(taskId: string, opts: { std?: GrpoStd } = {}): ServedGroup & { trajectories: GroupTrajectory[] } | null {
    const row = this.store.groups.get(taskId);
    if (!row) return null;
    return this.#serveGroup(groupFromRow(row), { ...opts, trajectories: true }) as ServedGroup & { trajectories: GroupTrajectory[] };
  }

  #serveGroup(group: GroupRecord & { acked_at: number | null }, opts: { std?: GrpoStd; trajectories?: boolean }): ServedGroup {
    const std = opts.std ?? 'population';
    const served: ServedGroup = { ...group, grpo_std: std };
    if (std !== 'population') served.grpo_advantages = grpoAdvantages(group.rewards, undefined, std);
    if (!opts.trajectories) return served;
    const results = new Map(this.store.results.listByTask(group.task_id).map((r) => [r.session_id, r]));
    served.trajectories = group.sessions.flatMap((s, i) => {
      const result = results.get(s.session_id);
      if (!result) return [];
      return [{ ...result, sample_index: s.sample_index, reward: s.reward, grpo_advantage: served.grpo_advantages[i] ?? 0, loo_advantage: group.loo_advantages[i] ?? 0 }];
    });
    return served;
  }

  /**
   * Acknowledge the group of a task so it is never served again. Groups are per task, so the key is the task_id, not
   * the group_id label (which tasks may share).
   * @returns false when it was already acknowledged or is unknown.
   */
  ackGroup(taskId: string): boolean {
    const acked = this.store.groups.ack(taskId);
    if (acked) this.events.publish('group_acked', { task_id: taskId, group_id: this.store.groups.get(taskId)?.group_id ?? taskId });
    return acked;
  }

  // ---------------------------------------------------------------------------------------------- scheduling

  /** Dispatch queued sessions to nodes. Calls coalesce: at most one pass runs at a time, and one more follows. */
  pump(): Promise<void> {
    if (this.#pumping) {
      this.#pumpAgain = true;
      return this.#pumping;
    }
    this.#pumping = (async () => {
      try {
        do {
          this.#pumpAgain = false;
          await this.#dispatchPass();
        } while (this.#pumpAgain && !this.#stopped);
      } finally {
        this.#pumping = null;
      }
    })();
    return this.#pumping;
  }

  /** One timer step: heartbeat timeouts, dispatch, trainer callbacks. Public so tests can drive it with a fake clock. */
  async tick(): Promise<void> {
    const now = this.#clock();
    for (const state of this.#nodes.values()) {
      if (state.row.healthy && now - state.row.last_heartbeat > this.#opts.heartbeatTimeoutMs) this.#markUnhealthy(state, 'heartbeat timeout');
    }
    this.#updateGauges();
    await Promise.all([this.pump(), this.#deliverCallbacks()]);
  }

  async #dispatchPass(): Promise<void> {
    const queued = this.store.sessions.listByStatus('REGISTERED');
    if (queued.length === 0 || this.#nodes.size === 0) return;
    const priority = new Map<string, number>();
    const taskOf = new Map<string, TaskRequest>();
    for (const s of queued) {
      if (taskOf.has(s.task_id)) continue;
      const row = this.store.tasks.get(s.task_id);
      if (row) {
        taskOf.set(s.task_id, row.task);
        priority.set(s.task_id, row.task.dispatch_priority ?? 0);
      }
    }
    queued.sort((a, b) => (priority.get(b.task_id) ?? 0) - (priority.get(a.task_id) ?? 0));
    const nodes = [...this.#nodes.values()];
    const view = (s: NodeState): SchedulableNode & { state: NodeState } => ({
      node_id: s.row.node_id,
      healthy: s.row.healthy,
      draining: s.row.draining,
      capacity: s.row.capacity,
      stages: s.row.stages,
      in_flight: this.#inFlight.get(s.row.node_id)?.size ?? 0,
      dispatched_since_heartbeat: s.dispatchedSinceHeartbeat,
      state: s,
    });
    const sends: Promise<void>[] = [];
    for (const session of queued) {
      const task = taskOf.get(session.task_id);
      if (!task) continue;
      const target = pickNode(nodes.map(view));
      if (!target) break;
      const attempt = session.attempt;
      this.store.sessions.update(session.session_id, { status: 'INITIALIZING', node_id: target.node_id, attempt });
      this.#track(target.node_id, session.session_id);
      target.state.dispatchedSinceHeartbeat++;
      sends.push(this.#send(target.state, session, task, attempt));
    }
    await Promise.all(sends);
  }

  async #send(state: NodeState, session: SessionRow, task: TaskRequest, attempt: number): Promise<void> {
    try {
      await state.client.dispatch({ session_id: session.session_id, task: withoutCallbackToken(task), sample_index: session.sample_index, callback_url: this.callbackUrl, attempt });
      this.metrics.sessionsDispatched.inc();
      this.events.publish('session_dispatched', { session_id: session.session_id, task_id: session.task_id, node_id: state.row.node_id, attempt });
    } catch (error) {
      // The node may be down: take it out of rotation until its next heartbeat, and put the session back in the queue.
      this.#untrack(state.row.node_id, session.session_id);
      const current = this.store.sessions.get(session.session_id);
      if (current && current.status === 'INITIALIZING' && current.node_id === state.row.node_id) {
        this.store.sessions.update(session.session_id, { status: 'REGISTERED', node_id: null });
      }
      if (state.row.healthy) this.#markUnhealthy(state, `dispatch failed: ${(error as Error).message}`);
    }
  }

  #markUnhealthy(state: NodeState, reason: string): void {
    state.row = { ...state.row, healthy: false };
    this.store.nodes.upsert(state.row);
    this.events.publish('node_unhealthy', { node_id: state.row.node_id, reason });
    const sessions = [...(this.#inFlight.get(state.row.node_id) ?? [])];
    for (const id of sessions) {
      this.#requeue(id, state.row.node_id);
      // Best effort: a partitioned node that is still alive should stop working on the session.
      void this.#cancelOn(state.row.node_id, id);
    }
  }

  /** Put a dispatched, unfinished session back in the queue with attempt + 1. */
  #requeue(sessionId: string, nodeId: string): void {
    this.#untrack(nodeId, sessionId);
    const s = this.store.sessions.get(sessionId);
    if (!s || FINAL_SESSION.has(s.status) || s.node_id !== nodeId) return;
    this.store.sessions.update(sessionId, { status: 'REGISTERED', node_id: null, attempt: s.attempt + 1 });
    this.metrics.sessionsRedispatched.inc();
    this.events.publish('session_requeued', { session_id: sessionId, task_id: s.task_id, from_node: nodeId, attempt: s.attempt + 1 });
  }

  /** Ask a node about every session this server thinks it runs; re-queue the ones it does not know. */
  async #reconcileNode(nodeId: string): Promise<void> {
    const state = this.#nodes.get(nodeId);
    if (!state) return;
    const ids = [...(this.#inFlight.get(nodeId) ?? [])];
    let changed = false;
    await Promise.all(
      ids.map(async (id) => {
        try {
          if ((await state.client.getSession(id)) === null) {
            this.#requeue(id, nodeId);
            changed = true;
          }
        } catch {
          // Unreachable now: the heartbeat timeout decides.
        }
      }),
    );
    if (changed) this.pump();
  }

  #track(nodeId: string, sessionId: string): void {
    let set = this.#inFlight.get(nodeId);
    if (!set) this.#inFlight.set(nodeId, (set = new Set()));
    set.add(sessionId);
  }

  #untrack(nodeId: string, sessionId: string): void {
    this.#inFlight.get(nodeId)?.delete(sessionId);
  }

  async #cancelOn(nodeId: string, sessionId: string): Promise<void> {
    try {
      await this.#nodes.get(nodeId)?.client.cancel(sessionId);
    } catch {
      // The node is gone or refuses; its late result would be ignored anyway.
    }
  }

  async #cancelSessions(sessions: SessionRow[]): Promise<number> {
    for (const s of sessions) this.store.sessions.update(s.session_id, { status: 'CANCELLED' });
    await Promise.all(
      sessions.map(async (s) => {
        if (!s.node_id) return;
        this.#untrack(s.node_id, s.session_id);
        await this.#cancelOn(s.node_id, s.session_id);
      }),
    );
    return sessions.length;
  }

  // ---------------------------------------------------------------------------------------------- task completion

  async #checkTask(taskId: string): Promise<void> {
    const row = this.store.tasks.get(taskId);
    if (!row || row.status !== ACTIVE_TASK) return;
    const sessions = this.store.sessions.listByTask(taskId);
    const results = this.store.results.listByTask(taskId);
    const usable = results.filter(isUsable).length;
    const minUsable = row.task.early_stop_min_usable_sessions;
    let earlyStopped = false;
    const open = sessions.filter((s) => !FINAL_SESSION.has(s.status));
    if (minUsable !== undefined && usable >= minUsable && open.length > 0) {
      earlyStopped = true;
      await this.#cancelSessions(open);
    } else if (open.length > 0) return;
    const group = buildGroup(row.task, sessions, results, earlyStopped, this.#clock());
    const finished = this.store.transaction(() => {
      const again = this.store.tasks.get(taskId);
      if (!again || again.status !== ACTIVE_TASK) return false;
      putGroup(this.store, group);
      this.store.tasks.setStatus(taskId, 'COMPLETED');
      this.#queueCallback(taskId);
      return true;
    });
    if (!finished) return;
    this.events.publish('task_finished', { task_id: taskId, status: 'COMPLETED', early_stopped: earlyStopped });
    this.events.publish('group_ready', group);
    void this.#deliverCallbacks();
  }

  #queueCallback(taskId: string): void {
    const task = this.store.tasks.get(taskId)?.task;
    if (!task?.callback_url || this.store.taskCallbacks.get(taskId)) return;
    this.store.taskCallbacks.upsert({ task_id: taskId, state: 'pending', attempts: 0, last_error: null, updated_at: this.#clock() });
  }

  /**
   * POST `{task_id, status, group}` to each pending trainer callback_url. Delivery is at-least-once: the state is
   * persisted as `done` right after a 2xx, so only a crash in between can repeat a call (the body names the task).
   */
  async #deliverCallbacks(): Promise<void> {
    const now = this.#clock();
    const pending = this.store.taskCallbacks.listByState('pending').filter((c) => !this.#callbacksInFlight.has(c.task_id) && (this.#callbackNextTry.get(c.task_id) ?? 0) <= now);
    if (this.#stopped) return;
    await Promise.all(
      pending.map((c) => {
        const job = this.#deliverOne(c).finally(() => this.#callbackJobs.delete(job));
        this.#callbackJobs.add(job);
        return job;
      }),
    );
  }

  async #deliverOne(cb: TaskCallbackRow): Promise<void> {
    const row = this.store.tasks.get(cb.task_id);
    if (!row?.task.callback_url) return;
    this.#callbacksInFlight.add(cb.task_id);
    try {
      // The control-plane token stays inside the cluster: a task's callback_url is whatever the submitter named, so it
      // gets only the task's own metadata.callback_token, if any.
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      const callbackToken = callbackTokenOf(row.task);
      if (callbackToken) headers.authorization = `Bearer ${callbackToken}`;
      const groupRow = this.store.groups.get(cb.task_id);
      const body = { task_id: cb.task_id, status: row.status, group: groupRow ? this.#serveGroup(groupFromRow(groupRow), {}) : null };
      const response = await this.#fetch(row.task.callback_url, { method: 'POST', headers, body: JSON.stringify(body), signal: AbortSignal.any([AbortSignal.timeout(10_000), this.#stopCallbacks.signal]) });
      await response.body?.cancel();
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      this.store.taskCallbacks.upsert({ ...cb, state: 'done', attempts: cb.attempts + 1, last_error: null, updated_at: this.#clock() });
      this.events.publish('trainer_callback', { task_id: cb.task_id, ok: true });
    } catch (error) {
      if (this.#stopped) return; // aborted by stop(): not an attempt; it stays pending for the next start
      const attempts = cb.attempts + 1;
      const state = attempts > this.#opts.callbackRetries ? 'failed' : 'pending';
      this.store.taskCallbacks.upsert({ ...cb, state, attempts, last_error: (error as Error).message, updated_at: this.#clock() });
      this.#callbackNextTry.set(cb.task_id, this.#clock() + Math.min(30_000, 250 * 2 ** attempts));
      if (state === 'failed') this.events.publish('trainer_callback', { task_id: cb.task_id, ok: false, error: (error as Error).message });
    } finally {
      this.#callbacksInFlight.delete(cb.task_id);
    }
  }

  // ---------------------------------------------------------------------------------------------- state

  #loadState(): void {
    for (const row of this.store.nodes.list()) {
      // Give every known node a full heartbeat period after a restart before it is declared dead.
      const fresh = { ...row, last_heartbeat: Math.max(row.last_heartbeat, this.#clock()) };
      this.#nodes.set(row.node_id, { row: fresh, client: this.#makeClient(row.url), dispatchedSinceHeartbeat: 0 });
    }
    for (const task of this.store.tasks.list({ status: ACTIVE_TASK })) {
      for (const s of this.store.sessions.listByTask(task.task.task_id)) {
        if (FINAL_SESSION.has(s.status)) continue;
        // A result stored (by a gateway on the same db) while this server was down finishes the session now.
        const stored = this.store.results.get(s.session_id);
        if (stored) {
          this.store.sessions.update(s.session_id, { status: stored.status });
          continue;
        }
        if (!s.node_id) continue;
        if (this.#nodes.has(s.node_id)) this.#track(s.node_id, s.session_id);
        else this.store.sessions.update(s.session_id, { status: 'REGISTERED', node_id: null, attempt: s.attempt + 1 });
      }
    }
  }

  /** After a restart: results may have landed for tasks that never finished, and nodes may have forgotten sessions. */
  async #resume(): Promise<void> {
    this.store.results.relabelCancelled();
    for (const task of this.store.tasks.list({ status: ACTIVE_TASK })) await this.#checkTask(task.task.task_id);
    await Promise.all([...this.#nodes.keys()].map((id) => this.#reconcileNode(id)));
    await this.tick();
  }

  #updateGauges(): void {
    const m = this.metrics;
    m.sessionsByStatus.reset();
    for (const status of ['REGISTERED', 'INITIALIZING']) m.sessionsByStatus.set({ status }, this.store.sessions.listByStatus(status).length);
    let healthy = 0;
    let unhealthy = 0;
    let draining = 0;
    for (const { row } of this.#nodes.values()) {
      if (row.draining) draining++;
      else if (row.healthy) healthy++;
      else unhealthy++;
    }
    m.nodes.set({ state: 'healthy' }, healthy);
    m.nodes.set({ state: 'unhealthy' }, unhealthy);
    m.nodes.set({ state: 'draining' }, draining);
    m.groupsReady.set(this.store.groups.listReady().length);
  }

  // ---------------------------------------------------------------------------------------------- HTTP

  #authorized(req: Request): boolean {
    if (!this.#token) return true;
    const header = req.headers.get('authorization') ?? '';
    return timingSafeEqual(header, `Bearer ${this.#token}`);
  }

  #routes() {
    type Req = Request & { params: Record<string, string> };
    const guarded =
      (handler: (req: Req) => unknown | Promise<unknown>, okStatus = 200) =>
      async (req: Req): Promise<Response> => {
        if (!this.#authorized(req)) return json({ error: 'missing or wrong control-plane token' }, 401);
        try {
          const out = await handler(req);
          return out instanceof Response ? out : json(out, okStatus);
        } catch (error) {
          if (error instanceof HttpError) return json({ error: error.message }, error.status);
          if (error instanceof Error && error.message.startsWith('invalid ')) return json({ error: error.message }, 400);
          return json({ error: error instanceof Error ? error.message : String(error) }, 500);
        }
      };
    const body = async (req: Request): Promise<unknown> => {
      try {
        return await req.json();
      } catch {
        throw new HttpError(400, 'request body must be JSON');
      }
    };
    return {
      '/health': () => json({ ok: true, nodes: this.#nodes.size, ...this.#healthExtra?.() }),
      '/metrics': async () => {
        this.#updateGauges();
        return new Response(await this.metrics.registry.metrics(), { headers: { 'content-type': this.metrics.registry.contentType } });
      },
      '/rollout/task/submit': { POST: guarded(async (req) => this.submit(await body(req))) },
      '/rollout/task/:id': {
        GET: guarded((req) => this.taskStatus(req.params.id!) ?? json({ error: 'unknown task' }, 404)),
        DELETE: guarded((req) => this.cancelTask(req.params.id!)),
      },
      '/rollout/status': { GET: guarded(() => this.status()) },
      '/rollout/groups': {
        GET: guarded((req) => {
          const query = new URL(req.url).searchParams;
          const ready = query.get('ready');
          if (ready !== null && ready !== '1' && ready !== 'true') throw new HttpError(400, 'only ready=1 is supported');
          const include = query.getAll('include').flatMap((v) => v.split(',')).filter(Boolean);
          const unknown = include.filter((v) => v !== 'trajectories');
          if (unknown.length > 0) throw new HttpError(400, `include: unknown value ${unknown.join(',')}; supported: trajectories`);
          return { groups: this.readyGroups({ std: stdParam(query), trajectories: include.includes('trajectories') }) };
        }),
      },
      '/rollout/groups/:id/trajectories': {
        GET: guarded((req) => {
          const taskId = req.params.id!;
          const group = this.groupTrajectories(taskId, { std: stdParam(new URL(req.url).searchParams) });
          if (!group) throw new HttpError(404, `no evaluated group for task ${taskId} (groups are keyed by task_id)`);
          return group;
        }),
      },
      '/rollout/groups/:id/ack': {
        POST: guarded((req) => {
          const taskId = req.params.id!;
          const row = this.store.groups.get(taskId);
          return { task_id: taskId, group_id: row?.group_id ?? null, acked: this.ackGroup(taskId) };
        }),
      },
      '/nodes': { GET: guarded(() => ({ nodes: this.listNodes() })) },
      '/nodes/register': { POST: guarded(async (req) => this.registerNode(await body(req))) },
      '/nodes/:id/heartbeat': { POST: guarded(async (req) => this.heartbeat(req.params.id!, await body(req))) },
      '/nodes/:id': { DELETE: guarded((req) => this.drainNode(req.params.id!)) },
      '/callbacks/session_result': { POST: guarded(async (req) => this.acceptResult(await body(req))) },
      '/events': { GET: guarded((req) => this.events.sseResponse(req.signal)) },
    };
  }
}

/** The group label of a task (GroupRecord.group_id): metadata.group_id, else the task_id. Tasks may share it. */
export function groupLabelOf(task: TaskRequest): string {
  return typeof task.metadata?.group_id === 'string' && task.metadata.group_id ? task.metadata.group_id : task.task_id;
}

/**
 * The key of a task's group in the store (`store.groups.get`) and in `/rollout/groups/{id}/…`: its task_id, since a
 * group is all sessions of one task.
 * @deprecated use `task.task_id`; the label is `groupLabelOf`.
 */
export function groupIdOf(task: TaskRequest): string {
  return task.task_id;
}

/** metadata.callback_token of a task, or null. */
function callbackTokenOf(task: TaskRequest): string | null {
  const token = task.metadata?.callback_token;
  return typeof token === 'string' && token.length > 0 ? token : null;
}

/** The task as nodes get it: without metadata.callback_token, a secret meant only for the trainer's callback_url. */
function withoutCallbackToken(task: TaskRequest): TaskRequest {
  if (!task.metadata || !('callback_token' in task.metadata)) return task;
  const { callback_token: _dropped, ...metadata } = task.metadata;
  return { ...task, metadata };
}

/** `?std=population|unbiased` (default population). @throws HttpError 400 on another value. */
function stdParam(query: URLSearchParams): GrpoStd {
  const std = query.get('std');
  if (std === null || std === 'population') return 'population';
  if (std === 'unbiased') return 'unbiased';
  throw new HttpError(400, `std must be population or unbiased, got ${std}`);
}

/** Distinct non-null policy versions over the traces of `results`, sorted (numeric-aware: "9" before "10"). */
export function sampledPolicyVersions(results: readonly SessionResult[]): string[] {
  const versions = new Set<string>();
  for (const result of results) {
    for (const trace of result.trajectory.traces) {
      for (const v of trace.metadata?.policy_versions ?? []) if (v !== null && v !== undefined) versions.add(String(v));
    }
  }
  return [...versions].sort(new Intl.Collator('en', { numeric: true }).compare);
}

/** Outcome reward of a session: the evaluation's outcome_reward, else the first trace's reward, else 0. */
export function rewardOf(result: SessionResult): number {
  const evaluation = result.trajectory.metadata.evaluation;
  if (evaluation && typeof evaluation.outcome_reward === 'number') return evaluation.outcome_reward;
  return result.trajectory.traces[0]?.reward ?? 0;
}

/** A result enters the group when COMPLETED, or a TIMEOUT whose traces stayed trainable (agent budget). */
export function isUsable(result: SessionResult): boolean {
  if (result.status === 'COMPLETED') return true;
  return result.status === 'TIMEOUT' && result.trajectory.metadata.training_filter?.trainable === true;
}

/**
 * The evaluated group of a finished task with GRPO (population std) and leave-one-out advantages over its usable
 * sessions in sample order; policy versions as declared by the task and as sampled (over the usable sessions' traces).
 */
export function buildGroup(task: TaskRequest, sessions: SessionRow[], results: SessionResult[], earlyStopped: boolean, now: number): GroupRecord {
  const sampleIndex = new Map(sessions.map((s) => [s.session_id, s.sample_index]));
  const usable = results.filter(isUsable).sort((a, b) => (sampleIndex.get(a.session_id) ?? 0) - (sampleIndex.get(b.session_id) ?? 0));
  const rewards = usable.map(rewardOf);
  const declared = task.metadata?.policy_version === undefined ? null : String(task.metadata.policy_version);
  const sampled = sampledPolicyVersions(usable);
  return {
    group_id: groupLabelOf(task),
    task_id: task.task_id,
    created_at: now,
    policy_version: sampled.length === 1 ? sampled[0]! : declared,
    declared_policy_version: declared,
    policy_versions: sampled,
    rollout_step: task.metadata?.rollout_step ?? null,
    early_stopped: earlyStopped,
    sessions: usable.map((r, i) => ({ session_id: r.session_id, sample_index: sampleIndex.get(r.session_id) ?? -1, status: r.status, reward: rewards[i]! })),
    rewards,
    grpo_advantages: grpoAdvantages(rewards),
    loo_advantages: leaveOneOutAdvantages(rewards),
  };
}

function json(value: unknown, status = 200): Response {
  return Response.json(value, { status });
}

function timingSafeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  if (x.length !== y.length) return false;
  return bytesEqual(x, y);
}
