/**
 * `polar gateway --config FILE --node-id ID`: one gateway node (session API + proxy on one port) from the config's
 * `gateway.nodes` entry, the `engine`, `proxy` and `store` sections; registers with `gateway.rollout_url` when set.
 * Refuses (exit 2) a non-loopback host without a control-plane token unless `--insecure-no-token`. Checks the engine at
 * start-up (a warning when it is down; the node serves anyway) and reports it in `GET /health` `engine`. With engine
 * kind `sim` it registers each task's `metadata.sim_script` with the simulator at `engine.url` (src/stack/sim-scripts.ts).
 * The proxy's control endpoints (`/admin/*`, `GET /sessions/{id}/completions`) need the control-plane token when one
 * is set; without one, `/admin/*` answers loopback callers only (src/proxy/admin-access.ts).
 * Runs until SIGINT/SIGTERM, then stops taking sessions, interrupts its running sessions (their harness process groups
 * end; nothing is cancelled), sends the results of finished ones (waiting at most 30 s), tells the rollout server it is
 * leaving (`POST /nodes/{id}/leave`: the interrupted sessions are queued again at once, for another node or this one
 * after a restart) and exits 0; a second signal exits at once with 130.
 */
import { placementLogLine } from '../engines/system-placement.ts';
import type { Command } from 'commander';
import { existsSync } from 'node:fs';
import { EngineHealthMonitor, engineReplicasLivenessCheck } from '../engines/health.ts';
import { createEngineClient, GoldenMismatchError } from '../engines/index.ts';
import { GatewayNode } from '../gateway/node.ts';
import { createProxyApp } from '../proxy/app.ts';
import { proxyOptionsFromConfig } from '../proxy/types.ts';
import { simScriptRegistrar } from '../stack/sim-scripts.ts';
import { openStore } from '../store/index.ts';
import { checkListenSecurity, loadConfigForCli, UsageError, untilSignal } from './common.ts';
import { engineOutageFromConfig, engineSpecFromConfig, nodeSettingsFromConfig, uploadRootsFromConfig } from './from-config.ts';
import { assertSandboxAvailable, describeSandbox, sandboxLine } from '../gateway/runtimes/index.ts';
import { collectEngineUrls, engineUrlFields } from './engine-urls.ts';

