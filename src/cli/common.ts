/**
 * Shared CLI plumbing: exit codes (0 ok, 1 failed work, 2 bad usage), the usage-error type, config loading, the
 * listen-address guard and signal waiting.
 */
import type { Command } from 'commander';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { importReferenceTopology, type ImportedTopology } from '../config/import-reference.ts';
import { ConfigError, formatIssue, loadConfig, resolveConfig } from '../config/load.ts';
import type { PolarConfig } from '../config/schema.ts';
import { getHarnessAdapter, type HarnessAdapter } from '../gateway/harnesses/index.ts';

export class UsageError extends Error {
  override name = 'UsageError';
}

export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

/** Parse a positive integer option, or throw UsageError naming the flag. */
export function parsePositiveInt(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n <= 0) throw new UsageError(`${flag} must be a positive integer, got ${JSON.stringify(value)}`);
    return n;
  };
}

/** The adapter of a `--harness` value (`-` or `_` spelling), or UsageError naming the known ones. */
export function harnessFlag(name: string): HarnessAdapter {
  try {
    return getHarnessAdapter(name);
  } catch (error) {
    throw new UsageError(`--harness: ${(error as Error).message}`);
  }
}

/**
 * Refuse flags that would be silently ignored: UsageError `--a, --b apply <rest>` when the user passed any of `flags`
 * ([option key, flag as typed]) on the command line; defaults do not count.
 * @param verbs the verb for one flag and for several (default `applies` / `apply`).
 * @throws UsageError naming the flags given.
 */
export function refuseGivenFlags(command: Command, flags: readonly (readonly [string, string])[], rest: string, verbs: readonly [string, string] = ['applies', 'apply']): void {
  const given = flags.filter(([key]) => command.getOptionValueSource(key) === 'cli').map(([, flag]) => flag);
  if (given.length > 0) throw new UsageError(`${given.join(', ')} ${given.length === 1 ? verbs[0] : verbs[1]} ${rest}`);
}

/** Parse a port (0 = pick a free one). */
export function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new UsageError(`--port must be 0..65535, got ${JSON.stringify(value)}`);
  return n;
}

/**
 * Load a config file for a serving command (`serve`, `rollout`/`serve_rollout`, `gateway`/`serve_gateway`). A Python
 * Polar topology file is read as `polar config import` converts it, with each of its notes on stderr, so the
 * reference's own command lines work unchanged (`polar config check` stays strict and says how to convert).
 * @throws UsageError (exit 2) listing every issue, of our schema or of the conversion.
 */
export function loadConfigForCli(file: string, log: (line: string) => void = (line) => console.error(line)): PolarConfig {
  try {
    return loadConfig(file);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    const imported = readReferenceTopology(file);
    if (imported === null) throw new UsageError(`invalid config ${file}:\n  ${error.issues.map(formatIssue).join('\n  ')}`);
    log(`polar: ${file} is a Python Polar topology; reading it as \`polar config import ${file}\` converts it`);
    for (const note of imported.notes) log(`polar: note: ${note}`);
    try {
      return resolveConfig(imported.config);
    } catch (converted) {
      if (converted instanceof ConfigError) throw new UsageError(`${file}: the converted config is invalid:\n  ${converted.issues.map(formatIssue).join('\n  ')}`);
      throw converted;
    }
  }
}

/** The file converted as `polar config import` does, or null when it is not a Python Polar topology (or unreadable). */
function readReferenceTopology(file: string): ImportedTopology | null {
  try {
    return importReferenceTopology(parseYaml(readFileSync(file, 'utf8')));
  } catch {
    return null;
  }
}

/** A hint to convert the file when it is a Python Polar topology (`polar config import`), else ''. */
export function referenceHint(file: string): string {
  return readReferenceTopology(file) === null ? '' : `\n${file} is a Python Polar topology: convert it with \`polar config import ${file} -o polar.yaml\` and pass polar.yaml`;
}

/** True for addresses only this machine can reach: 127.0.0.0/8, ::1 (with or without brackets) and `localhost`. */
export function isLoopbackHost(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (h === 'localhost' || h.endsWith('.localhost') || h === '::1' || h === '0:0:0:0:0:0:0:1') return true;
  if (/^::ffff:127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h)) return true;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** One address a command is about to listen on, with the config key that set it. */
