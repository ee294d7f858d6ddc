/**
 * `polar rollout --config FILE`: the rollout server alone (ARCHITECTURE.md §1, §6), for many-host deployments where
 * gateway nodes run as `polar gateway` and register themselves. Runs until SIGINT/SIGTERM.
 */
import type { Command } from 'commander';
import { ConfigError, formatIssue, loadConfig } from '../config/load.ts';
import type { PolarConfig } from '../config/schema.ts';
import { RolloutServer } from '../rollout/server.ts';
import { openStore, type Store } from '../store/index.ts';
import { UsageError, parsePort } from './common.ts';

/** Load a config file; ConfigError becomes a UsageError (exit 2) listing every issue. */
export function loadConfigForCli(file: string): PolarConfig {
  try {
    return loadConfig(file);
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(`invalid config ${file}:\n  ${error.issues.map(formatIssue).join('\n  ')}`);
    throw error;
  }
}

/** Start a RolloutServer from the `rollout` and `store` sections; `port` overrides the file. */
export function startRolloutFromConfig(config: PolarConfig, port?: number): { server: RolloutServer; store: Store } {
  const store = openStore(config.rollout.db ?? config.store.path);
  const server = new RolloutServer({
    store,
    host: config.rollout.host,
    port: port ?? config.rollout.port,
    controlPlaneToken: config.rollout.control_plane_token,
    heartbeatTimeoutMs: config.rollout.heartbeat_timeout_s * 1000,
    callbackRetries: config.rollout.callback_retries,
  }).start();
  return { server, store };
}

/** Resolve when SIGINT or SIGTERM arrives. */
export function untilSignal(): Promise<string> {
  return new Promise((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
}

export function register(program: Command): void {
  program
    .command('rollout')
    .description('run the rollout server only (task intake, node registry, scheduler, trainer API); gateways register with it')
    .requiredOption('--config <file>', 'topology file (YAML or JSON)')
    .option('--port <port>', 'listen port (overrides rollout.port; 0 picks a free one)', parsePort)
    .action(async (opts: { config: string; port?: number }) => {
      const config = loadConfigForCli(opts.config);
      const { server, store } = startRolloutFromConfig(config, opts.port);
      console.log(`polar rollout listening on ${server.url}`);
      await untilSignal();
      await server.stop();
      store.close();
    });
}
