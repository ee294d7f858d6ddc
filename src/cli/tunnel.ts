/**
 * `polar tunnel --port P --socket S [-- CMD…]`: the forwarder a network-isolated sandbox uses to reach its gateway
 * node (src/gateway/runtimes/tunnel.ts): listens on 127.0.0.1:P, forwards each connection to the Unix socket S, and
 * runs CMD, exiting with its status; without CMD it forwards until SIGTERM. Runtimes start it; people rarely need to.
 */
import type { Command } from 'commander';
import { parseTunnelArgs, runTunnel } from '../gateway/runtimes/tunnel.ts';
import { UsageError } from './common.ts';

export function register(program: Command): void {
  program
    .command('tunnel')
    .description('inside a sandbox: forward 127.0.0.1:PORT to the gateway socket and run a command (used by the runtimes)')
    .requiredOption('--port <port>', 'loopback TCP port to listen on')
    .requiredOption('--socket <path>', 'Unix socket of the gateway node')
    .argument('[command...]', 'command to run once the port listens (exit status is its own)')
    .allowExcessArguments(false)
    .action(async (command: string[], opts: { port: string; socket: string }) => {
      let parsed;
      try {
        parsed = parseTunnelArgs(['--port', opts.port, '--socket', opts.socket, '--', ...command]);
      } catch (error) {
        throw new UsageError((error as Error).message);
      }
      process.exit(await runTunnel(parsed));
    });
}
