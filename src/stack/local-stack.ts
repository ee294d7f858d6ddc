/**
 * The single-box stack (`polar serve`, `polar run`): a RolloutServer and one GatewayNode (hosting the proxy) in this
 * process. The node registers and heartbeats over HTTP exactly like a remote `polar gateway`, and results come back
 * through the callback route, so the single-box path is the multi-host path. Without an engine the built-in simulator is
 * started too, and the node gets the hook that registers each task's behaviour script with it (./sim-scripts.ts).
 */
import { placementLogLine } from '../engines/system-placement.ts';
import { createEngineClient, GoldenMismatchError, type CaptureMode, type EngineClient, type EngineKind, type SamplingDefaults } from '../engines/index.ts';
import type { EngineStreamSetting } from '../engines/types.ts';
import type { SystemMessagePlacement } from '../engines/chat-request.ts';
import { EngineHealthMonitor, engineReplicasLivenessCheck } from '../engines/health.ts';
import type { CompletionRecord } from '../core/records.ts';
import { GatewayNode, type GatewayCapacity } from '../gateway/node.ts';
import { describeSandbox, type RuntimeSpec } from '../gateway/runtimes/index.ts';
import { createProxyApp } from '../proxy/app.ts';
import type { ProxyOptions } from '../proxy/types.ts';
import { RolloutServer } from '../rollout/server.ts';
import { SimServer, type SimServerOptions } from '../sim/server.ts';
import type { Store } from '../store/index.ts';
import { simScriptRegistrar } from './sim-scripts.ts';

/** An external engine; absent = start the simulator in-process. */
export interface EngineSpec {
  kind: EngineKind;
  /** Base URL without /v1. */
  url: string;
  /** Replicas of the engine (two or more: routed with session affinity, engines/replicas.ts; `url` is then ignored). */
  urls?: string[];
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
  systemMessages?: SystemMessagePlacement | 'auto';
  /** Streamed engine calls for streaming clients (default auto). */
  stream?: EngineStreamSetting;
}

/** What an EngineSpec says about serving (not where the engine is), for the in-process simulator. */
export type SimEngineSettings = Partial<Pick<EngineSpec, 'timeoutMs' | 'defaults' | 'stream' | 'systemMessages' | 'allowGoldenMismatch'>>;

