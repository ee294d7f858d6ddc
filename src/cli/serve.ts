/**
 * `polar serve --config FILE` (docs/architecture.md#processes): the single-box default. The rollout server and the first
 * `gateway.nodes` entry run in this process; the node hosts the proxy and registers with the server over HTTP like a
 * remote `polar gateway` would. With `--with-sim` the simulator (config `sim` section) runs in-process too and is the
 * engine, served with the `engine` section's settings (mode, tokenizer, default_sampling, timeout_s, stream,
 * allow_golden_mismatch, system_messages unless auto). Refuses (exit 2) to listen on a non-loopback address without a control-plane token unless
 * `--insecure-no-token`; checks the engine at start-up (a warning when it is down, serving goes on) and reports it in
 * `GET /health` `engine`. The gateway's proxy control endpoints (`/admin/*`, `GET /sessions/{id}/completions`) need
 * the control-plane token when one is set; without one, `/admin/*` answers loopback callers only, which includes
 * harnesses on this host (set a token when the agents are untrusted). Runs until SIGINT/SIGTERM, then stops
 * dispatching, sends the results of finished sessions, interrupts the running ones (their harness process groups end)
 * and exits 0. Nothing is cancelled: the interrupted sessions stay queued in the database as new attempts and the next
 * `polar serve` on it runs them. A second signal exits at once with 130.
 */
import type { Command } from 'commander';
import { startLocalStack } from '../stack/local-stack.ts';
import { existsSync } from 'node:fs';
import { proxyOptionsFromConfig } from '../proxy/types.ts';
import { openStore } from '../store/index.ts';
import { checkListenSecurity, loadConfigForCli, parsePort, untilSignal, UsageError } from './common.ts';
import { engineOutageFromConfig, engineSpecFromConfig, nodeSettingsFromConfig, simEngineFromConfig, uploadRootsFromConfig } from './from-config.ts';
import { assertSandboxAvailable, describeSandbox, sandboxLine } from '../gateway/runtimes/index.ts';
import { collectEngineUrls, engineUrlFields } from './engine-urls.ts';

export function register(program: Command): void {
  program
    .command('serve')
    .description('rollout server + one local gateway node (hosting the proxy) on this box')
    .requiredOption('--config <file>', 'topology file (YAML or JSON)')
    .option('--port <port>', 'rollout server port (overrides rollout.port; 0 picks a free one)', parsePort)
    .option('--with-sim', 'start the simulator from the `sim` section in-process and use it as the engine (engine.url, urls, api_key and served_model are then unused)')
    .option('--insecure-no-token', 'allow non-loopback listen addresses without a control-plane token (prints a warning)')
    .option('--tokenizer <dir>', 'token mode: Hugging Face directory of the served model (overrides engine.tokenizer; with --with-sim the simulator serves it too)')
    .option('--allow-golden-mismatch', 'token mode: start even when our chat template rendering differs from the engine\'s (overrides engine.allow_golden_mismatch)')
    .option('--engine-url <url>', 'engine base URL without /v1 (overrides engine.url and engine.urls); repeat it or separate URLs with commas for replicas', collectEngineUrls)
    .action(async (opts: { config: string; port?: number; withSim?: boolean; insecureNoToken?: boolean; tokenizer?: string; allowGoldenMismatch?: boolean; engineUrl?: string[] }) => {
      const config = loadConfigForCli(opts.config);
      if (opts.engineUrl) {
        if (opts.withSim) throw new UsageError('--engine-url and --with-sim exclude each other (--with-sim uses the in-process simulator as the engine)');
        config.engine = { ...config.engine, ...engineUrlFields(opts.engineUrl) };
      }
      const tokenizerDir = opts.tokenizer ?? config.engine.tokenizer ?? undefined;
      if (tokenizerDir !== undefined && !existsSync(tokenizerDir)) throw new UsageError(`tokenizer directory ${tokenizerDir} does not exist`);
      const nodeConfig = config.gateway.nodes[0]!;
      checkListenSecurity('polar serve', [
        { key: 'rollout.host', host: config.rollout.host },
        { key: 'gateway.nodes[0].host', host: nodeConfig.host },
        ...(opts.withSim ? [{ key: 'sim.host', host: config.sim.host, unguarded: true }] : []),
      ], { token: config.rollout.control_plane_token, insecure: opts.insecureNoToken === true || config.rollout.insecure_no_token });
      const nodeSettings = nodeSettingsFromConfig(nodeConfig);
      try {
        assertSandboxAvailable(nodeSettings.runtimeDefaults);
      } catch (error) {
        throw new UsageError(`polar serve: ${(error as Error).message}`);
      }
      const store = openStore(config.rollout.db ?? config.store.path, { checkpoint: 'background' });
      const sim = config.sim;
      let stack;
      try {
        stack = await startLocalStack({
          store,
          engine: opts.withSim ? null : { ...engineSpecFromConfig(config.engine), tokenizerDir, ...(opts.allowGoldenMismatch === true ? { allowGoldenMismatch: true } : {}) },
          mode: config.engine.mode,
          simEngine: { ...simEngineFromConfig(config.engine), ...(opts.allowGoldenMismatch === true ? { allowGoldenMismatch: true } : {}) },
          sim: {
            host: sim.host, port: sim.port, tokenizerDir: sim.tokenizer ?? tokenizerDir, scriptsDir: sim.scripts ?? undefined,
            prefillTps: sim.prefill_tps, decodeTps: sim.decode_tps, maxConcurrency: sim.max_concurrency, decodeStepPerSeqMs: sim.decode_step_per_seq_ms,
          },
          node: { ...nodeSettings, uploadRoots: uploadRootsFromConfig(config.gateway) },
          rollout: {
            host: config.rollout.host, port: opts.port ?? config.rollout.port,
            heartbeatTimeoutMs: config.rollout.heartbeat_timeout_s * 1000, callbackRetries: config.rollout.callback_retries,
          },
          heartbeatIntervalMs: config.gateway.heartbeat_interval_s * 1000,
          ...engineOutageFromConfig(config.gateway),
          controlPlaneToken: config.rollout.control_plane_token,
          proxyOptions: proxyOptionsFromConfig(config.proxy),
          log: (line) => console.error(`polar serve: ${line}`),
        });
      } catch (error) {
        store.close();
        throw error;
      }
      console.log(`polar serve: rollout server on ${stack.server.url}, gateway ${stack.node.nodeId} on ${stack.node.url}${stack.sim ? `, simulator on ${stack.sim.url}` : ''}`);
      console.log(`polar serve: sandbox: ${sandboxLine(describeSandbox(nodeSettings.runtimeDefaults))}`);
      const signal = await untilSignal();
      console.error(`polar serve: ${signal}: stopping (interrupting running sessions, which the next start runs again; ${signal} again to force)`);
      await stack.stop({ reason: `interrupted: ${signal}` });
      store.close();
    });
}
