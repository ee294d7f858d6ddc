/**
 * `kilo` (@kilocode/cli, Kilo Code's CLI: an OpenCode fork shipped as a Bun-compiled binary in a per-platform package):
 * a `polar` openai-compatible provider in the config file named by KILO_CONFIG; model list fetch, auto-update, share,
 * session ingest and telemetry off (KILO_TELEMETRY_LEVEL=off: only `all` turns PostHog on); its own XDG dirs under the
 * session HOME. `run --format json --auto --title polar -- <words…>`: `--auto` approves every permission not denied
 * (without it a bash call in `run` is rejected), and the words follow OpenCode's join rule (see opencode.ts).
 * `error` events or a non-zero exit mean failure, like OpenCode. KILO_SESSION_RETRY_LIMIT (settings.retry_limit, default 2,
 * at least 1) bounds its retries of a failed model call: without it (or at 0) `run` waits for the network for ever.
 * Sources: https://kilo.ai/docs/cli ; checked against @kilocode/cli 7.7.7 (`kilo run --help`, strings of the binary).
 * 7.7.7, not the newest 7.8.1: the registry this project installs from has no @kilocode/cli-linux-x64@7.8.1.
 */
import { parseHarnessSettings } from '../../core/contracts/index.ts';
import { opencodeAdapter, opencodeMessageWords, opencodeProviderConfig, sessionXdgDirs } from './opencode.ts';
import type { HarnessAdapter } from './types.ts';

export const kiloAdapter: HarnessAdapter = {
  name: 'kilo',
  package: { name: '@kilocode/cli', version: '7.7.7', bin: 'kilo' },
  launch(ctx) {
    const settings = parseHarnessSettings('kilo', ctx.settings);
    const xdgConfig = `${ctx.home}/.config`;
    const configPath = `${xdgConfig}/kilo/polar.json`;
    const config = {
      $schema: 'https://app.kilo.ai/config.json',
      ...opencodeProviderConfig(ctx),
    };
    return {
      argv: [ctx.binPath ?? 'kilo', 'run', '--format', 'json', '--auto', '--title', 'polar', '--', ...opencodeMessageWords(ctx.instruction)],
      env: {
        KILO_CONFIG: configPath,
        KILO_DISABLE_MODELS_FETCH: '1',
        KILO_DISABLE_AUTOUPDATE: '1',
        KILO_DISABLE_SHARE: '1',
        KILO_DISABLE_SESSION_INGEST: '1',
        KILO_DISABLE_LSP_DOWNLOAD: '1',
        KILO_DISABLE_CODEBASE_INDEXING: '1',
        KILO_DISABLE_PRESENCE: '1',
        KILO_DISABLE_CLAUDE_CODE: '1',
        KILO_DISABLE_EXTERNAL_SKILLS: '1',
        // Unset, a failed model call is retried every 5 s for ever ("session offline, waiting for network") and `run`
        // never exits; with a limit it prints an `error` event and exits 1.
        KILO_SESSION_RETRY_LIMIT: String(settings.retry_limit),
        KILO_TELEMETRY_LEVEL: 'off',
        POLAR_API_KEY: ctx.sessionId,
        ...sessionXdgDirs(ctx.home),
      },
      files: [{ path: configPath, content: `${JSON.stringify(config, null, 2)}\n` }],
    };
  },
  // Same event stream as OpenCode: `step_finish`, `text`, `error`.
  outcome: opencodeAdapter.outcome,
};