export interface LocalStackOptions {
  store: Store;
  engine?: EngineSpec | null;
  /** Simulator options when no engine is given (port defaults to 0). */
  sim?: SimServerOptions;
  /** Capture mode with the in-process simulator (default chat); an external engine's comes from its spec. */
  mode?: CaptureMode;
  /**
   * Serving settings for the in-process simulator's engine client, as for an external engine (`polar serve --with-sim`:
   * the config's `engine` section); absent systemMessages: in place for the embedded Qwen3, else merge.
   */
  simEngine?: SimEngineSettings;
  node: {
    nodeId?: string;
    host?: string;
    /** 0 = a free port (default). */
    port?: number;
    publicUrl?: string;
    capacity?: Partial<GatewayCapacity>;
    /** INIT pool and READY buffer: as given, or sized from observed stage times (GatewayNodeOptions.poolSizing). */
    poolSizing?: 'fixed' | 'auto';
    workRoot: string;
    harnessCacheDir?: string;
    runtimeDefaults?: Partial<RuntimeSpec>;
    /** Where upload sources may lie (checked at submit and at dispatch); undefined = unchecked. */
    uploadRoots?: readonly string[];
    /** Finished sessions kept whole in memory (GatewayNodeOptions.keepFinishedSessions). */
    keepFinishedSessions?: number;
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
  /** How long a session waits for a down engine before it ends ERROR, ms (config `gateway.engine_wait_s`; default 600 000). */
  engineWaitMs?: number;
  /**
   * How long a waiting session's engine is down before the node gives it back to the rollout server, ms, or null for
   * never (config `gateway.engine_handback_s`; default 60 000). The server takes it back only while another node that
   * registered with it could run it.
   */
  engineHandbackMs?: number | null;
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
  /**
   * Stop node, server and simulator; the store stays open (the caller owns it). The node interrupts what it runs (its
   * process groups end; `reason`, e.g. "interrupted: SIGTERM", is logged) after the results of finished sessions went
   * out, and the server queues the interrupted sessions again: nothing is cancelled because we stopped, and the next
   * start on this store runs them as new attempts.
   */
  stop(opts?: { reason?: string }): Promise<void>;
}

/**
 * Start simulator (when no engine), rollout server and one gateway node with the proxy, all in this process.
 * The engine is checked once at start (a warning on `log` when it is down; the stack starts anyway) and then
 * periodically; both `GET /health` documents carry `engine: {ok, error}`. With a `sim` engine (in-process or at a URL)
 * the node registers the tasks' behaviour scripts (`metadata.sim_script`) with it.
 * @throws Error when a port is taken or the engine spec is invalid (unknown kind, bad URL, unsupported mode).
 */
export async function startLocalStack(opts: LocalStackOptions): Promise<LocalStack> {
  const sim = opts.engine ? null : await SimServer.start({ port: 0, ...opts.sim });
  let engineHealth: EngineHealthMonitor | null = null;
  try {
    // The embedded Qwen3 template renders later system messages in place; another model's template may reject them.
    const engineSpec: EngineSpec = opts.engine ?? {
      kind: 'sim', url: sim!.url, mode: opts.mode, tokenizerDir: opts.sim?.tokenizerDir, systemMessages: opts.sim?.tokenizerDir ? 'merge' : 'in-place',
      ...Object.fromEntries(Object.entries(opts.simEngine ?? {}).filter(([, v]) => v !== undefined)),
    };
    const engine = createEngineClient({
      kind: engineSpec.kind, url: engineSpec.url, urls: engineSpec.urls, mode: engineSpec.mode ?? 'chat', apiKey: engineSpec.apiKey, tokenizerDir: engineSpec.tokenizerDir,
      family: engineSpec.family, allowGoldenMismatch: engineSpec.allowGoldenMismatch, servedModel: engineSpec.servedModel, timeoutMs: engineSpec.timeoutMs ?? 600_000, defaults: engineSpec.defaults,
      systemMessages: engineSpec.systemMessages, stream: engineSpec.stream,
    });
    engineHealth = new EngineHealthMonitor({
      check: engineReplicasLivenessCheck(engineSpec), describe: `engine ${engineSpec.kind} at ${engineSpec.urls && engineSpec.urls.length > 0 ? engineSpec.urls.join(', ') : engineSpec.url}`,
      intervalMs: opts.engineCheckIntervalMs, log: opts.log,
    });
    // Probe before serving when the engine is up, so the first calls do not wait for it (see src/cli/gateway.ts).
    // A token-mode golden mismatch refuses to start (every call would train on other tokens than were sampled).
    if ((await engineHealth.start()).ok) {
      await engine.probe().then(
        () => {
          const line = opts.engine ? placementLogLine(engine.probeReport?.() ?? null) : null;
          if (line) opts.log?.(line);
        },
        (error: unknown) => {
          if (error instanceof GoldenMismatchError) throw error;
          opts.log?.(`engine probe failed (retried on the first call): ${error instanceof Error ? error.message : String(error)}`);
        },
      );
    }
    const server = new RolloutServer({
      store: opts.store, host: opts.rollout?.host ?? '127.0.0.1', port: opts.rollout?.port ?? 0, controlPlaneToken: opts.controlPlaneToken ?? null,
      heartbeatTimeoutMs: opts.rollout?.heartbeatTimeoutMs, tickMs: opts.rollout?.tickMs ?? 250, callbackRetries: opts.rollout?.callbackRetries,
      health: () => ({ engine: engineHealth!.state(), sandbox: describeSandbox(opts.node.runtimeDefaults ?? {}) }), heartbeatIntervalSeconds: (opts.heartbeatIntervalMs ?? 2000) / 1000,
      ...(opts.node.uploadRoots ? { uploadRoots: opts.node.uploadRoots } : {}),
    }).start();
    const node = new GatewayNode({
      nodeId: opts.node.nodeId ?? 'local',
      capacity: opts.node.capacity,
      ...(opts.node.poolSizing ? { poolSizing: opts.node.poolSizing } : {}),
      store: opts.store,
      workRoot: opts.node.workRoot,
      harnessCacheDir: opts.node.harnessCacheDir,
      host: opts.node.host ?? '127.0.0.1',
      port: opts.node.port ?? 0,
      publicUrl: opts.node.publicUrl,
      runtimeDefaults: opts.node.runtimeDefaults,
      ...(opts.node.uploadRoots ? { uploadRoots: opts.node.uploadRoots } : {}),
      ...(opts.node.keepFinishedSessions !== undefined ? { keepFinishedSessions: opts.node.keepFinishedSessions } : {}),
      proxy: (sessions, control) => createProxyApp({
        engine, store: opts.store, sessions, onRecord: opts.onRecord, options: { ...opts.proxyOptions, adminToken: opts.adminToken ?? control.adminToken },
      }),
      rollout: { url: server.url, heartbeatIntervalMs: opts.heartbeatIntervalMs ?? 2000 },
      controlPlaneToken: opts.controlPlaneToken ?? null,
      engineHealth: () => engineHealth!.state(),
      checkEngine: () => engineHealth!.checkNow().then(() => engineHealth!.state()),
      ...(opts.engineWaitMs !== undefined ? { engineWaitMs: opts.engineWaitMs } : {}),
      ...(opts.engineHandbackMs !== undefined ? { engineHandbackMs: opts.engineHandbackMs } : {}),
      beforeSession: engineSpec.kind === 'sim' ? simScriptRegistrar(engineSpec.url) : undefined,
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
      async stop(stopOpts: { reason?: string } = {}) {
        health.stop();
        await node.stop(stopOpts.reason ? { reason: stopOpts.reason } : {});
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


