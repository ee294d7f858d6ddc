/**
 * The gateway node (contract 7): owns each session from sandbox start to the rewarded trajectory.
 * Stages: queued → INIT (runtime start, prepare actions, harness install + config) → READY (bounded) → RUNNING
 * (harness process group) → POSTRUN (build, evaluate, filter, store, teardown, callback).
 * Source: ARCHITECTURE.md §5 (pools, budgets, evaluator prewarm), §2 (session states, SessionResult).
 */
import { join } from 'node:path';
import { z } from 'zod';
import type { Clock } from '../core/clock.ts';
import { systemClock } from '../core/clock.ts';
import type {
  CompletionRecord, EvaluationResult, SessionResult, SessionStatus, SessionTiming, TaskRequest, Trajectory,
} from '../core/records.ts';
import { EventHub } from '../observe/events.ts';
import type { SessionDirectory } from '../proxy/types.ts';
import { applyRewards, buildTrajectory } from '../trace/index.ts';
import { controlPlaneHeaders, postWithRetry, type RetryPolicy } from './callback.ts';
import { EVALUATORS } from './evaluators/index.ts';
import type { Evaluator } from './evaluators/types.ts';
import { HARNESS_ADAPTERS } from './harnesses/index.ts';
import { defaultHarnessCache, harnessPaths, installHarness } from './harnesses/install.ts';
import type { HarnessAdapter, HarnessLaunch, HarnessOutcome } from './harnesses/types.ts';
import { harnessFailureError, writeHarnessLog } from './harness-output.ts';
import { commitBaseline, runPrepare, sessionDiff } from './prepare.ts';
import { createRuntime, parseRuntimeSpec, type RuntimeFactory, type RuntimeSpec } from './runtimes/index.ts';
import type { Runtime, RuntimeProcess } from './runtimes/types.ts';
import { GatewaySocket } from './runtimes/tunnel.ts';
import { startSessionServer, type FetchHandler } from './session-api.ts';

/** Stage sizes (ARCHITECTURE.md §5). */
export interface GatewayCapacity {
  init_workers: number;
  ready_buffer: number;
  max_run_workers: number;
  postrun_workers: number;
}

/** Body of `POST /sessions` (contract 7). */
export interface DispatchSpec {
  session_id: string;
  task: TaskRequest;
  sample_index: number;
  callback_url?: string;
  attempt?: number;
}

/** Sessions per stage (`GET /health` `stages`, heartbeats). */
export interface StageCounts {
  queued: number;
  init: number;
  ready: number;
  running: number;
  postrun: number;
}

/** The store repositories the node uses (a subset of src/store `Store`). */
export interface GatewayStore {
  completions: { listBySession(sessionId: string): CompletionRecord[] };
  results: { put(result: SessionResult): boolean };
}

/** A state change, published in-process and on `GET /events`. */
export interface SessionEvent {
  session_id: string;
  task_id: string;
  status: SessionStatus;
  node_id: string;
  sample_index: number;
  /** Unix ms. */
  at: number;
  error?: string | null;
}

/** `GET /sessions/{id}`. */
export interface SessionView {
  session_id: string;
  task_id: string;
  sample_index: number;
  attempt: number;
  status: SessionStatus;
  node_id: string;
  error: string | null;
  result: SessionResult | null;
}

/** Engine reachability as last checked (`GET /health` `engine`). */
export interface EngineHealth {
  ok: boolean;
  /** Why the last check failed; null when ok. */
  error: string | null;
}

