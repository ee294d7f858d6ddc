/**
 * Types of the gateway node (./node.ts): its options, the views it serves, and the per-session record its stages
 * (./session-stages.ts, ./postrun.ts) share.
 */
import type { GatewayEndpoint, SandboxDescription } from './runtimes/index.ts';
import type { Clock } from '../core/clock.ts';
import { cancelledText, type DispatchSpec, type NodeCapacity, type StageCounts } from '../core/contracts/index.ts';
import type { CompletionRecord, SessionResult, SessionStatus, TaskRequest } from '../core/records.ts';
import type { EngineHealth } from '../engines/health.ts';
import type { SessionDirectory } from '../proxy/types.ts';
import type { RetryPolicy } from './callback.ts';
import type { Evaluator } from './evaluators/types.ts';
import type { HarnessAdapter, HarnessLaunch, HarnessOutcome } from './harnesses/types.ts';
import type { RuntimeFactory, RuntimeSpec } from './runtimes/index.ts';
import type { Runtime, RuntimeProcess } from './runtimes/types.ts';
import type { EventHub } from '../observe/events.ts';

/** A fetch handler as Bun.serve takes it (the proxy the node serves behind its session API). */
export type FetchHandler = (request: Request, server: Bun.Server<undefined>) => Response | Promise<Response>;

/** What the node's HTTP surface (./session-api.ts) calls: the public methods of GatewayNode (./node.ts). */
/** What a gateway node reads of its proxy's metrics (src/observe/proxy-metrics.ts ProxyMetrics). */
export interface ProxyMetricsView {
  registry: import('prom-client').Registry;
  busyFraction?(): number;
  inferencePause?(): { inference_paused: boolean; paused_since: number | null };
}

export interface SessionHost {
  readonly nodeId: string;
  readonly capacity: NodeCapacity;
  readonly events: EventHub;
  dispatch(raw: unknown): { session_id: string; status: SessionStatus };
  /** A session's view; `result: false` spares reading a departed session's result back from the store. */
  get(sessionId: string, opts?: { result?: boolean }): SessionView | null;
  /** The sessions the node knows, filtered (see GatewayNode.list). */
  list(filter?: SessionListFilter): SessionView[];
  cancel(sessionId: string, reason?: string): boolean;
  engineHealth(): EngineHealth | null;
  /** How sessions are contained by default (`GET /health` `sandbox`). */
  sandbox(): SandboxDescription;
  stageCounts(): StageCounts;
  /** Share of the last 60 s with an engine call in flight through this node's proxy, 0..1; null without a proxy. */
  engineBusyFraction(): number | null;
  /** Prometheus exposition of the node (and its proxy). */
  metricsText(): Promise<{ text: string; contentType: string }>;
}

/** Stage sizes (worker pools). */
export type GatewayCapacity = NodeCapacity;
export type { DispatchSpec, EngineHealth, StageCounts };

