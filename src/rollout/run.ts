/**
 * The single-box stack and the one-shot job (ARCHITECTURE.md §1 `polar serve` / `polar run`, issue 8).
 * `startLocalStack` runs a RolloutServer and one GatewayNode (hosting the proxy) in this process; the node registers
 * and heartbeats over HTTP exactly like a remote `polar gateway`, and results come back through the callback route, so
 * the single-box path is the multi-host path. Without an engine the built-in simulator is started too.
 * `runTasks` submits task files as TaskRequests to that stack, reports progress, waits for every task and summarises.
 */
import { join } from 'node:path';
import type { BuilderName, CompletionRecord } from '../core/records.ts';
import { createEngineClient, type CaptureMode, type EngineClient, type EngineKind, type SamplingDefaults } from '../engines/index.ts';
import { GatewayNode, type GatewayCapacity } from '../gateway/node.ts';
import { getHarnessAdapter } from '../gateway/harnesses/index.ts';
import { defaultHarnessCache, installHarness } from '../gateway/harnesses/install.ts';
import type { RuntimeSpec } from '../gateway/runtimes/index.ts';
import { createProxyApp } from '../proxy/app.ts';
import { SimServer, type SimServerOptions } from '../sim/server.ts';
import type { Store } from '../store/index.ts';
import type { RunSnapshot } from './run-progress.ts';
import { summarizeRun, type RunSummary } from './run-summary.ts';
import { RolloutServer } from './server.ts';
import { toTaskRequest, type LoadedTask } from './task-file.ts';

/** An external engine; absent = start the simulator in-process. */
export interface EngineSpec {
  kind: EngineKind;
  /** Base URL without /v1. */
  url: string;
  mode?: CaptureMode;
  /** Token mode: Hugging Face directory of the served model's tokenizer + chat template (default: embedded Qwen3). */
  tokenizerDir?: string;
  apiKey?: string;
  servedModel?: string;
  /** Per-call timeout, ms (default 600 000). */
  timeoutMs?: number;
  defaults?: Partial<SamplingDefaults>;
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
  /** Called after each CompletionRecord is committed (progress counters). */
  onRecord?: (rec: CompletionRecord) => void;
  log?: (line: string) => void;
}

export interface LocalStack {
  server: RolloutServer;
  node: GatewayNode;
  /** The in-process simulator, or null with an external engine. */
  sim: SimServer | null;
  engine: EngineClient;
  /** Resolves once the node is registered with the server (it then takes sessions). */
  registered: Promise<void>;
  /** Stop node (cancelling its sessions), server and simulator; the store stays open (the caller owns it). */
  stop(): Promise<void>;
}

/**
 * Start simulator (when no engine), rollout server and one gateway node with the proxy, all in this process.
 * @throws Error when a port is taken or the engine spec is invalid (unknown kind, bad URL, unsupported mode).
 */
export async function startLocalStack(opts: LocalStackOptions): Promise<LocalStack> {
  const sim = opts.engine ? null : await SimServer.start({ port: 0, ...opts.sim });
  try {
    const engineSpec: EngineSpec = opts.engine ?? { kind: 'sim', url: sim!.url, mode: opts.mode, tokenizerDir: opts.sim?.tokenizerDir };
    const engine = createEngineClient({
      kind: engineSpec.kind, url: engineSpec.url, mode: engineSpec.mode ?? 'chat', apiKey: engineSpec.apiKey, tokenizerDir: engineSpec.tokenizerDir,
      servedModel: engineSpec.servedModel, timeoutMs: engineSpec.timeoutMs ?? 600_000, defaults: engineSpec.defaults,
    });
    const server = new RolloutServer({
      store: opts.store, host: opts.rollout?.host ?? '127.0.0.1', port: opts.rollout?.port ?? 0, controlPlaneToken: opts.controlPlaneToken ?? null,
      heartbeatTimeoutMs: opts.rollout?.heartbeatTimeoutMs, tickMs: opts.rollout?.tickMs ?? 250, callbackRetries: opts.rollout?.callbackRetries,
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
      proxy: (sessions) => createProxyApp({ engine, store: opts.store, sessions, onRecord: opts.onRecord }),
      rollout: { url: server.url, heartbeatIntervalMs: opts.heartbeatIntervalMs ?? 2000 },
      controlPlaneToken: opts.controlPlaneToken ?? null,
      log: opts.log,
    });
    await node.start();
    const registered = new Promise<void>((resolve) => {
      const check = () => (server.listNodes().some((n) => n.node_id === node.nodeId) ? (unsubscribe(), resolve()) : undefined);
      const unsubscribe = server.events.subscribe((e) => { if (e.type === 'node_registered') check(); });
      check();
    });
    return {
      server, node, sim, engine, registered,
      async stop() {
        await node.stop();
        await server.stop();
        await sim?.stop();
      },
    };
  } catch (error) {
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
 * Behaviour scripts of the tasks are registered with the in-process simulator; the harness CLI is installed first
 * when missing. A task_id already in the store is not run again: its stored sessions are waited for and reported.
 * @throws Error when the harness is unknown or its install fails, or a task cannot be turned into a TaskRequest.
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
    onRecord: (rec) => {
      counters.completions++;
      counters.tokens += rec.prompt_ids.length + rec.response_ids.length;
    },
    log: opts.log,
  });
  try {
    if (stack.sim) for (const t of opts.tasks) if (t.simScript) stack.sim.registerScript(t.task.task_id, t.simScript);
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
