/**
 * The rollout server: TaskRequests in, num_samples sessions dispatched to gateway nodes by stage pressure, idempotent
 * session results back, evaluated groups with GRPO and leave-one-out advantages out to a trainer.
 * Polar-compatible endpoints (https://github.com/NVIDIA-NeMo/ProRL-Agent-Server, `src/polar`), on Bun.serve `routes`.
 * Every state change is written to SQLite before it is acknowledged, so a kill -9 loses nothing: on restart the server
 * asks each node about the sessions it had dispatched and re-dispatches the ones no node knows.
 * Parts: ./node-registry.ts (nodes, heartbeats), ./dispatcher.ts (dispatch, re-queue, cancel), ./trainer-api.ts
 * (groups), ./trainer-callbacks.ts, ./routes.ts (HTTP). Wire shapes: src/core/contracts/.
 */
import type { Clock } from '../core/clock.ts';
import { systemClock } from '../core/clock.ts';
import { parseSessionResultOutline } from '../core/contracts/index.ts';
import { newSessionSecret } from '../core/ids.ts';
import type { SessionResult } from '../core/records.ts';
import { EventHub } from '../observe/events.ts';
import { createRolloutMetrics, type RolloutMetrics } from '../observe/metrics.ts';
import type { GrpoStd } from '../trace/advantages.ts';
import { buildGroup, isUsable, rewardOf } from '../trace/groups.ts';
import { ACTIVE_TASK, FINAL_SESSION, HttpError, type RolloutContext } from './context.ts';
import { Dispatcher } from './dispatcher.ts';
import { httpNodeClient, type NodeClient } from './node-client.ts';
import { NodeRegistry } from './node-registry.ts';
import { CancelTombstones, publishReferenceEvents, referenceRolloutStatus, referenceTaskResult, referenceTaskView, tombstoneStatus, type TaskView } from './reference-api.ts';
import { referenceNodeInfo, referenceTaskStatusWord } from './reference-shapes.ts';
import { parseWireTaskRequest } from '../core/contracts/index.ts';
import { json, rolloutRoutes } from './routes.ts';
import { groupFromRow, putGroup, type GroupTrajectory, type NodeRow, type RolloutStore } from './store-port.ts';
import { TrainerApi, type ServedGroup } from './trainer-api.ts';
import { TrainerCallbacks } from './trainer-callbacks.ts';

export type { ServedGroup } from './trainer-api.ts';
export { buildGroup, groupIdOf, groupLabelOf, isUsable, rewardOf, sampledPolicyVersions } from '../trace/groups.ts';

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
  /** Seconds between the gateways' heartbeats, as `GET /nodes` reports it (`heartbeat_interval_seconds`; default 5). */
  heartbeatIntervalSeconds?: number;
}

/** A rollout server usable in-process (`start()`/`stop()`) or behind `polar rollout` / `polar serve`. */
export class RolloutServer {
  readonly store: RolloutStore;
  readonly events: EventHub;
  readonly metrics: RolloutMetrics;
  readonly #opts: Required<Pick<RolloutServerOptions, 'host' | 'port' | 'heartbeatTimeoutMs' | 'tickMs'>>;
  readonly #token: string | null;
  readonly #healthExtra: (() => Record<string, unknown>) | undefined;
  readonly #ctx: RolloutContext;
  readonly #nodes: NodeRegistry;
  readonly #dispatcher: Dispatcher;
  readonly #trainer: TrainerApi;
  readonly #callbacks: TrainerCallbacks;
  #server: ReturnType<typeof Bun.serve> | null = null;
  #publicUrl: string | null;
  #timer: ReturnType<typeof setInterval> | null = null;
  #stopped = false;
  readonly #tombstones: CancelTombstones;
  readonly #heartbeatIntervalS: number;