export interface GatewayNodeOptions {
  nodeId: string;
  capacity?: Partial<GatewayCapacity>;
  store: GatewayStore;
  /** Host parent of per-session directories. */
  workRoot: string;
  /**
   * Host directory of the per-session harness logs (stdout/stderr tails; the runtime's own directory is removed at
   * teardown). Default `<workRoot>/harness-logs`; null writes none.
   */
  harnessLogDir?: string | null;
  /** Harness install cache (default ~/.cache/polar/harnesses or $POLAR_HARNESS_CACHE). */
  harnessCacheDir?: string;
  /** Install a missing harness package on first use (default true). */
  autoInstallHarness?: boolean;
  /** Listen address of the session API + proxy (default 127.0.0.1, port 0 = free port). */
  host?: string;
  port?: number;
  /** URL the rollout server uses for this node (default http://host:port). */
  publicUrl?: string;
  /** Origin harnesses use as their base URL (default: the listen URL; docker --network host sees the same). */
  gatewayUrl?: string;
  /**
   * Builds the proxy (`createProxyApp(...)`) that serves every path the session API does not; called at start.
   * `control.adminToken` is the node's control-plane token (null without one): pass it as the proxy's
   * `options.adminToken` so its `/admin/*` needs it (the node's server also refuses those paths without it).
   */
  proxy?: (sessions: SessionDirectory, control: { adminToken: string | null }) => { fetch: FetchHandler };
  /** Defaults for a task's runtime section (from the node config: kind, image, isolation). */
  runtimeDefaults?: Partial<RuntimeSpec>;
  runtimeFactory?: RuntimeFactory;
  harnesses?: Readonly<Record<string, HarnessAdapter>>;
  evaluators?: Readonly<Record<string, Evaluator>>;
  /** End-of-turn token ids for prefix_merging (default: detected from the records). */
  eotIds?: number[];
  /** Engine reachability for `GET /health` (`engine: {ok, error}`); absent = not reported. */
  engineHealth?: () => EngineHealth;
  /**
   * Base URL of the simulator when the engine is the built-in simulator (kind `sim`): a task's `metadata.sim_script`
   * (behaviour script, contract 9) is registered there with `POST /sim/scripts` once per task before its first session
   * runs. Null/absent: scripts in task metadata are ignored (a real engine has no use for them).
   */
  simUrl?: string | null;
  /** Register + heartbeat with this rollout server. */
  rollout?: { url: string; heartbeatIntervalMs?: number };
  controlPlaneToken?: string | null;
  callbackRetry?: RetryPolicy;
  /** Teardown timeout per runtime, ms (default 60 000). */
  teardownTimeoutMs?: number;
  clock?: Clock;
  fetch?: typeof fetch;
  log?: (line: string) => void;
}

const DEFAULT_CAPACITY: GatewayCapacity = { init_workers: 4, ready_buffer: 4, max_run_workers: 8, postrun_workers: 4 };

const DispatchSchema = z.object({
  session_id: z.string().min(1).max(512),
  sample_index: z.number().int().min(0),
  callback_url: z.url().optional(),
  attempt: z.number().int().min(0).optional(),
  task: z.object({
    task_id: z.string().min(1),
    instruction: z.string(),
    num_samples: z.number().int().min(1),
    timeout_seconds: z.number().positive(),
    agent: z.object({
      harness: z.string().min(1).optional(),
      command: z.string().min(1).optional(),
      model_name: z.string().min(1),
      settings: z.record(z.string(), z.unknown()).optional(),
      env: z.record(z.string(), z.string()).optional(),
    }).passthrough(),
    builder: z.object({ strategy: z.enum(['per_request', 'prefix_merging']), config: z.record(z.string(), z.unknown()).optional() }).passthrough(),
    runtime: z.object({ kind: z.string() }).passthrough().optional(),
    evaluator: z.object({ strategy: z.string().min(1), config: z.record(z.string(), z.unknown()).optional(), refresh_runtime: z.boolean().optional() }).passthrough().optional(),
    dispatch_priority: z.number().optional(),
    metadata: z.object({ policy_version: z.string().optional(), agent_timeout: z.number().positive().optional() }).passthrough().optional(),
  }).passthrough(),
});

/** Thrown by `dispatch` for a bad spec (HTTP 400) or a duplicate session (409). */
export class DispatchError extends Error {
  override name = 'DispatchError';
  constructor(message: string, readonly status: 400 | 409 | 503) {
    super(message);
  }
}

type Stage = 'queued' | 'init' | 'ready' | 'running' | 'postrun_queued' | 'postrun' | 'done';
type EndReason = { kind: 'cancelled' } | { kind: 'timeout'; timeoutKind: 'agent' | 'total' } | { kind: 'error'; error: string };

