/**
 * The rollout server: TaskRequests in, num_samples sessions dispatched to gateway nodes by stage pressure, idempotent
 * session results back, evaluated groups with GRPO and leave-one-out advantages out to a trainer.
 * Polar-compatible endpoints (https://github.com/NVIDIA-NeMo/ProRL-Agent-Server, `src/polar`), on Bun.serve `routes`.
 * Every state change is written to SQLite before it is acknowledged, so a kill -9 loses nothing: on restart the server
 * asks each node what it holds (`GET /sessions`), adopts what still runs and re-dispatches only the ones no node has;
 * it never cancels work because it restarted.
 * Parts: ./node-registry.ts (nodes, heartbeats), ./dispatcher.ts (dispatch answers, re-queue, adoption, cancel),
 * ./task-results.ts (results, stale attempts, groups), ./trainer-api.ts, ./trainer-callbacks.ts, ./routes.ts (HTTP). Wire shapes: src/core/contracts/.
 */
import { uploadSourceProblems, evaluatorSourceProblems } from '../core/upload-roots.ts';
import type { Clock } from '../core/clock.ts';
import { systemClock } from '../core/clock.ts';
import { formatIssues, formatProblems, handbackSchema, LIVE_SESSION_STATUSES, parseWireTaskRequest, resultAttempt, runnableProblems } from '../core/contracts/index.ts';
import { newSessionSecret } from '../core/ids.ts';
import { EventHub } from '../observe/events.ts';
import { createRolloutMetrics, type RolloutMetrics } from '../observe/metrics.ts';
import type { GrpoStd } from '../trace/advantages.ts';
import { rewardOf } from '../trace/groups.ts';
import { ACTIVE_TASK, FINAL_SESSION, HttpError, type RolloutContext } from './context.ts';
import { Dispatcher } from './dispatcher.ts';
import { httpNodeClient, type NodeClient } from './node-client.ts';
import { NodeRegistry } from './node-registry.ts';
import { CancelTombstones, publishReferenceEvents, referenceRolloutStatus, referenceTaskResult, referenceTaskView, tombstoneStatus, type TaskView } from './reference-api.ts';
import { referenceNodeInfo, referenceTaskStatusWord } from './reference-shapes.ts';
import { json, rolloutRoutes } from './routes.ts';
import { groupFromRow, type GroupTrajectory, type NodeRow, type RolloutStore } from './store-port.ts';
import { TrainerApi, type ServedGroup } from './trainer-api.ts';
import { TaskResults } from './task-results.ts';
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
  /**
   * Directories a TaskRequest's upload `src` may lie in (config `gateway.upload_roots`, plus the task directories
   * `polar run` loaded); a source outside them is refused with 400 at submit. Undefined: not checked (in-process use).
   */
  uploadRoots?: readonly string[];
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
  readonly #uploadRoots: readonly string[] | null;
  readonly #healthExtra: (() => Record<string, unknown>) | undefined;
  readonly #ctx: RolloutContext;
  readonly #nodes: NodeRegistry;
  readonly #dispatcher: Dispatcher;
  readonly #trainer: TrainerApi;
  readonly #callbacks: TrainerCallbacks;
  readonly #results: TaskResults;
  readonly #tombstones: CancelTombstones;
  readonly #heartbeatIntervalS: number;
  #server: ReturnType<typeof Bun.serve> | null = null;
  #publicUrl: string | null;
  #timer: ReturnType<typeof setInterval> | null = null;
  #stopped = false;

  constructor(options: RolloutServerOptions) {
    this.store = options.store;
    const clock = options.clock ?? systemClock;
    this.#token = options.controlPlaneToken ?? null;
    this.#uploadRoots = options.uploadRoots ?? null;
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
    this.metrics = createRolloutMetrics();
    publishReferenceEvents(this.events, this.store);
    this.#tombstones = new CancelTombstones(clock);
    this.#heartbeatIntervalS = options.heartbeatIntervalSeconds ?? 5;
    this.#ctx = { store: this.store, clock, events: this.events, metrics: this.metrics, stopped: () => this.#stopped };
    const makeClient = options.nodeClient ?? ((url: string) => httpNodeClient(url, { controlPlaneToken: this.#token, fetch: doFetch }));
    this.#nodes = new NodeRegistry(this.#ctx, makeClient);
    this.#dispatcher = new Dispatcher(this.#ctx, this.#nodes, () => this.callbackUrl, (session, nodeId, error, attempt) => this.#results.refused(session, nodeId, error, attempt));
    this.#trainer = new TrainerApi(this.#ctx);
    this.#callbacks = new TrainerCallbacks(this.#ctx, {
      retries: options.callbackRetries ?? 12,
      fetch: doFetch,
      // The Python Polar's TaskResult {task_id, status, results, result_paths}, plus our evaluated group.
      body: (taskId) => referenceTaskResult(this.store, taskId, this.#trainer.groupOf(taskId)),
    });
    this.#results = new TaskResults(this.#ctx, this.#nodes, this.#dispatcher, this.#callbacks, () => void this.pump());
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
    // Heartbeats can arrive from now on: the timeout counts from here, not from when the store was loaded.
    this.#nodes.restartHeartbeatClocks();
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
   * Accept a TaskRequest (ours or the Python Polar's spelling, src/core/contracts/reference-task.ts): persist it and its
   * num_samples sessions (ids from newSessionSecret), then dispatch. Answers `{task_id, status: "running", sessions}`.
   * A task_id that is running is refused (409); a finished one runs again as a new run of that id (trainers restarted
   * from step 0 reuse their ids): the old run's rows are kept under `<task_id>@run<n>` and never served as the new one's.
   * @throws HttpError 400 on an invalid TaskRequest (unknown keys, bad values) or one no gateway can run (unknown
   *   harness or evaluator, shell harness without a command, bad evaluator config, escaping upload dest), naming the
   *   field; 409 when the task_id is running, or was cancelled before its submit arrived.
   */
  submit(input: unknown): { task_id: string; status: string; sessions: number; previous_run: string | null } {
    const task = parseWireTaskRequest(input);
    if (this.#tombstones.has(task.task_id) && !this.store.tasks.get(task.task_id)) throw new HttpError(409, `task ${task.task_id} was cancelled before submission`);
    if (this.#uploadRoots) {
      const outside = [...uploadSourceProblems(task.runtime?.prepare, this.#uploadRoots), ...evaluatorSourceProblems(task.evaluator, this.#uploadRoots)];
      if (outside.length > 0) throw new HttpError(400, `invalid TaskRequest: ${outside.join('; ')}`);
    }
    // The gateway's own dispatch check, here: a task no gateway can run is refused now, not failed session by session.
    const problems = runnableProblems(task);
    if (problems.length > 0) throw new HttpError(400, `invalid TaskRequest: ${formatProblems(problems)}`);
    const previous = this.store.transaction(() => {
      const existing = this.store.tasks.get(task.task_id);
      if (existing?.status === ACTIVE_TASK) {
        throw new HttpError(409, `task ${task.task_id} is running; cancel it (DELETE /rollout/task/${task.task_id}) or wait for it to finish before submitting it again`);
      }
      const archived = existing ? this.store.tasks.archiveRun(task.task_id) : null;
      this.store.tasks.upsert(task, ACTIVE_TASK);
      for (let i = 0; i < task.num_samples; i++) {
        this.store.sessions.insert({ session_id: newSessionSecret(), task_id: task.task_id, sample_index: i, status: 'REGISTERED', node_id: null, attempt: 0 });
      }
      return archived;
    });
    this.metrics.tasksSubmitted.inc();
    this.events.publish('task_submitted', { task_id: task.task_id, num_samples: task.num_samples, previous_run: previous });
    void this.pump();
    return { task_id: task.task_id, status: referenceTaskStatusWord(ACTIVE_TASK), sessions: task.num_samples, previous_run: previous };
  }

  /**
   * `GET /rollout/task/{id}`: the Python Polar's TaskStatus (lowercase status, total/completed sessions, finished
   * SessionResults, result_paths) plus our per-session view and group (reference-api.ts); null for an unknown task.
   */
  taskStatus(taskId: string): TaskView | null {
    return referenceTaskView(this.store, taskId);
  }

  /**
   * Cancel a task: unfinished sessions are cancelled on their nodes and recorded CANCELLED with `opts.reason`; the
   * trainer callback reports it cancelled. Answers the task's TaskStatus (taskStatus) plus `cancelled`, the number of
   * sessions cancelled now.
   * @param opts.registerIfMissing for a task_id not known yet: leave a tombstone that refuses its submit for 300 s
   *   (a trainer's cancel can overtake its own submit) and answer a cancelled TaskStatus instead of 404.
   * @throws HttpError 404 for an unknown task without registerIfMissing.
   */
  async cancelTask(taskId: string, opts: { registerIfMissing?: boolean; reason?: string } = {}): Promise<Record<string, unknown>> {
    const row = this.store.tasks.get(taskId);
    if (!row) {
      if (!opts.registerIfMissing) throw new HttpError(404, `unknown task ${taskId}`);
      this.#tombstones.add(taskId);
      return { ...tombstoneStatus(taskId), cancelled: 0 };
    }
    if (row.status !== ACTIVE_TASK) return { ...this.taskStatus(taskId), cancelled: 0 };
    const reason = opts.reason ?? 'by request';
    const cancelled = await this.#results.cancel(this.store.sessions.listByTask(taskId).filter((s) => !FINAL_SESSION.has(s.status)), reason);
    this.store.transaction(() => {
      this.store.tasks.setStatus(taskId, 'CANCELLED');
      this.#callbacks.queue(taskId);
    });
    this.events.publish('task_finished', { task_id: taskId, status: 'CANCELLED', reason });
    void this.#callbacks.deliver();
    return { ...this.taskStatus(taskId), cancelled };
  }

  /** Results in: see TaskResults.accept (./task-results.ts). @throws HttpError 400/404/409. */
  acceptResult(input: unknown): Promise<{ session_id: string; accepted: boolean; duplicate: boolean; stale: boolean }> {
    return this.#results.accept(input);
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

  /**
   * Record a heartbeat's stage counts; an unhealthy node becomes healthy again. Sessions the node reports ended twice
   * while this server has no result for them get their result fetched from the node (TaskResults.recover).
   * @throws HttpError 404 for an unknown node.
   */
  heartbeat(nodeId: string, input: unknown): NodeRow {
    const { row, ended } = this.#nodes.heartbeat(nodeId, input);
    if (ended.length > 0) void this.#results.recover(nodeId, ended);
    void this.pump();
    return row;
  }

  /**
   * A node that is stopping (SIGINT/SIGTERM) says so after its finished sessions' results went out: it is marked
   * unhealthy and the sessions it still had (interrupted, their results never sent) are queued again with attempt + 1,
   * at once rather than after the heartbeat timeout. Its re-registration makes it healthy again.
   * @throws HttpError 404 for an unknown node.
   */
  nodeLeaving(nodeId: string): { node_id: string; requeued: number } {
    const state = this.#nodes.get(nodeId);
    if (!state) throw new HttpError(404, `unknown node ${nodeId}`);
    const held = this.#nodes.inFlightCount(nodeId);
    this.#dispatcher.nodeLost(state, 'node stopping');
    void this.pump();
    return { node_id: nodeId, requeued: held };
  }

  /**
   * A node whose engine has been down for its `gateway.engine_handback_s` gives back the sessions it has not started
   * (`POST /nodes/{id}/handback`, body `{session_ids, reason?}`): the node's engine counts as down from now (no
   * dispatch to it until a heartbeat says it is back), and each session this server dispatched there and still has
   * open is queued again for another node (Dispatcher.handBack: none while no other node could run it). Answers
   * `{node_id, requeued: [ids]}`.
   * @throws HttpError 404 for an unknown node, 400 for an invalid body.
   */
  nodeHandback(nodeId: string, input: unknown): { node_id: string; requeued: string[] } {
    const state = this.#nodes.get(nodeId);
    if (!state) throw new HttpError(404, `unknown node ${nodeId}`);
    const parsed = handbackSchema.safeParse(input);
    if (!parsed.success) throw new HttpError(400, `invalid handback: ${formatIssues(parsed.error)}`);
    this.#nodes.engineDown(state);
    const requeued = this.#dispatcher.handBack(nodeId, parsed.data.session_ids, parsed.data.reason ?? 'engine down');
    this.events.publish('node_handback', { node_id: nodeId, offered: parsed.data.session_ids.length, requeued: requeued.length, reason: parsed.data.reason ?? null });
    if (requeued.length > 0) void this.pump();
    return { node_id: nodeId, requeued };
  }

  /** Drain a node: it gets no new sessions; the ones it runs finish. @throws HttpError 404 for an unknown node. */
  drainNode(nodeId: string): { node_id: string; draining: true; in_flight: number } {
    return this.#nodes.drain(nodeId);
  }

  /** Every known node with its in-flight count and heartbeat age (ms); see NodeRegistry.list. */
  listNodes() {
    return this.#nodes.list();
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
    if (this.#stopped) return;
    for (const state of this.#nodes.expired(this.#opts.heartbeatTimeoutMs)) this.#dispatcher.nodeLost(state, 'heartbeat timeout');
    this.#updateGauges();
    await Promise.all([this.pump(), this.#callbacks.deliver()]);
  }

  /** The Prometheus exposition of the server's metrics. */
  async metricsText(): Promise<{ text: string; contentType: string }> {
    this.#updateGauges();
    return { text: await this.metrics.registry.metrics(), contentType: this.metrics.registry.contentType };
  }

  // ---------------------------------------------------------------------------------------------- state

  #loadState(): void {
    this.#nodes.load();
    for (const task of this.store.tasks.list({ status: ACTIVE_TASK })) {
      for (const s of this.store.sessions.listByTask(task.task.task_id)) {
        if (FINAL_SESSION.has(s.status)) continue;
        // A result stored (by a gateway on the same db) while this server was down finishes the session now.
        const stored = this.store.results.get(s.session_id);
        if (stored && resultAttempt(stored) === s.attempt) {
          this.store.sessions.update(s.session_id, { status: stored.status });
          this.#results.storedWhileDown(s.session_id, stored.status);
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
    for (const task of this.store.tasks.list({ status: ACTIVE_TASK })) {
      if (this.#stopped) return;
      await this.#results.checkTask(task.task.task_id);
    }
    await Promise.all(this.#nodes.ids().map((id) => this.#dispatcher.reconcileNode(id)));
    await this.tick();
  }

  #updateGauges(): void {
    const m = this.metrics;
    m.sessionsByStatus.reset();
    // Counts, not rows: this runs every tick, with the whole queue in REGISTERED (bench/scale-out.ts).
    // Unfinished ones only (each an indexed count); the live statuses come from the nodes' heartbeats.
    for (const status of ['REGISTERED', ...LIVE_SESSION_STATUSES]) m.sessionsByStatus.set({ status }, this.store.sessions.countByStatus(status));
    const nodes = this.#nodes.counts();
    m.nodes.set({ state: 'healthy' }, nodes.healthy);
    m.nodes.set({ state: 'unhealthy' }, nodes.unhealthy);
    m.nodes.set({ state: 'draining' }, nodes.draining);
    m.groupsReady.set(this.store.groups.countReady());
  }
}