export function register(program: Command): void {
  program
    .command('gateway')
    .alias('serve_gateway')
    .description('run one gateway node: sessions INIT → READY → RUNNING → POSTRUN, with the proxy on the same port (alias: serve_gateway, the Python Polar\'s name)')
    .requiredOption('-c, --config <file>', 'topology file (YAML or JSON)')
    .option('--node-id <id>', 'which gateway.nodes entry to run (may be left out when there is one)')
    .option('--insecure-no-token', 'allow a non-loopback node host without a control-plane token (prints a warning)')
    .option('--tokenizer <dir>', 'token mode: Hugging Face directory of the served model (overrides engine.tokenizer)')
    .option('--allow-golden-mismatch', 'token mode: start even when our chat template rendering differs from the engine\'s (overrides engine.allow_golden_mismatch)')
    .option('--engine-url <url>', 'engine base URL without /v1 (overrides engine.url and engine.urls); repeat it or separate URLs with commas for replicas', collectEngineUrls)
    .action(async (opts: { config: string; nodeId?: string; insecureNoToken?: boolean; tokenizer?: string; allowGoldenMismatch?: boolean; engineUrl?: string[] }) => {
      const config = loadConfigForCli(opts.config);
      if (opts.engineUrl) config.engine = { ...config.engine, ...engineUrlFields(opts.engineUrl) };
      if (opts.nodeId === undefined) {
        if (config.gateway.nodes.length !== 1) throw new UsageError(`${opts.config} has ${config.gateway.nodes.length} gateway nodes; pass --node-id (one of ${config.gateway.nodes.map((n) => n.node_id).join(', ')})`);
        opts.nodeId = config.gateway.nodes[0]!.node_id;
      }
      const tokenizerDir = opts.tokenizer ?? config.engine.tokenizer ?? undefined;
      if (tokenizerDir !== undefined && !existsSync(tokenizerDir)) throw new UsageError(`tokenizer directory ${tokenizerDir} does not exist`);
      const index = config.gateway.nodes.findIndex((n) => n.node_id === opts.nodeId);
      const nodeConfig = config.gateway.nodes[index];
      if (!nodeConfig) {
        throw new UsageError(`no gateway node ${JSON.stringify(opts.nodeId)} in ${opts.config}; nodes: ${config.gateway.nodes.map((n) => n.node_id).join(', ')}`);
      }
      checkListenSecurity('polar gateway', [{ key: `gateway.nodes[${index}].host`, host: nodeConfig.host }], {
        token: config.rollout.control_plane_token, insecure: opts.insecureNoToken === true || config.rollout.insecure_no_token,
      });
      const store = openStore(config.store.path, { checkpoint: 'background' });
      const spec = engineSpecFromConfig(config.engine);
      if (tokenizerDir !== undefined) spec.tokenizerDir = tokenizerDir;
      if (opts.allowGoldenMismatch === true) spec.allowGoldenMismatch = true;
      const engine = createEngineClient({ ...spec, mode: spec.mode ?? 'chat' });
      const log = (line: string) => console.error(`polar gateway: ${line}`);
      const engineHealth = new EngineHealthMonitor({
        check: engineReplicasLivenessCheck({ kind: config.engine.kind, url: config.engine.url, urls: config.engine.urls, apiKey: config.engine.api_key ?? undefined }),
        describe: `engine ${config.engine.kind} at ${config.engine.urls.length > 0 ? config.engine.urls.join(', ') : config.engine.url}`, log,
      });
      // Probe now when the engine is up: otherwise the first wave of harness calls waits for the probe inside
      // complete(), and that wait shows up as proxy time (bench/scale.ts gateway variant: p99 449 ms).
      // A token-mode golden mismatch refuses to start (exit 1): every call would train on other tokens than were sampled.
      let placement: string | null = null;
      if ((await engineHealth.start()).ok) {
        await engine.probe().then(
          () => {
            placement = placementLogLine(engine.probeReport?.() ?? null);
          },
          (error: unknown) => {
            if (error instanceof GoldenMismatchError) throw error;
            log(`engine probe failed (retried on the first call): ${error instanceof Error ? error.message : String(error)}`);
          },
        );
      }
      try {
        assertSandboxAvailable(nodeSettingsFromConfig(nodeConfig).runtimeDefaults);
      } catch (error) {
        throw new UsageError(`polar gateway: ${(error as Error).message}`);
      }
      const node = new GatewayNode({
        ...nodeSettingsFromConfig(nodeConfig),
        uploadRoots: uploadRootsFromConfig(config.gateway),
        store,
        proxy: (sessions, control) => createProxyApp({ engine, store, sessions, options: { ...proxyOptionsFromConfig(config.proxy), adminToken: control.adminToken } }),
        rollout: config.gateway.rollout_url ? { url: config.gateway.rollout_url, heartbeatIntervalMs: config.gateway.heartbeat_interval_s * 1000 } : undefined,
        controlPlaneToken: config.rollout.control_plane_token,
        engineHealth: () => engineHealth.state(),
        checkEngine: () => engineHealth.checkNow().then(() => engineHealth.state()),
        ...engineOutageFromConfig(config.gateway),
        beforeSession: config.engine.kind === 'sim' ? simScriptRegistrar(config.engine.url) : undefined,
        log,
      });
      await node.start();
      console.log(`polar gateway ${node.nodeId} listening on ${node.url}`);
      // After the listening line, which scripts read first.
      if (placement) console.log(`polar gateway: ${placement}`);
      console.log(`polar gateway: sandbox: ${sandboxLine(describeSandbox(nodeSettingsFromConfig(nodeConfig).runtimeDefaults))}`);
      const signal = await untilSignal();
      console.error(`polar gateway: ${signal}: stopping (interrupting running sessions, which the rollout server runs again; ${signal} again to force)`);
      engineHealth.stop();
      await node.stop({ reason: `interrupted: ${signal}`, graceMs: 30_000 });
      store.close();
    });
}
