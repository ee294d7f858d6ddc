/**
 * `cline` (the Cline CLI, npm `cline`: a Node wrapper that execs a Bun-compiled binary from @cline/cli-linux-x64):
 * an `openai-compatible` provider in `$HOME/.cline/data/settings/providers.json` (the file `cline auth -p openai -k KEY
 * -m MODEL -b URL` writes), base URL the gateway's /v1, key the session id. `--json` prints one JSON event per line;
 * no `-P`/`-m` flags: with them the CLI builds the provider from the flags and drops the stored baseUrl (requests go
 * to api.openai.com). The prompt follows `--` so an instruction starting with `-` is not read as an option. Tools are auto-approved by
 * default in act mode (`--auto-approve true` says so explicitly). CLINE_SESSION_BACKEND_MODE=local: otherwise the
 * CLI starts a detached "hub" daemon (`cline --cline-hub-daemon`, its own session, so it outlives the CLI's process
 * group) and routes the run through it. The last `run_result` event decides: `finishReason` `completed` is success.
 * Telemetry and updates off: `$HOME/.cline/data/settings/global-settings.json` `{"telemetryOptOut": true,
 * "autoUpdateEnabled": false}` (the global settings schema in the binary; `CLINE_GLOBAL_SETTINGS_PATH` would move it).
 * Without it the CLI resolves otel.cline.bot (its OpenTelemetry endpoint) on every run. Feature flags (PostHog at
 * data.cline.bot) are fetched regardless, unless `E2E_TEST=true`: in cline 3.0.65 that variable is read in exactly one
 * place, the choice between the PostHog flag provider and a no-op one. With both the CLI looks up no host at all.
 * Sources: https://docs.cline.bot/cline-cli/overview ; checked against cline 3.0.65 (`cline --help`, `cline auth --help`).
 */
import { jsonLines, type HarnessAdapter } from './types.ts';

/** Cline's global settings for every session: telemetry opted out, auto-update off. */
export const CLINE_GLOBAL_SETTINGS = { telemetryOptOut: true, autoUpdateEnabled: false } as const;

export const clineAdapter: HarnessAdapter = {
  name: 'cline',
  package: { name: 'cline', version: '3.0.65', bin: 'cline', js: 'native' },
  launch(ctx) {
    const providers = {
      version: 1,
      lastUsedProvider: 'openai-compatible',
      modes: {},
      providers: {
        'openai-compatible': {
          settings: { provider: 'openai-compatible', apiKey: ctx.sessionId, model: ctx.modelName, baseUrl: `${ctx.gatewayUrl}/v1` },
          updatedAt: '2026-01-01T00:00:00.000Z',
          tokenSource: 'manual',
        },
      },
    };
    return {
      argv: [ctx.binPath ?? 'cline', '--json', '--auto-approve', 'true', '--', ctx.instruction],
      env: { CLINE_SESSION_BACKEND_MODE: 'local', E2E_TEST: 'true' },
      files: [
        { path: `${ctx.home}/.cline/data/settings/providers.json`, content: `${JSON.stringify(providers, null, 2)}\n` },
        { path: `${ctx.home}/.cline/data/settings/global-settings.json`, content: `${JSON.stringify(CLINE_GLOBAL_SETTINGS, null, 2)}\n` },
      ],
    };
  },
  outcome(run) {
    const result = jsonLines(run.stdout).filter((e) => e.type === 'run_result').at(-1);
    if (!result) return { success: false, reason: `no run_result event (exit ${run.exitCode})` };
    const text = typeof result.text === 'string' ? result.text : undefined;
    const finish = String(result.finishReason ?? '');
    if (finish !== 'completed') return { success: false, reason: `run_result finishReason ${finish}: ${text?.slice(0, 200) ?? ''}`.trim(), finalText: text };
    if (run.exitCode !== 0) return { success: false, reason: `run_result completed but exit ${run.exitCode}`, finalText: text };
    return { success: true, reason: 'run_result: completed', finalText: text };
  },
};