interface Session {
  spec: DispatchSpec;
  id: string;
  order: number;
  priority: number;
  stage: Stage;
  status: SessionStatus;
  abort: AbortController;
  end: EndReason | null;
  runtimeSpec: RuntimeSpec;
  adapter: HarnessAdapter;
  evaluator: Evaluator | null;
  needsDiff: boolean;
  runtime: Runtime | null;
  evalRuntime: Promise<Runtime> | null;
  launch: HarnessLaunch | null;
  toolDirs: string[];
  proc: RuntimeProcess | null;
  harness: { exitCode: number | null; outcome: HarnessOutcome } | null;
  /** Host path of the harness log file, once written. */
  harnessLog: string | null;
  deadlineTimer: ReturnType<typeof setTimeout> | null;
  agentTimer: ReturnType<typeof setTimeout> | null;
  t: { dispatched: number; initStart?: number; initEnd?: number; runStart?: number; runEnd?: number; postrunStart?: number; build: number; eval: number };
  result: SessionResult | null;
  done: Promise<SessionResult>;
  resolveDone: (r: SessionResult) => void;
}

/** A cancelled/timed-out stage surfaces as this (never reported as an error text). */
class StageAborted extends Error {}

export class GatewayNode {
  readonly nodeId: string;
  readonly capacity: GatewayCapacity;
  readonly events: EventHub;
  private readonly sessions = new Map<string, Session>();
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
  private heartbeat: ReturnType<typeof setInterval> | null = null;
  private stopping = new AbortController();
  private gatewayUrlValue: string | null;
  /** task_id + script text → its registration with the simulator (failed ones are dropped, so a later session retries). */
  private readonly simScripts = new Map<string, Promise<void>>();

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
    this.clock = opts.clock ?? systemClock;
    this.events = new EventHub(this.clock);
    this.harnesses = opts.harnesses ?? HARNESS_ADAPTERS;
    this.evaluators = opts.evaluators ?? EVALUATORS;
    this.runtimeFactory = opts.runtimeFactory ?? createRuntime;
    this.gatewayUrlValue = opts.gatewayUrl ?? null;
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
      return { session_id: s.id, task_id: s.spec.task.task_id, attempt: s.spec.attempt ?? 0, ...(policy !== undefined ? { policy_version: policy } : {}) };
    },
  };

  /** Start the HTTP server (session API + proxy fallback) and, when configured, rollout registration + heartbeats. */
  async start(): Promise<void> {
    if (this.server) return;
    this.stopping = new AbortController();
    const proxy = this.opts.proxy?.(this.directory, { adminToken: this.opts.controlPlaneToken ?? null });
    this.server = startSessionServer(this, {
      host: this.opts.host ?? '127.0.0.1', port: this.opts.port ?? 0, token: this.opts.controlPlaneToken ?? null, fallback: proxy?.fetch,
    });
    this.gatewayUrlValue ??= this.url;
    // Network-isolated sandboxes reach this node only through this socket: the model API, none of the session API.
    this.gatewaySocket = await GatewaySocket.open((req, server) => proxy ? proxy.fetch(req, server) : Response.json({ error: 'not found' }, { status: 404 }));
    if (this.opts.rollout) this.startRegistration(this.opts.rollout.url, this.opts.rollout.heartbeatIntervalMs ?? 5000);
  }

  /** Cancel every session, wait for their cleanup and pending callbacks (bounded), stop the server. */
  async stop(): Promise<void> {
    this.stopping.abort(new Error('gateway stopping'));
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    const pending = [...this.sessions.values()].filter((s) => s.stage !== 'done');
    for (const s of pending) this.cancel(s.id);
    await Promise.allSettled(pending.map((s) => s.done));
    await Promise.allSettled([...this.background]);
    this.server?.stop(true);
    this.server = null;
    await this.gatewaySocket?.close();
    this.gatewaySocket = null;
  }

  /**
   * Accept a session (status REGISTERED, queued for INIT by dispatch_priority then FIFO).
   * @throws DispatchError 400 on a bad spec (unknown harness/evaluator, bad runtime), 409 on a known session id.
   */
  dispatch(raw: DispatchSpec): { session_id: string; status: SessionStatus } {
    const parsed = DispatchSchema.safeParse(raw);
    if (!parsed.success) throw new DispatchError(`invalid session spec: ${z.prettifyError(parsed.error)}`, 400);
    const spec = raw;
    if (this.sessions.has(spec.session_id)) throw new DispatchError(`session ${spec.session_id} already exists on node ${this.nodeId}`, 409);
    if (this.stopping.signal.aborted) throw new DispatchError('node is stopping', 503);
    const task = spec.task;
    const harnessName = task.agent.harness ?? 'shell';
    const adapter = this.harnesses[harnessName.replaceAll('-', '_')];
    if (!adapter) throw new DispatchError(`unknown harness ${JSON.stringify(harnessName)}; known: ${Object.keys(this.harnesses).join(', ')}`, 400);
    if (adapter.name === 'shell' && !task.agent.command && typeof task.agent.settings?.command !== 'string') {
      throw new DispatchError('agent needs a harness or a command', 400);
    }
    const evaluator = task.evaluator ? this.evaluators[task.evaluator.strategy] : this.evaluators.session_completed;
    if (evaluator === undefined) throw new DispatchError(`unknown evaluator ${JSON.stringify(task.evaluator?.strategy)}; known: ${Object.keys(this.evaluators).join(', ')}`, 400);
    let runtimeSpec: RuntimeSpec;
    try {
      runtimeSpec = parseRuntimeSpec({ ...this.opts.runtimeDefaults, ...(task.runtime ?? {}) });
    } catch (error) {
      throw new DispatchError((error as Error).message, 400);
    }
    const refresh = task.evaluator?.refresh_runtime === true;
    let resolveDone!: (r: SessionResult) => void;
    const done = new Promise<SessionResult>((r) => { resolveDone = r; });
    const session: Session = {
      spec, id: spec.session_id, order: this.order++, priority: task.dispatch_priority ?? 0, stage: 'queued', status: 'REGISTERED',
      abort: new AbortController(), end: null, runtimeSpec, adapter, evaluator: evaluator ?? null,
      needsDiff: evaluator?.needsDiff(task.evaluator?.config ?? {}, refresh) ?? false,
      runtime: null, evalRuntime: null, launch: null, toolDirs: [], proc: null, harness: null, harnessLog: null, deadlineTimer: null, agentTimer: null,
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
  cancel(sessionId: string): boolean {
    const s = this.sessions.get(sessionId);
    if (!s || s.stage === 'done') return false;
    if (s.end?.kind === 'cancelled') return true;
    s.end = { kind: 'cancelled' };
    s.abort.abort(new StageAborted('cancelled'));
    if (s.stage === 'queued') {
      this.initQueue = this.initQueue.filter((x) => x !== s);
      this.toPostrun(s);
    } else if (s.stage === 'ready') {
      this.readyQueue = this.readyQueue.filter((x) => x !== s);
      this.toPostrun(s);
    }
    return true;
  }

  /** A session's current view, or null when unknown. */
  get(sessionId: string): SessionView | null {
    const s = this.sessions.get(sessionId);
    if (!s) return null;
    return {
      session_id: s.id, task_id: s.spec.task.task_id, sample_index: s.spec.sample_index, attempt: s.spec.attempt ?? 0,
      status: s.status, node_id: this.nodeId, error: s.result?.error ?? null, result: s.result,
    };
  }

  /** Resolves with the SessionResult once the session finished. Throws Error for an unknown session. */
  wait(sessionId: string): Promise<SessionResult> {
    const s = this.sessions.get(sessionId);
    if (!s) throw new Error(`unknown session ${sessionId}`);
    return s.done;
  }

  /** Engine reachability for `GET /health`, or null when the node was given no health source. */
  engineHealth(): EngineHealth | null {
    return this.opts.engineHealth?.() ?? null;
  }

  stageCounts(): StageCounts {
    return {
      queued: this.initQueue.length,
      init: this.initing.size,
      ready: this.readyQueue.length,
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

  private insertByPriority(s: Session): void {
    const at = this.initQueue.findIndex((x) => x.priority < s.priority);
    if (at === -1) this.initQueue.push(s);
    else this.initQueue.splice(at, 0, s);
  }

  /**
   * Move sessions forward as capacity allows. INIT pulls only while the sessions in INIT and READY fit in READY's
   * bound plus the free RUNNING slots, so every session leaving INIT has a place and READY never exceeds its bound.
   */
  private pump(): void {
    const cap = this.capacity;
    while (this.runningSet.size < cap.max_run_workers && this.readyQueue.length > 0) this.startRun(this.readyQueue.shift()!);
    while (
      this.initQueue.length > 0 &&
      this.initing.size < cap.init_workers &&
      this.initing.size + this.readyQueue.length < cap.ready_buffer + (cap.max_run_workers - this.runningSet.size)
    ) this.startInit(this.initQueue.shift()!);
    while (this.postrunQueue.length > 0 && this.postrunning.size < cap.postrun_workers) this.startPostrun(this.postrunQueue.shift()!);
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
  }

  /** The total budget (timeout_seconds) runs from the start of INIT; it aborts whatever stage the session is in. */
  private armDeadline(s: Session): void {
    s.deadlineTimer = setTimeout(() => {
      if (s.end !== null || s.stage === 'done' || s.stage === 'postrun' || s.stage === 'postrun_queued') return;
      s.end = { kind: 'timeout', timeoutKind: 'total' };
      s.abort.abort(new StageAborted('timeout'));
      if (s.stage === 'ready') {
        this.readyQueue = this.readyQueue.filter((x) => x !== s);
        this.toPostrun(s);
      }
    }, s.spec.task.timeout_seconds * 1000);
  }

  private startInit(s: Session): void {
    s.stage = 'init';
    this.initing.add(s);
    s.t.initStart = this.clock();
    this.setStatus(s, 'INITIALIZING');
    this.armDeadline(s);
    const job = this.initSession(s).then(
      () => {
        s.t.initEnd = this.clock();
        this.initing.delete(s);
        if (s.end !== null) return this.toPostrun(s);
        s.stage = 'ready';
        this.readyQueue.push(s);
        this.setStatus(s, 'READY');
        this.pump();
      },
      (error: unknown) => {
        s.t.initEnd = this.clock();
        if (s.end === null) s.end = { kind: 'error', error: `init failed: ${errorText(error)}` };
        this.toPostrun(s);
      },
    );
    this.track(job);
  }

  private async initSession(s: Session): Promise<void> {
    const signal = s.abort.signal;
    const task = s.spec.task;
    let binPath: string | null = null;
    let installDir: string | null = null;
    await this.registerSimScript(task, signal);
    const pkg = s.adapter.package;
    if (pkg) {
      const cacheDir = this.opts.harnessCacheDir ?? defaultHarnessCache();
      const paths = harnessPaths(cacheDir, pkg);
      if (!paths.installed && this.opts.autoInstallHarness === false) throw new Error(`harness ${s.adapter.name} is not installed (run \`polar harness install ${s.adapter.name}\`)`);
      binPath = paths.installed ? paths.bin : await raceAbort(installHarness(pkg, { cacheDir, log: this.opts.log }), signal);
      installDir = paths.nodeModules;
      s.toolDirs = [paths.binDir];
    }
    const runtime = this.runtimeFactory(s.runtimeSpec, { instanceKey: s.id, workRoot: this.opts.workRoot, toolDirs: s.toolDirs, gateway: this.gatewayEndpoint() });
    s.runtime = runtime;
    await runtime.start(signal);
    signal.throwIfAborted();
    await runPrepare(runtime, s.runtimeSpec.prepare, signal);
    if (s.needsDiff) await commitBaseline(runtime, signal);
    const launch = s.adapter.launch({
      sessionId: s.id, instruction: task.instruction, modelName: task.agent.model_name, gatewayUrl: this.gatewayUrl(),
      home: runtime.homeDir, workDir: runtime.workDir, binPath, installDir, settings: task.agent.settings ?? {}, command: task.agent.command,
    });
    for (const file of launch.files) await runtime.writeFile(file.path, file.content);
    for (const link of launch.links ?? []) {
      const r = await runtime.exec(['sh', '-c', 'mkdir -p "$(dirname "$1")" && ln -sfn "$0" "$1"', link.target, link.path], { signal });
      if (r.exitCode !== 0) throw new Error(`linking ${link.path} failed: ${r.stderr.trim()}`);
    }
    s.launch = launch;
  }

  /**
   * Send the task's behaviour script to the simulator (once per task and script; concurrent sessions share the call),
   * so tasks submitted from anywhere behave as scripted. Throws Error when the simulator refuses it or is unreachable.
   */
  private registerSimScript(task: TaskRequest, signal: AbortSignal): Promise<void> {
    const script = task.metadata?.sim_script;
    const base = this.opts.simUrl?.replace(/\/+$/, '');
    if (!base || script === undefined || script === null) return Promise.resolve();
    const key = `${task.task_id}\n${JSON.stringify(script)}`;
    let registration = this.simScripts.get(key);
    if (!registration) {
      const doFetch = this.opts.fetch ?? fetch;
      registration = (async () => {
        const response = await doFetch(`${base}/sim/scripts`, {
          method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task_id: task.task_id, script }),
          signal: AbortSignal.timeout(30_000),
        }).catch((error: unknown) => {
          throw new Error(`cannot reach the simulator at ${base} to register the behaviour script of task ${task.task_id}: ${errorText(error)}`);
        });
        const text = await response.text();
        if (!response.ok) throw new Error(`the simulator at ${base} refused the behaviour script of task ${task.task_id} (HTTP ${response.status}): ${text.slice(0, 500)}`);
      })();
      this.simScripts.set(key, registration);
      registration.catch(() => this.simScripts.delete(key));
    }
    return raceAbort(registration, signal);
  }

  private gatewaySocket: GatewaySocket | null = null;

  /** The node as a sandbox reaches it: the port of the harnesses' base URL, tunnelled to the node's Unix socket. */
  private gatewayEndpoint(): { port: number; socket: string } | null {
    if (!this.gatewaySocket) return null;
    const port = Number(new URL(this.gatewayUrl()).port || 80);
    return { port, socket: this.gatewaySocket.path };
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
      s.evalRuntime = this.prepareFreshRuntime(s);
      s.evalRuntime.catch(() => {}); // reported when the evaluator asks for it
    }
    const job = this.runHarness(s).then(
      () => { s.t.runEnd = this.clock(); this.toPostrun(s); },
      (error: unknown) => {
        s.t.runEnd = this.clock();
        if (s.end === null) s.end = { kind: 'error', error: `run failed: ${errorText(error)}` };
        this.toPostrun(s);
      },
    );
    this.track(job);
  }

  private async runHarness(s: Session): Promise<void> {
    const runtime = s.runtime!;
    const launch = s.launch!;
    if (s.abort.signal.aborted) return;
    // The agent's own env first: the adapter's base URL and key must win, or nothing is captured.
    const proc = runtime.spawn(launch.argv, { env: { ...(s.spec.task.agent.env ?? {}), ...launch.env }, closeStdin: true });
    s.proc = proc;
    const onAbort = () => void proc.kill();
    s.abort.signal.addEventListener('abort', onAbort, { once: true });
    try {
      const { exitCode } = await proc.exited;
      const run = { exitCode, stdout: proc.stdout(), stderr: proc.stderr() };
      const killed = s.abort.signal.aborted;
      const outcome: HarnessOutcome = killed ? { success: false, reason: 'killed' } : s.adapter.outcome(run);
      s.harness = { exitCode, outcome };
      this.keepHarnessLog(s, run, outcome);
      // A CLI that reported failure did not do the task: the session is ERROR (never trained on, ARCHITECTURE §4),
      // with the output tail in the error so the cause is visible. A kill (timeout, cancel) already set s.end.
      if (!killed && !outcome.success && s.end === null) s.end = { kind: 'error', error: harnessFailureError(s.adapter.name, run, outcome) };
    } finally {
      s.abort.signal.removeEventListener('abort', onAbort);
    }
  }

  private keepHarnessLog(s: Session, run: { exitCode: number | null; stdout: string; stderr: string }, outcome: HarnessOutcome): void {
    const dir = this.opts.harnessLogDir === undefined ? join(this.opts.workRoot, 'harness-logs') : this.opts.harnessLogDir;
    if (dir === null) return;
    try {
      s.harnessLog = writeHarnessLog(dir, {
        sessionId: s.id, taskId: s.spec.task.task_id, sampleIndex: s.spec.sample_index, harness: s.adapter.name, command: s.launch?.argv[0] ?? '',
      }, run, outcome);
    } catch (error) {
      this.opts.log?.(`writing the harness log of ${s.id} failed: ${errorText(error)}`);
    }
  }

  /** A second runtime prepared like the session's (prepare actions + baseline), for refresh_runtime evaluators. */
  private async prepareFreshRuntime(s: Session): Promise<Runtime> {
    const runtime = this.runtimeFactory(s.runtimeSpec, { instanceKey: `${s.id}:eval`, workRoot: this.opts.workRoot, toolDirs: s.toolDirs, gateway: this.gatewayEndpoint() });
    try {
      await runtime.start(this.stopping.signal);
      await runPrepare(runtime, s.runtimeSpec.prepare, this.stopping.signal);
      await commitBaseline(runtime, this.stopping.signal);
      return runtime;
    } catch (error) {
      await runtime.stop().catch(() => {});
      throw error;
    }
  }

  private startPostrun(s: Session): void {
    s.stage = 'postrun';
    this.postrunning.add(s);
    s.t.postrunStart = this.clock();
    const job = this.postrun(s)
      .catch((error: unknown) => this.opts.log?.(`postrun of ${s.id} failed unexpectedly: ${errorText(error)}`))
      .finally(() => {
        this.postrunning.delete(s);
        this.pump();
      });
    this.track(job);
  }

  private async postrun(s: Session): Promise<void> {
    const task = s.spec.task;
    let status: SessionResult['status'] = s.end === null ? 'COMPLETED' : s.end.kind === 'timeout' ? 'TIMEOUT' : 'ERROR';
    let error: string | null = s.end === null ? null : s.end.kind === 'cancelled' ? 'cancelled' : s.end.kind === 'error' ? s.end.error : `${s.end.timeoutKind === 'agent' ? 'agent_timeout' : 'timeout_seconds'} exceeded`;
    const harnessName = task.agent.harness ?? 'shell';
    let trajectory: Trajectory;
    try {
      this.setStatus(s, 'BUILDING');
      const buildStart = this.clock();
      const records = this.opts.store.completions.listBySession(s.id);
      trajectory = buildTrajectory(records, {
        strategy: task.builder.strategy, eotIds: this.opts.eotIds, session_id: s.id, task_id: task.task_id, harness: harnessName,
        status, ...(s.end?.kind === 'timeout' ? { timeoutKind: s.end.timeoutKind } : {}),
        // Only this dispatch's calls: a killed or re-dispatched earlier attempt of the same session id left its own.
        attempt: s.spec.attempt ?? 0,
      });
      s.t.build = this.clock() - buildStart;
      let evaluation: EvaluationResult = { outcome_reward: 0, details: { skipped: `session ${status}` } };
      if (status === 'COMPLETED' && s.evaluator && s.runtime) {
        this.setStatus(s, 'EVALUATING');
        const evalStart = this.clock();
        try {
          evaluation = await this.evaluate(s, s.evaluator, s.runtime);
        } catch (evalError) {
          status = 'ERROR';
          error = s.end?.kind === 'cancelled' ? 'cancelled' : `evaluation failed: ${errorText(evalError)}`;
          trajectory = { ...trajectory, status: 'ERROR' };
          evaluation = { outcome_reward: 0, details: { error } };
        }
        s.t.eval = this.clock() - evalStart;
      }
      trajectory = applyRewards(trajectory, evaluation);
      trajectory.metadata.harness_outcome = s.harness
        ? { exit_code: s.harness.exitCode, ...s.harness.outcome, ...(s.harnessLog !== null ? { log: s.harnessLog } : {}) }
        : null;
    } catch (buildError) {
      status = 'ERROR';
      error = `building the trajectory failed: ${errorText(buildError)}`;
      trajectory = emptyTrajectory(error);
      trajectory.metadata.attempt = s.spec.attempt ?? 0;
    }
    await this.teardown(s);
    if (s.end?.kind === 'cancelled' && (status !== 'ERROR' || error !== 'cancelled')) {
      // Cancelled while in POSTRUN: whatever was evaluated, the session ends as ERROR "cancelled" (untrainable).
      status = 'ERROR';
      error = 'cancelled';
      trajectory = applyRewards({ ...trajectory, status: 'ERROR' }, { outcome_reward: 0, details: { cancelled: true } });
    }
    const now = this.clock();
    const result: SessionResult = { session_id: s.id, task_id: task.task_id, status, trajectory, timing: this.timing(s, now), node_id: this.nodeId, error };
    try {
      this.opts.store.results.put(result);
    } catch (storeError) {
      this.opts.log?.(`storing the result of ${s.id} failed: ${errorText(storeError)}`);
    }
    s.result = result;
    s.stage = 'done';
    this.setStatus(s, status);
    for (const cb of this.resultListeners) {
      try { cb(result); } catch { /* listeners must not break delivery */ }
    }
    const callbackUrl = s.spec.callback_url ?? task.callback_url;
    if (callbackUrl) this.track(this.deliver(callbackUrl, result));
    s.resolveDone(result);
  }

  private async evaluate(s: Session, evaluator: Evaluator, runtime: Runtime): Promise<EvaluationResult> {
    const signal = s.abort.signal;
    let diff: Promise<string> | null = null;
    return evaluator.evaluate({
      task: s.spec.task,
      config: s.spec.task.evaluator?.config ?? {},
      runtime,
      harness: s.harness,
      signal,
      diff: () => (diff ??= sessionDiff(runtime, signal)),
      freshRuntime: () => (s.evalRuntime ??= this.prepareFreshRuntime(s)),
    });
  }

  /** Stop the session and evaluation runtimes; always runs, never throws (failures are logged). */
  private async teardown(s: Session): Promise<void> {
    const timeout = this.opts.teardownTimeoutMs ?? 60_000;
    const stops: Promise<void>[] = [];
    if (s.proc) stops.push(s.proc.kill().catch(() => {}));
    if (s.runtime) stops.push(s.runtime.stop());
    if (s.evalRuntime) stops.push(s.evalRuntime.then((r) => r.stop(), () => {}));
    const results = await Promise.allSettled(stops.map((p) => raceTimeout(p, timeout)));
    for (const r of results) if (r.status === 'rejected') this.opts.log?.(`teardown of ${s.id}: ${errorText(r.reason)}`);
  }

  private timing(s: Session, now: number): SessionTiming {
    const t = s.t;
    const span = (a?: number, b?: number) => (a !== undefined && b !== undefined ? Math.max(0, b - a) : 0);
    return {
      init_ms: span(t.initStart, t.initEnd),
      ready_queue_ms: span(t.initEnd, t.runStart),
      run_ms: span(t.runStart, t.runEnd),
      postrun_ms: span(t.postrunStart, now),
      build_ms: t.build,
      eval_ms: t.eval,
      e2e_ms: Math.max(0, now - t.dispatched),
    };
  }

  private async deliver(url: string, result: SessionResult): Promise<void> {
    try {
      await postWithRetry(url, result, { ...this.opts.callbackRetry, token: this.opts.controlPlaneToken, fetch: this.opts.fetch, signal: this.stopping.signal });
    } catch (error) {
      this.opts.log?.(`callback for ${result.session_id} to ${url} failed: ${errorText(error)}`);
    }
  }

  private track(p: Promise<unknown>): void {
    this.background.add(p);
    void p.finally(() => this.background.delete(p));
  }

  // ── rollout registration ─────────────────────────────────────────────────────────────────────────────────────

  private startRegistration(server: string, intervalMs: number): void {
    const base = server.replace(/\/+$/, '');
    const url = this.opts.publicUrl ?? this.url;
    const register = () => postWithRetry(`${base}/nodes/register`, { node_id: this.nodeId, url, capacity: this.capacity }, {
      attempts: 1_000_000, baseDelayMs: 500, maxDelayMs: 10_000, token: this.opts.controlPlaneToken, fetch: this.opts.fetch, signal: this.stopping.signal,
    });
    let registered = false;
    this.track(register().then(() => { registered = true; }, (error) => {
      if (!this.stopping.signal.aborted) this.opts.log?.(`registration with ${base} failed: ${errorText(error)}`);
    }));
    this.heartbeat = setInterval(() => {
      if (!registered) return;
      const doFetch = this.opts.fetch ?? fetch;
      void doFetch(`${base}/nodes/${encodeURIComponent(this.nodeId)}/heartbeat`, {
        method: 'POST', headers: controlPlaneHeaders(this.opts.controlPlaneToken), body: JSON.stringify({ stages: this.stageCounts(), sessions: Object.fromEntries([...this.sessions.values()].map((x) => [x.id, x.status])) }), signal: AbortSignal.timeout(Math.max(1000, intervalMs)),
      }).then(async (response) => {
        await response.body?.cancel();
        // A server that forgot us (restart, drain) gets a fresh registration.
        if (response.status === 404) {
          registered = false;
          this.track(register().then(() => { registered = true; }, () => {}));
        }
      }, (error) => this.opts.log?.(`heartbeat to ${base} failed: ${errorText(error)}`));
    }, intervalMs);
  }
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function emptyTrajectory(reason: string): Trajectory {
  return {
    status: 'ERROR',
    traces: [],
    metadata: {
      reconstruction_stats: { completions: 0, chains: 0, merged: 0, breaks: {} },
      evaluation: null,
      training_filter: { trainable: false, reasons: [reason] },
    },
  };
}

function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  return Promise.race([p, new Promise<never>((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  })]);
}

function raceTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms); })])
    .finally(() => clearTimeout(timer));
}