/** The store repositories the node uses (a subset of src/store `Store`). */
export interface GatewayStore {
  completions: {
    listBySession(sessionId: string): CompletionRecord[];
    /** Records per dispatch attempt (one indexed count, no record decoded; store/completions.ts). */
    attemptCounts(sessionId: string): { attempt: number; completions: number }[];
  };
  results: { put(result: SessionResult): boolean; get(sessionId: string): SessionResult | null };
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

/** `GET /sessions` query: `status` and `task_id` match exactly (null/absent: any); at most `limit` entries. */
export interface SessionListFilter {
  status?: string | null;
  taskId?: string | null;
  limit?: number;
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

export interface GatewayNodeOptions {
  nodeId: string;
  capacity?: Partial<GatewayCapacity>;
  /**
   * `fixed` (default): INIT and READY use `capacity` as given. `auto`: they are sized from observed INIT and RUN times
   * (./pool-sizing.ts), with `capacity.init_workers` and `capacity.ready_buffer` as upper bounds.
   */
  poolSizing?: 'fixed' | 'auto';
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
  proxy?: (sessions: SessionDirectory, control: { adminToken: string | null }) => { fetch: FetchHandler; metrics?: ProxyMetricsView };
  /** Defaults for a task's runtime section (from the node config: kind, image, isolation, binary). */
  /**
   * Directories an upload `src` may lie in (config `gateway.upload_roots`; `polar run` adds its task directories);
   * a dispatch naming another source is refused with 400. Undefined: not checked.
   */
  uploadRoots?: readonly string[];
  runtimeDefaults?: Partial<RuntimeSpec>;
  runtimeFactory?: RuntimeFactory;
  harnesses?: Readonly<Record<string, HarnessAdapter>>;
  evaluators?: Readonly<Record<string, Evaluator>>;
  /** End-of-turn token ids for prefix_merging (default: detected from the records). */
  eotIds?: number[];
  /**
   * Engine reachability as last checked (`GET /health` `engine: {ok, error}`, the heartbeat's `engine_ok`); absent = not
   * reported. While it says down the node starts no queued session (INIT) and no READY one (RUNNING): they wait, up to
   * `engineWaitMs`, then end ERROR; running sessions are left alone.
   */
  engineHealth?: () => EngineHealth;
  /**
   * Check the engine now and return its state (the same monitor as `engineHealth`: `EngineHealthMonitor.checkNow`,
   * which shares a check in flight). The node calls it when a session's INIT or RUN ends in an error and starts no other
   * session until it answers, so an engine that died between two periodic checks does not fail the whole queue; a
   * session whose `beforeSession` hook failed while the check says down goes back to the queue. Absent: only
   * `engineHealth` is read.
   */
  checkEngine?: () => Promise<EngineHealth>;
  /**
   * How long a session waits for a down engine before it ends ERROR (`engine down: …`), ms; config
   * `gateway.engine_wait_s`, default 600 000.
   */
  engineWaitMs?: number;
  /**
   * With `rollout`: how long the engine must have been down for a waiting session (queued, or READY with no harness
   * started and no completion captured) before the node gives it back to the rollout server (`POST
   * /nodes/{id}/handback`), which dispatches it to another node, or here again once the engine is back, as the same
   * session and sample with attempt + 1 and no failed result. A READY one's sandbox is torn down. The server takes
   * nothing back while no other node could run it; those keep waiting here (up to `engineWaitMs`) and are offered again
   * every 10 s. ms; config `gateway.engine_handback_s`, default 60 000; null: never hand back.
   */
  engineHandbackMs?: number | null;
  /** While sessions wait for the engine, how often `engineHealth` is read (no engine call), ms; default 1000. */
  engineWaitPollMs?: number;
  /**
   * Runs at the start of each session's INIT, before the runtime starts; a throw fails the session's INIT with its
   * message. The single-box stack uses it to register a task's behaviour script with the simulator
   * (src/stack/sim-scripts.ts); the node itself knows no engine.
   */
  beforeSession?: (task: TaskRequest, signal: AbortSignal) => Promise<void>;
  /** Register + heartbeat with this rollout server. */
  rollout?: { url: string; heartbeatIntervalMs?: number };
  controlPlaneToken?: string | null;
  callbackRetry?: RetryPolicy;
  /**
   * Finished sessions kept whole in memory (default 256; config `gateway.nodes[].keep_finished_sessions`), most
   * recently finished kept. An older finished session whose result is in `store` and, with a callback URL, was
   * delivered, leaves memory and leaves a small record (the last 65,536): `get` and `wait` answer from it and the
   * stored result (of its own attempt only), `list` carries it without its result, a dispatch of its id is still
   * refused with 409, and its status rides the heartbeat for 10 minutes after it left memory or was last dispatched
   * again. A session whose result could not be stored or delivered stays whole. Without this bound a node kept every
   * trajectory it produced.
   */
  keepFinishedSessions?: number;
  /** Teardown timeout per runtime, ms (default 60 000). */
  teardownTimeoutMs?: number;
  clock?: Clock;
  fetch?: typeof fetch;
  log?: (line: string) => void;
}

export type Stage = 'queued' | 'init' | 'ready' | 'running' | 'postrun_queued' | 'postrun' | 'done';
/** `interrupted`: cancelled because this node is stopping (signal); reported as CANCELLED, not ERROR. */
export type EndReason = { kind: 'cancelled'; reason?: string; interrupted?: boolean } | { kind: 'timeout'; timeoutKind: 'agent' | 'total' } | { kind: 'error'; error: string };

/** A session the node holds, from dispatch to its result. */
export interface Session {
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
  /** When the total budget (`timeout_seconds`) runs out, node clock ms; null before INIT. */
  deadlineAt: number | null;
  /** The budget left while it is paused (waiting in READY for the engine), ms; null when not paused. */
  deadlineLeftMs: number | null;
  /** Since when (node clock ms) the session waits in the queue or READY for a down engine; null when not waiting. */
  engineWaitSince: number | null;
  agentTimer: ReturnType<typeof setTimeout> | null;
  t: { dispatched: number; initStart?: number; initEnd?: number; runStart?: number; runEnd?: number; postrunStart?: number; build: number; eval: number };
  result: SessionResult | null;
  done: Promise<SessionResult>;
  resolveDone: (r: SessionResult) => void;
}

/** What the stage functions need from their node. */
export interface NodeContext {
  readonly nodeId: string;
  readonly opts: GatewayNodeOptions;
  readonly clock: Clock;
  readonly runtimeFactory: RuntimeFactory;
  /** Aborted when the node stops. */
  stopping(): AbortSignal;
  /** Origin harnesses use as their base URL. */
  gatewayUrl(): string;
  /** The node as network-isolated sandboxes reach it (its port and Unix socket); null before start. */
  gatewayEndpoint(): GatewayEndpoint | null;
  setStatus(s: Session, status: SessionStatus): void;
  /** Keep a background job alive until `stop()` awaited it. */
  track(p: Promise<unknown>): void;
  /**
   * A session finished: `stored` when its result is in the store, `delivery` (with a callback URL) resolving true
   * once the rollout server took it. The node may then let it leave memory (keepFinishedSessions).
   */
  finished(s: Session, stored: boolean, delivery: Promise<boolean> | null): void;
  /** Subscribers to finished sessions. */
  resultListeners: ReadonlySet<(r: SessionResult) => void>;
}

/** A cancelled/timed-out stage surfaces as this (never reported as an error text). */
export class StageAborted extends Error {}

/** The error text of a cancelled session: `cancelled`, with the canceller's reason when it gave one. */
export function cancelledError(end: EndReason | null): string {
  return cancelledText(end?.kind === 'cancelled' ? end.reason : undefined);
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  return Promise.race([p, new Promise<never>((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  })]);
}