export interface Listener {
  /** e.g. `rollout.host`, `gateway.nodes[0].host`. */
  key: string;
  host: string;
  /** True for servers the control-plane token does not guard (the simulator: its /sim/scripts steer the agents). */
  unguarded?: boolean;
}

/**
 * Refuse to expose the control plane without a token: a TaskRequest's prepare actions and harness command run on the
 * gateway host, so a rollout server or gateway node reachable from the network with no control-plane token lets anyone
 * who can reach the port run commands there. Loopback addresses are always allowed.
 * @param command the command name for messages (`polar serve`).
 * @param insecure `--insecure-no-token` or `rollout.insecure_no_token`: listen anyway, after a loud warning on `warn`.
 * @throws UsageError (exit 2) naming the address, its config key and the fixes, when a listener is not loopback, no
 *   token is set and `insecure` is false.
 */
export function checkListenSecurity(
  command: string,
  listeners: readonly Listener[],
  opts: { token: string | null | undefined; insecure: boolean; warn?: (line: string) => void },
): void {
  const exposed = listeners.filter((l) => !isLoopbackHost(l.host) && (!opts.token || l.unguarded));
  if (exposed.length === 0) return;
  const where = exposed.map((l) => `${l.key} = ${l.host}`).join(', ');
  const unguarded = exposed.filter((l) => l.unguarded);
  if (!opts.insecure && unguarded.length > 0) {
    throw new UsageError(
      `${command}: refusing to listen on a non-loopback address (${unguarded.map((l) => `${l.key} = ${l.host}`).join(', ')}) ` +
      'that no control-plane token guards: anyone who can reach it could register behaviour scripts that make the agents run ' +
      'commands. Fix: listen on 127.0.0.1 (other hosts reach the simulator through an SSH tunnel), or pass --insecure-no-token ' +
      '/ set rollout.insecure_no_token: true on a trusted, isolated network.',
    );
  }
  if (!opts.insecure) {
    throw new UsageError(
      `${command}: refusing to listen on a non-loopback address (${where}) without a control-plane token: anyone who can reach ` +
      'it could submit TaskRequests whose prepare actions and harness commands run on this machine. Fix: set ' +
      'rollout.control_plane_token (better: export POLAR_CONTROL_TOKEN, e.g. from /etc/polar/polar.env) on every host, or ' +
      'listen on 127.0.0.1. To run unprotected anyway (trusted, isolated network only) pass --insecure-no-token or set ' +
      'rollout.insecure_no_token: true.',
    );
  }
  const warn = opts.warn ?? ((line: string) => console.error(line));
  const bar = '!'.repeat(100);
  warn(bar);
  warn(`WARNING ${command}: listening on ${where} WITHOUT control-plane token protection (--insecure-no-token).`);
  warn('WARNING anyone who can reach this port can submit tasks that run arbitrary commands on this machine.');
  warn('WARNING set rollout.control_plane_token / POLAR_CONTROL_TOKEN, or listen on 127.0.0.1.');
  warn(bar);
}

/**
 * Resolve when SIGINT or SIGTERM arrives; the caller then shuts down gracefully (cancelling sessions, ending their
 * process groups). A second signal during that shutdown exits at once with 130.
 */
export function untilSignal(): Promise<string> {
  return new Promise((resolve) => {
    const first = (signal: NodeJS.Signals) => {
      process.off('SIGINT', first);
      process.off('SIGTERM', first);
      const force = (again: NodeJS.Signals) => {
        console.error(`${again} again: exiting without waiting for the shutdown to finish`);
        process.exit(130);
      };
      process.once('SIGINT', force);
      process.once('SIGTERM', force);
      resolve(signal);
    };
    process.on('SIGINT', first);
    process.on('SIGTERM', first);
  });
}

/**
 * How the user can run polar again, for hints printed after a command: `npm run polar --` when running from source
 * (`npm start`, `npm run polar`), else the binary as invoked (`polar` when it is on PATH).
 */
export function polarCommand(main: string = Bun.main, execPath: string = process.execPath, path: string = process.env.PATH ?? ''): string {
  if (/\.[cm]?[jt]s$/.test(main)) return 'npm run polar --';
  const dir = execPath.slice(0, execPath.lastIndexOf('/'));
  const name = execPath.slice(execPath.lastIndexOf('/') + 1);
  if (path.split(':').includes(dir)) return name;
  const cwd = process.cwd();
  return execPath.startsWith(`${cwd}/`) ? `./${execPath.slice(cwd.length + 1)}` : execPath;
}
