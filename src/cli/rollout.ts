/**
 * `polar rollout --config FILE`: the rollout server alone (src/rollout/server.ts), for many-host deployments where
 * gateway nodes run as `polar gateway` and register themselves. Refuses (exit 2) a non-loopback `rollout.host` without
 * a control-plane token unless `--insecure-no-token`. Runs until SIGINT/SIGTERM.
 */
import { uploadRootsFromConfig } from './from-config.ts';
import type { Command } from 'commander';
import type { PolarConfig } from '../config/schema.ts';
import { RolloutServer } from '../rollout/server.ts';
import { openStore, type Store } from '../store/index.ts';
import { checkListenSecurity, loadConfigForCli, parsePort, untilSignal } from './common.ts';

/** Start a RolloutServer from the `rollout` and `store` sections; `port` overrides the file. */
export function startRolloutFromConfig(config: PolarConfig, port?: number): { server: RolloutServer; store: Store } {
  const store = openStore(config.rollout.db ?? config.store.path, { checkpoint: 'background' });
  const server = new RolloutServer({
    store,
    host: config.rollout.host,
    port: port ?? config.rollout.port,
    controlPlaneToken: config.rollout.control_plane_token,
    uploadRoots: uploadRootsFromConfig(config.gateway),
    heartbeatTimeoutMs: config.rollout.heartbeat_timeout_s * 1000,
    callbackRetries: config.rollout.callback_retries,
    heartbeatIntervalSeconds: config.gateway.heartbeat_interval_s,
  }).start();
  return { server, store };
}

export function register(program: Command): void {
  program
    .command('rollout')
    .alias('serve_rollout')
    .description('run the rollout server only (task intake, node registry, scheduler, trainer API); gateways register with it (alias: serve_rollout, the Python Polar\'s name)')
    .requiredOption('-c, --config <file>', 'topology file (YAML or JSON)')
    .option('--port <port>', 'listen port (overrides rollout.port; 0 picks a free one)', parsePort)
    .option('--insecure-no-token', 'allow a non-loopback rollout.host without a control-plane token (prints a warning)')
    .action(async (opts: { config: string; port?: number; insecureNoToken?: boolean }) => {
      const config = loadConfigForCli(opts.config);
      checkListenSecurity('polar rollout', [{ key: 'rollout.host', host: config.rollout.host }], {
        token: config.rollout.control_plane_token, insecure: opts.insecureNoToken === true || config.rollout.insecure_no_token,
      });
      const { server, store } = startRolloutFromConfig(config, opts.port);
      console.log(`polar rollout listening on ${server.url}`);
      await untilSignal();
      await server.stop();
      store.close();
    });
}
