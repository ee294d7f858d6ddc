/**
 * The single-box stack and the one-shot job (ARCHITECTURE.md §1 `polar serve` / `polar run`, issue 8).
 * `startLocalStack` runs a RolloutServer and one GatewayNode (hosting the proxy) in this process; the node registers
 * and heartbeats over HTTP exactly like a remote `polar gateway`, and results come back through the callback route, so
 * the single-box path is the multi-host path. Without an engine the built-in simulator is started too.
 * `runTasks` submits task files as TaskRequests to that stack, reports progress, waits for every task and summarises.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { BuilderName, CompletionRecord } from '../core/records.ts';
import { engineFetchJson } from '../engines/http.ts';
import { createEngineClient, GoldenMismatchError, type CaptureMode, type EngineClient, type EngineKind, type SamplingDefaults } from '../engines/index.ts';
import { GatewayNode, type EngineHealth, type GatewayCapacity } from '../gateway/node.ts';
import { getHarnessAdapter } from '../gateway/harnesses/index.ts';
import { defaultHarnessCache, installHarness } from '../gateway/harnesses/install.ts';
import type { RuntimeSpec } from '../gateway/runtimes/index.ts';
import { createProxyApp } from '../proxy/app.ts';
import type { ProxyOptions } from '../proxy/types.ts';
import { SimServer, type SimServerOptions } from '../sim/server.ts';
import type { Store } from '../store/index.ts';
import type { RunSnapshot } from './run-progress.ts';
import { summarizeRun, type RunSummary } from './run-summary.ts';
import { RolloutServer } from './server.ts';
import { toTaskRequest, type LoadedTask } from './task-file.ts';
import type { SystemMessagePlacement } from '../engines/chat-request.ts';

/** An external engine; absent = start the simulator in-process. */
export interface EngineSpec {
  kind: EngineKind;
  /** Base URL without /v1. */
  url: string;
  mode?: CaptureMode;
  /** Token mode: Hugging Face directory of the served model's tokenizer + chat template (default: embedded Qwen3). */
  tokenizerDir?: string;
  /** Token mode: model family override (default: detected from the chat template). */
  family?: string;
  /** Token mode: serve despite a start-up golden-check mismatch (default false: refuse to start). */
  allowGoldenMismatch?: boolean;
  apiKey?: string;
  servedModel?: string;
  /** Per-call timeout, ms (default 600 000). */
  timeoutMs?: number;
  defaults?: Partial<SamplingDefaults>;
  /** Placement of later system messages (default merge; the built-in simulator's Qwen3 template renders them in place). */
  systemMessages?: SystemMessagePlacement;
}

// ── engine reachability ───────────────────────────────────────────────────────────────────────────────────────

/** One liveness check of an engine; resolves when it answered, throws Error (GatewayError) saying why not. */
export type EngineCheck = () => Promise<void>;

/**
 * A cheap liveness check: `GET {url}/v1/models` (served by vLLM, SGLang, llama.cpp's server, OpenAI and the simulator),
 * with the engine's bearer key, bounded by `timeoutMs` (default 5000 ms).
 * Source: https://platform.openai.com/docs/api-reference/models/list
 */
export function engineLivenessCheck(spec: Pick<EngineSpec, 'kind' | 'url' | 'apiKey'>, timeoutMs = 5000): EngineCheck {
  const base = spec.url.replace(/\/+$/, '');
  const headers: Record<string, string> = spec.apiKey ? { authorization: `Bearer ${spec.apiKey}` } : {};
  return async () => {
    await engineFetchJson(`${base}/v1/models`, { method: 'GET' }, { timeoutMs, headers }, 'GET /v1/models');
  };
}

/**
 * Retry `check` until it succeeds or `timeoutMs` (default 10 000 ms: engines start slowly) has passed, waiting
 * `intervalMs` (default 500 ms) between tries.
 * @throws Error `engine … is unreachable after N s: <last error>` when it never succeeded.
 */