  constructor(options: RolloutServerOptions) {
    this.store = options.store;
    const clock = options.clock ?? systemClock;
    this.#token = options.controlPlaneToken ?? null;
    const doFetch = options.fetch ?? fetch;
    this.#healthExtra = options.health;
    this.#opts = {
      host: options.host ?? '127.0.0.1',
      port: options.port ?? 0,
      heartbeatTimeoutMs: options.heartbeatTimeoutMs ?? 30_000,
      tickMs: options.tickMs ?? 500,
    };
    this.#publicUrl = options.publicUrl ?? null;
    this.events = new EventHub(clock);
    publishReferenceEvents(this.events, this.store);
    this.#tombstones = new CancelTombstones(clock);
    this.#heartbeatIntervalS = options.heartbeatIntervalSeconds ?? 5;
    this.metrics = createRolloutMetrics();
    this.#ctx = { store: this.store, clock, events: this.events, metrics: this.metrics, stopped: () => this.#stopped };
    const makeClient = options.nodeClient ?? ((url: string) => httpNodeClient(url, { controlPlaneToken: this.#token, fetch: doFetch }));
    this.#nodes = new NodeRegistry(this.#ctx, makeClient);
    this.#dispatcher = new Dispatcher(this.#ctx, this.#nodes, () => this.callbackUrl);
    this.#trainer = new TrainerApi(this.#ctx);
    this.#callbacks = new TrainerCallbacks(this.#ctx, {
      retries: options.callbackRetries ?? 5,
      fetch: doFetch,
      // The Python Polar's TaskResult {task_id, status, results, result_paths}, plus our evaluated group.
      body: (taskId) => referenceTaskResult(this.store, taskId, this.#trainer.groupOf(taskId)),
    });
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
    this.#callbacks.restart();
    this.#server = Bun.serve({
      hostname: this.#opts.host,
      port: this.#opts.port,
      idleTimeout: 0,
      routes: rolloutRoutes(this, this.#token, () => this.#healthExtra?.() ?? {}),
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
    const stopping = this.#callbacks.stop();
    await this.#server?.stop(true);
    this.#server = null;
    await this.#dispatcher.idle();
    await stopping;
  }

  // ---------------------------------------------------------------------------------------------- task intake

  /**
   * Accept a TaskRequest (ours or the Python Polar's spelling, src/core/contracts/reference-task.ts): persist it and its num_samples
   * sessions (ids from newSessionSecret), then dispatch. Answers `{task_id, status: "running", sessions}`.
   * Re-submitting a task_id that exists returns its current status and creates nothing.
   * @throws Error (→ 400) on an invalid TaskRequest; HttpError 409 for a task_id cancelled before its submit arrived.
   */
  submit(input: unknown): { task_id: string; status: string; sessions: number } {
    const task = parseWireTaskRequest(input);
    if (this.#tombstones.has(task.task_id) && !this.store.tasks.get(task.task_id)) throw new HttpError(409, `task ${task.task_id} was cancelled before submission`);
    const existing = this.store.tasks.get(task.task_id);
    if (existing) return { task_id: task.task_id, status: referenceTaskStatusWord(existing.status), sessions: this.store.sessions.listByTask(task.task_id).length };
    this.store.transaction(() => {
      this.store.tasks.upsert(task, ACTIVE_TASK);
      for (let i = 0; i < task.num_samples; i++) {
        this.store.sessions.insert({ session_id: newSessionSecret(), task_id: task.task_id, sample_index: i, status: 'REGISTERED', node_id: null, attempt: 0 });
      }
    });
    this.metrics.tasksSubmitted.inc();
    this.events.publish('task_submitted', { task_id: task.task_id, num_samples: task.num_samples });
    void this.pump();
    return { task_id: task.task_id, status: referenceTaskStatusWord(ACTIVE_TASK), sessions: task.num_samples };
  }

  /**
   * `GET /rollout/task/{id}`: the Python Polar's TaskStatus (lowercase status, total/completed sessions, finished
   * SessionResults, result_paths) plus our per-session view and group (reference-api.ts); null for an unknown task.
   */
  taskStatus(taskId: string): TaskView | null {
    return referenceTaskView(this.store, taskId);
  }

  /**
   * Cancel a task: unfinished sessions are cancelled on their nodes; the trainer callback reports it cancelled.
   * Answers the task's TaskStatus (taskStatus) plus `cancelled`, the number of sessions cancelled now.
   * @param opts.registerIfMissing for a task_id not known yet: leave a tombstone that refuses its submit for 300 s
   *   (a trainer's cancel can overtake its own submit) and answer a cancelled TaskStatus instead of 404.
   * @throws HttpError 404 for an unknown task without registerIfMissing.
   */
  async cancelTask(taskId: string, opts: { registerIfMissing?: boolean } = {}): Promise<Record<string, unknown>> {
    const row = this.store.tasks.get(taskId);
    if (!row) {
      if (!opts.registerIfMissing) throw new HttpError(404, `unknown task ${taskId}`);
      this.#tombstones.add(taskId);
      return { ...tombstoneStatus(taskId), cancelled: 0 };
    }
    if (row.status !== ACTIVE_TASK) return { ...this.taskStatus(taskId), cancelled: 0 };
    const cancelled = await this.#dispatcher.cancelSessions(this.store.sessions.listByTask(taskId).filter((s) => !FINAL_SESSION.has(s.status)));
    this.store.transaction(() => {
      this.store.tasks.setStatus(taskId, 'CANCELLED');
      this.#callbacks.queue(taskId);
    });
    this.events.publish('task_finished', { task_id: taskId, status: 'CANCELLED' });
    void this.#callbacks.deliver();
    return { ...this.taskStatus(taskId), cancelled };
  }

  /**
   * `GET /rollout/status` in the Python Polar's shape (`tasks: {task_id: status}`, `pipeline`, `nodes: {nodes}`) plus
   * our counts by status and `groups_ready` (reference-api.ts).
   */
  status(): Record<string, unknown> {
    return referenceRolloutStatus(this.store, this.listNodes(), this.#heartbeatIntervalS);
  }

  /** Every node as GatewayNodeInfo plus our fields (`GET /nodes`). */
  nodeInfos(): Record<string, unknown>[] {
    return this.listNodes().map((n) => referenceNodeInfo(n, this.#heartbeatIntervalS));
  }

  /** A node as GatewayNodeInfo plus our fields (`GET /nodes/{id}`); null when unknown. */
  nodeInfo(nodeId: string): Record<string, unknown> | null {
    const node = this.listNodes().find((n) => n.node_id === nodeId);
    return node ? referenceNodeInfo(node, this.#heartbeatIntervalS) : null;
  }

  // ---------------------------------------------------------------------------------------------- nodes

  /** Register (or re-register) a node; sessions it had but no longer knows are re-dispatched. */
  registerNode(input: unknown): NodeRow {
    const { row, known } = this.#nodes.register(input);
    if (known) void this.#dispatcher.reconcileNode(row.node_id);
    void this.pump();
    return row;
  }

  /** Record a heartbeat's stage counts; an unhealthy node becomes healthy again. @throws HttpError 404 for an unknown node. */
  heartbeat(nodeId: string, input: unknown): NodeRow {
    const { row } = this.#nodes.heartbeat(nodeId, input);
    void this.pump();
    return row;
  }

  /** Drain a node: it gets no new sessions; the ones it runs finish. @throws HttpError 404 for an unknown node. */
  drainNode(nodeId: string): { node_id: string; draining: true; in_flight: number } {
    return this.#nodes.drain(nodeId);
  }

  /** Every known node with its in-flight count and heartbeat age (ms); see NodeRegistry.list. */
  listNodes() {
    return this.#nodes.list();
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
      result = parseSessionResultOutline(input) as unknown as SessionResult;
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
    for (const nodeId of this.#nodes.untrackEverywhere(session.session_id)) if (nodeId !== result.node_id) void this.#dispatcher.cancelOn(nodeId, session.session_id);
    this.events.publish('session_result', { session_id: session.session_id, task_id: session.task_id, status: result.status, reward: rewardOf(result), node_id: result.node_id });
    await this.#checkTask(session.task_id);
    void this.pump();
    return { session_id: result.session_id, accepted: true, duplicate: false };
  }

  // ---------------------------------------------------------------------------------------------- trainer API

  /** Evaluated groups not yet acknowledged, oldest first; see TrainerApi.readyGroups. */
  readyGroups(opts: { std?: GrpoStd; trajectories?: boolean } = {}): ServedGroup[] {
    return this.#trainer.readyGroups(opts);
  }

  /** A task's evaluated group with its trajectories, or null; see TrainerApi.groupTrajectories. */
  groupTrajectories(taskId: string, opts: { std?: GrpoStd } = {}): (ServedGroup & { trajectories: GroupTrajectory[] }) | null {
    return this.#trainer.groupTrajectories(taskId, opts);
  }

  /** Acknowledge a task's group so it is never served again; false when already acknowledged or unknown. */
  ackGroup(taskId: string): boolean {
    return this.#trainer.ack(taskId);
  }

  // ---------------------------------------------------------------------------------------------- scheduling

  /** Dispatch queued sessions to nodes. Calls coalesce: at most one pass runs at a time, and one more follows. */
  pump(): Promise<void> {
    return this.#dispatcher.pump();
  }

  /** One timer step: heartbeat timeouts, dispatch, trainer callbacks. Public so tests can drive it with a fake clock. */
  async tick(): Promise<void> {
    for (const state of this.#nodes.expired(this.#opts.heartbeatTimeoutMs)) this.#dispatcher.nodeLost(state, 'heartbeat timeout');
    this.#updateGauges();
    await Promise.all([this.pump(), this.#callbacks.deliver()]);
  }

  /** The Prometheus exposition of the server's metrics. */
  async metricsText(): Promise<{ text: string; contentType: string }> {
    this.#updateGauges();
    return { text: await this.metrics.registry.metrics(), contentType: this.metrics.registry.contentType };
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
      await this.#dispatcher.cancelSessions(open);
    } else if (open.length > 0) return;
    const group = buildGroup(row.task, sessions, results, earlyStopped, this.#ctx.clock());
    const finished = this.store.transaction(() => {
      const again = this.store.tasks.get(taskId);
      if (!again || again.status !== ACTIVE_TASK) return false;
      putGroup(this.store, group);
      this.store.tasks.setStatus(taskId, 'COMPLETED');
      this.#callbacks.queue(taskId);
      return true;
    });
    if (!finished) return;
    this.events.publish('task_finished', { task_id: taskId, status: 'COMPLETED', early_stopped: earlyStopped });
    this.events.publish('group_ready', group);
    void this.#callbacks.deliver();
  }

  // ---------------------------------------------------------------------------------------------- state

  #loadState(): void {
    this.#nodes.load();
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
        if (this.#nodes.has(s.node_id)) this.#nodes.track(s.node_id, s.session_id);
        else this.store.sessions.update(s.session_id, { status: 'REGISTERED', node_id: null, attempt: s.attempt + 1 });
      }
    }
  }

  /** After a restart: results may have landed for tasks that never finished, and nodes may have forgotten sessions. */
  async #resume(): Promise<void> {
    this.store.results.relabelCancelled();
    for (const task of this.store.tasks.list({ status: ACTIVE_TASK })) await this.#checkTask(task.task.task_id);
    await Promise.all(this.#nodes.ids().map((id) => this.#dispatcher.reconcileNode(id)));
    await this.tick();
  }

  #updateGauges(): void {
    const m = this.metrics;
    m.sessionsByStatus.reset();
    for (const status of ['REGISTERED', 'INITIALIZING']) m.sessionsByStatus.set({ status }, this.store.sessions.listByStatus(status).length);
    const nodes = this.#nodes.counts();
    m.nodes.set({ state: 'healthy' }, nodes.healthy);
    m.nodes.set({ state: 'unhealthy' }, nodes.unhealthy);
    m.nodes.set({ state: 'draining' }, nodes.draining);
    m.groupsReady.set(this.store.groups.listReady().length);
  }
}
