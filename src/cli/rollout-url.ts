/**
 * Which rollout server a client command talks to: `--server URL` / `--rollout-url URL` (the Python Polar's flag), else
 * the `-c/--config` topology's rollout server, in our format or the Python Polar's (converted as by
 * `polar config import`). Loopback stands in for a wildcard listen address.
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { importReferenceTopology } from '../config/import-reference.ts';
import { resolveConfig } from '../config/load.ts';
import { UsageError } from './common.ts';

export interface RolloutUrlOptions {
  server?: string;
  rolloutUrl?: string;
  config?: string;
}

function reachable(host: string): string {
  return host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
}

/** @throws UsageError when none is given, both URLs disagree, or the topology cannot be read. */
export function resolveRolloutUrl(opts: RolloutUrlOptions): string {
  if (opts.server && opts.rolloutUrl && opts.server.replace(/\/+$/, '') !== opts.rolloutUrl.replace(/\/+$/, '')) {
    throw new UsageError('--server and --rollout-url name different servers; give one');
  }
  const explicit = opts.server ?? opts.rolloutUrl;
  if (explicit) return explicit.replace(/\/+$/, '');
  if (!opts.config) throw new UsageError('say which rollout server: --server URL (or --rollout-url URL, or -c TOPOLOGY)');
  let raw: unknown;
  try {
    raw = parseYaml(readFileSync(opts.config, 'utf8'));
  } catch (error) {
    throw new UsageError(`${opts.config}: cannot read: ${(error as Error).message}`);
  }
  try {
    const ours = resolveConfig(raw, { env: {} });
    return `http://${reachable(ours.rollout.host)}:${ours.rollout.port}`;
  } catch {
    try {
      const gateway = importReferenceTopology(raw).config.gateway as { rollout_url: string };
      return gateway.rollout_url;
    } catch (error) {
      throw new UsageError(`${opts.config}: neither a polar config nor a Python Polar topology: ${(error as Error).message}`);
    }
  }
}
