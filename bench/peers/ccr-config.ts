/**
 * claude-code-router 2.0.0 configuration for bench/proxy-peers.ts (docs/protocol-notes.md#peer-gateways): its own HOME, logging off, one
 * provider pointing at the mock engine's full chat path, and `Router.default` naming it (ccr ignores the client's
 * model). With no provider configured ccr listens on all interfaces, so a provider is always written.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Writes `<home>/.claude-code-router/config.json`.
 * @param home a fresh directory used as HOME for the ccr process.
 * @param port the port ccr listens on (127.0.0.1).
 * @param mockUrl base URL of the mock engine, e.g. `http://127.0.0.1:41000` (no path).
 */
export function writeCcrConfig(home: string, port: number, mockUrl: string): void {
  const dir = join(home, '.claude-code-router');
  mkdirSync(dir, { recursive: true });
  const config = {
    LOG: false,
    HOST: '127.0.0.1',
    PORT: port,
    API_TIMEOUT_MS: 600_000,
    Providers: [{ name: 'mock', api_base_url: `${mockUrl}/v1/chat/completions`, api_key: 'bench', models: ['mock'] }],
    Router: { default: 'mock,mock' },
  };
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config, null, 2));
}