export async function waitForEngine(check: EngineCheck, opts: { describe: string; timeoutMs?: number; intervalMs?: number }): Promise<void> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const started = Date.now();
  for (;;) {
    try {
      await check();
      return;
    } catch (error) {
      const left = started + timeoutMs - Date.now();
      if (left <= 0) {
        const waited = Math.round((Date.now() - started) / 100) / 10;
        throw new Error(`${opts.describe} is unreachable (waited ${waited} s): ${error instanceof Error ? error.message : String(error)}`);
      }
      await Bun.sleep(Math.min(opts.intervalMs ?? 500, left));
    }
  }
}

/**
 * Watches an engine for `GET /health`: one check at `start()` (a warning on `log` when it is down; serving goes on),
 * then every `intervalMs` (default 10 000 ms), logging each change between up and down.
 */
export class EngineHealthMonitor {
  #state: EngineHealth = { ok: false, error: 'not checked yet' };
  #timer: ReturnType<typeof setInterval> | null = null;
  #checking: Promise<void> | null = null;

  constructor(private readonly opts: { check: EngineCheck; describe: string; intervalMs?: number; log?: (line: string) => void }) {}

  /** The last check's result. */
  state(): EngineHealth {
    return { ...this.#state };
  }

  /** Run the first check (logging a warning when the engine is down) and start the periodic ones. */
  async start(): Promise<EngineHealth> {
    await this.checkNow(true);
    this.#timer ??= setInterval(() => void this.checkNow(false), this.opts.intervalMs ?? 10_000);
    this.#timer.unref?.();
    return this.state();
  }

  /** Check once now (concurrent calls share one check). */
  checkNow(first = false): Promise<void> {
    this.#checking ??= this.opts.check().then(
      () => {
        if (!this.#state.ok && !first) this.opts.log?.(`${this.opts.describe} is reachable again`);
        this.#state = { ok: true, error: null };
      },
      (error: unknown) => {
        const message = error instanceof Error ? error.message : String(error);
        if (first || this.#state.ok) {
          this.opts.log?.(`WARNING: ${this.opts.describe} is not reachable: ${message}. Still serving; sessions fail until it answers (GET /health reports engine.ok).`);
        }
        this.#state = { ok: false, error: message };
      },
    ).finally(() => { this.#checking = null; });
    return this.#checking;
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }
}

export interface LocalStackOptions {
  store: Store;
  engine?: EngineSpec | null;
  /** Simulator options when no engine is given (port defaults to 0). */
  sim?: SimServerOptions;
  /** Capture mode with the in-process simulator (default chat); an external engine's comes from its spec. */
  mode?: CaptureMode;
  node: {
    nodeId?: string;
    host?: string;
    /** 0 = a free port (default). */
    port?: number;
    publicUrl?: string;
    capacity?: Partial<GatewayCapacity>;
    workRoot: string;
    harnessCacheDir?: string;
    runtimeDefaults?: Partial<RuntimeSpec>;
  };
  rollout?: { host?: string; port?: number; heartbeatTimeoutMs?: number; tickMs?: number; callbackRetries?: number };
  /** Node heartbeat interval, ms (default 2000). */
  heartbeatIntervalMs?: number;
  controlPlaneToken?: string | null;
  /**
   * Token the proxy's `/admin/*` and completions listing require (default: `controlPlaneToken`; with neither, admin
   * answers loopback callers only, which includes harnesses on this host). With both set, the node's server still
   * checks the control-plane token on those paths first, so a call needs both.
   */
  adminToken?: string | null;
  /** The proxy's options (config `proxy` section via proxyOptionsFromConfig); `adminToken` above wins. */
  proxyOptions?: ProxyOptions;
  /** Called after each CompletionRecord is committed (progress counters). */
  onRecord?: (rec: CompletionRecord) => void;
  /** Interval of engine liveness checks for `GET /health`, ms (default 10 000). */
  engineCheckIntervalMs?: number;
  log?: (line: string) => void;
}

export interface LocalStack {
  server: RolloutServer;
  node: GatewayNode;
  /** The in-process simulator, or null with an external engine. */
  sim: SimServer | null;
  engine: EngineClient;
  /** Engine reachability, as on the node's and the server's `GET /health`. */
  engineHealth: EngineHealthMonitor;
  /** Resolves once the node is registered with the server (it then takes sessions). */
  registered: Promise<void>;
  /** Stop node (cancelling its sessions), server and simulator; the store stays open (the caller owns it). */
  stop(): Promise<void>;
}

/**
 * Start simulator (when no engine), rollout server and one gateway node with the proxy, all in this process.
 * The engine is checked once at start (a warning on `log` when it is down; the stack starts anyway) and then
 * periodically; both `GET /health` documents carry `engine: {ok, error}`. With a `sim` engine (in-process or at a URL)
 * the node registers the tasks' behaviour scripts (`metadata.sim_script`) with it.
 * @throws Error when a port is taken or the engine spec is invalid (unknown kind, bad URL, unsupported mode);
 *   GoldenMismatchError when token mode's start-up golden check fails and `allowGoldenMismatch` is not set.
 */
export async function startLocalStack(opts: LocalStackOptions): Promise<LocalStack> {
  const sim = opts.engine ? null : await SimServer.start({ port: 0, ...opts.sim });
  let engineHealth: EngineHealthMonitor | null = null;
  try {
    // The embedded Qwen3 template renders later system messages in place; another model's template may reject them.
    const engineSpec: EngineSpec = opts.engine ?? { kind: 'sim', url: sim!.url, mode: opts.mode, tokenizerDir: opts.sim?.tokenizerDir, systemMessages: opts.sim?.tokenizerDir ? 'merge' : 'in-place' };
    const engine = createEngineClient({
      kind: engineSpec.kind, url: engineSpec.url, mode: engineSpec.mode ?? 'chat', apiKey: engineSpec.apiKey, tokenizerDir: engineSpec.tokenizerDir,
      family: engineSpec.family, allowGoldenMismatch: engineSpec.allowGoldenMismatch, servedModel: engineSpec.servedModel, timeoutMs: engineSpec.timeoutMs ?? 600_000, defaults: engineSpec.defaults,
      systemMessages: engineSpec.systemMessages,
    });
    engineHealth = new EngineHealthMonitor({
      check: engineLivenessCheck(engineSpec), describe: `engine ${engineSpec.kind} at ${engineSpec.url}`,
      intervalMs: opts.engineCheckIntervalMs, log: opts.log,
    });
    // Probe before serving when the engine is up, so the first calls do not wait for it (see src/cli/gateway.ts).
    // A token-mode golden mismatch refuses to start (every call would train on other tokens than were sampled).
    if ((await engineHealth.start()).ok) {
      await engine.probe().catch((error: unknown) => {
        if (error instanceof GoldenMismatchError) throw error;
        opts.log?.(`engine probe failed (retried on the first call): ${error instanceof Error ? error.message : String(error)}`);
      });
    }
    const server = new RolloutServer({
      store: opts.store, host: opts.rollout?.host ?? '127.0.0.1', port: opts.rollout?.port ?? 0, controlPlaneToken: opts.controlPlaneToken ?? null,
      heartbeatTimeoutMs: opts.rollout?.heartbeatTimeoutMs, tickMs: opts.rollout?.tickMs ?? 250, callbackRetries: opts.rollout?.callbackRetries,
      health: () => ({ engine: engineHealth!.state() }),
    }).start();
    const node = new GatewayNode({
      nodeId: opts.node.nodeId ?? 'local',
      capacity: opts.node.capacity,
      store: opts.store,
      workRoot: opts.node.workRoot,
      harnessCacheDir: opts.node.harnessCacheDir,
      host: opts.node.host ?? '127.0.0.1',
      port: opts.node.port ?? 0,
      publicUrl: opts.node.publicUrl,
      runtimeDefaults: opts.node.runtimeDefaults,
      proxy: (sessions, control) => createProxyApp({
        engine, store: opts.store, sessions, onRecord: opts.onRecord, options: { ...opts.proxyOptions, adminToken: opts.adminToken ?? control.adminToken },
      }),
      rollout: { url: server.url, heartbeatIntervalMs: opts.heartbeatIntervalMs ?? 2000 },
      controlPlaneToken: opts.controlPlaneToken ?? null,
      engineHealth: () => engineHealth!.state(),
      simUrl: engineSpec.kind === 'sim' ? engineSpec.url : null,
      log: opts.log,
    });
    await node.start();
    const registered = new Promise<void>((resolve) => {
      const check = () => (server.listNodes().some((n) => n.node_id === node.nodeId) ? (unsubscribe(), resolve()) : undefined);
      const unsubscribe = server.events.subscribe((e) => { if (e.type === 'node_registered') check(); });
      check();
    });
    const health = engineHealth;
    return {
      server, node, sim, engine, engineHealth: health, registered,
      async stop() {
        health.stop();
        await node.stop();
        await server.stop();
        await sim?.stop();
      },
    };
  } catch (error) {
    engineHealth?.stop();
    await sim?.stop();
    throw error;
  }
}

export interface RunTasksOptions {
  tasks: readonly LoadedTask[];
  /** Harness adapter name (pi, claude_code, codex, qwen_code, gemini_cli, opencode, shell). */
  harness: string;
  /** Shell harness: the command line (`{{INSTRUCTION}}` is replaced). */
  command?: string;
  /** num_samples per task. */
  samples: number;
  /** Model name the harness asks for. */
  modelName: string;
  builder: BuilderName;
  /** Agent settings passed to the adapter (e.g. pi's `api`). */
  settings?: Record<string, unknown>;
  store: Store;
  engine?: EngineSpec | null;
  sim?: SimServerOptions;
  /** Capture mode with the in-process simulator (default chat). */
  mode?: CaptureMode;
  /** Harness runs at once (max_run_workers); INIT and POSTRUN scale with it. */
  concurrency: number;
  workRoot: string;
  harnessCacheDir?: string;
  /** Called about every `progressIntervalMs` (default 500) and once at the end. */
  onProgress?: (snapshot: RunSnapshot) => void;
  progressIntervalMs?: number;
  log?: (line: string) => void;
  /** Wall-clock limit of the whole job, ms (default: none); on expiry unfinished tasks are cancelled. */
  deadlineMs?: number;
  /** How long an external engine may take to answer before the run fails without starting anything, ms (default 10 000). */
  engineWaitMs?: number;
}

export interface RunReport {
  summary: RunSummary;
  taskIds: string[];
  /** Sessions by final status over the whole run. */
  statuses: Record<string, number>;
  /** Sessions whose harness CLI reported a failure (see HarnessSummary.harness_failures). */
  harnessFailures: number;
  /** True when every session ended COMPLETED (its reward may be 0) and no harness CLI reported a failure. */
  allCompleted: boolean;
  final: RunSnapshot;
}

/**
 * Run every task × sample through the local stack and summarise.
 * An external engine is checked first (retried for `engineWaitMs`) so an unreachable one fails the run before any
 * session starts. Behaviour scripts travel in the TaskRequests (`metadata.sim_script`) and the gateway registers them
 * with the simulator; the harness CLI is installed first when missing. A task_id already in the store is not run
 * again: its stored sessions are waited for and reported.
 * @throws Error when the engine is unreachable, the harness is unknown or its install fails, or a task cannot be
 *   turned into a TaskRequest.
 */
export async function runTasks(opts: RunTasksOptions): Promise<RunReport> {
  const startedAt = Date.now();
  const adapter = getHarnessAdapter(opts.harness);
  const requests = opts.tasks.map((loaded) => toTaskRequest(loaded, {
    num_samples: opts.samples,
    agent: {
      harness: adapter.name, model_name: opts.modelName,
      ...(opts.command !== undefined ? { command: opts.command } : {}),
      ...(opts.settings ? { settings: opts.settings } : {}),
    },
    builder: { strategy: opts.builder },
  }));
  if (opts.engine) {
    await waitForEngine(engineLivenessCheck(opts.engine), { describe: `engine ${opts.engine.kind} at ${opts.engine.url}`, timeoutMs: opts.engineWaitMs });
  }
  if (adapter.package) {
    // Installed once, before any session starts, so a registry failure is one clear error and not N session errors.
    await installHarness(adapter.package, { cacheDir: opts.harnessCacheDir ?? defaultHarnessCache(), log: opts.log });
  }
  const counters = { completions: 0, tokens: 0 };
  const n = opts.concurrency;
  const stack = await startLocalStack({
    store: opts.store,
    engine: opts.engine,
    sim: opts.sim,
    mode: opts.mode,
    node: {
      workRoot: opts.workRoot, harnessCacheDir: opts.harnessCacheDir,
      capacity: { max_run_workers: n, init_workers: Math.max(1, Math.min(n, 8)), ready_buffer: Math.min(n, 8), postrun_workers: Math.max(1, Math.min(n, 8)) },
    },
    // Nothing outside this process needs the proxy's admin endpoints during a run, while the harnesses on this host
    // reach its port over loopback: a random token closes them to everyone (pause/version stay in-process only).
    adminToken: randomBytes(24).toString('base64url'),
    onRecord: (rec) => {
      counters.completions++;
      counters.tokens += rec.prompt_ids.length + rec.response_ids.length;
    },
    log: opts.log,
  });
  try {
    const taskIds = requests.map((r) => r.task_id);
    const total = requests.reduce((sum, r) => sum + (opts.store.tasks.get(r.task_id)?.task.num_samples ?? r.num_samples), 0);
    for (const request of requests) stack.server.submit(request);
    // Finished sessions are counted from the server's result events, not by re-reading stored trajectories (large
    // JSON) on every tick; a resumed db seeds the counts once, and the final snapshot reads the store.
    const fromStore = () => {
      const tally = { done: 0, completed: 0, rewardSum: 0, rewardCount: 0 };
      for (const id of taskIds) {
        for (const s of stack.server.taskStatus(id)?.sessions ?? []) {
          if (s.reward !== null) {
            tally.done++;
            tally.rewardSum += s.reward;
            tally.rewardCount++;
          } else if (s.status === 'CANCELLED') tally.done++;
          if (s.status === 'COMPLETED') tally.completed++;
        }
      }
      return tally;
    };
    const live = fromStore();
    const ours = new Set(taskIds);
    const unsubscribe = stack.server.events.subscribe((e) => {
      if (e.type !== 'session_result') return;
      const d = e.data as { task_id: string; status: string; reward: number };
      if (!ours.has(d.task_id)) return;
      live.done++;
      live.rewardSum += d.reward;
      live.rewardCount++;
      if (d.status === 'COMPLETED') live.completed++;
    });
    const snapshot = (tally = live): RunSnapshot => ({
      total, stages: stack.node.stageCounts(), ...tally, completions: counters.completions, tokens: counters.tokens,
    });
    const finished = () => taskIds.every((id) => opts.store.tasks.get(id)?.status !== 'RUNNING');
    const interval = opts.progressIntervalMs ?? 500;
    while (!finished()) {
      if (opts.deadlineMs !== undefined && Date.now() - startedAt > opts.deadlineMs) {
        opts.log?.(`run deadline of ${opts.deadlineMs} ms reached: cancelling unfinished tasks`);
        for (const id of taskIds) if (opts.store.tasks.get(id)?.status === 'RUNNING') await stack.server.cancelTask(id);
        break;
      }
      opts.onProgress?.(snapshot());
      await Bun.sleep(interval);
    }
    unsubscribe();
    const final = snapshot(fromStore());
    opts.onProgress?.(final);
    const busy = stack.sim ? stack.sim.metrics().busyFraction : null;
    const summary = summarizeRun(opts.store, taskIds, { engineBusyFraction: busy, wallMs: Date.now() - startedAt });
    const statuses: Record<string, number> = {};
    for (const h of summary.harnesses) for (const [k, v] of Object.entries(h.statuses)) statuses[k] = (statuses[k] ?? 0) + v;
    const sessions = summary.harnesses.reduce((sum, h) => sum + h.sessions, 0);
    const harnessFailures = summary.harnesses.reduce((sum, h) => sum + h.harness_failures, 0);
    return { summary, taskIds, statuses, harnessFailures, allCompleted: sessions > 0 && (statuses.COMPLETED ?? 0) === sessions && harnessFailures === 0, final };
  } finally {
    await stack.stop();
  }
}

/** Default output directory of a run: `out/polar-run-<UTC timestamp>` under `cwd`. */
export function defaultRunDir(cwd: string, now: Date = new Date()): string {
  return join(cwd, 'out', `polar-run-${now.toISOString().replace(/[:.]/g, '-')}`);
}
