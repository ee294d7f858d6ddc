/**
 * `codex` (@openai/codex): only the Responses API; OPENAI_BASE_URL is ignored and the built-in provider can't be
 * overridden, so a `polar` provider goes in `$CODEX_HOME/config.toml`. `codex exec --json` with stdin closed; the
 * `turn.completed` / `turn.failed` events decide. Settings (harness-settings.ts codexSettingsSchema): `reasoning_effort`
 * and `reasoning_summary` become config.toml's `model_reasoning_effort` / `model_reasoning_summary` (codex then sends
 * them as `reasoning: {effort, summary}` on every Responses request); `version` is checked at submit only.
 * Source: docs/protocol-notes.md#harness-clis; https://github.com/openai/codex docs/config.md
 */
import { CODEX_VERSION, parseHarnessSettings } from '../../core/contracts/index.ts';
import { jsonLines, type HarnessAdapter } from './types.ts';

/** TOML basic string (JSON string escapes are valid TOML basic-string escapes for these characters). */
const tomlString = (value: string) => JSON.stringify(value);

export const codexAdapter: HarnessAdapter = {
  name: 'codex',
  package: { name: '@openai/codex', version: CODEX_VERSION, bin: 'codex' },
  launch(ctx) {
    const settings = parseHarnessSettings('codex', ctx.settings);
    const codexHome = `${ctx.home}/.codex`;
    const config = [
      `model = ${tomlString(ctx.modelName)}`,
      'model_provider = "polar"',
      ...(settings.reasoning_effort != null ? [`model_reasoning_effort = ${tomlString(settings.reasoning_effort)}`] : []),
      ...(settings.reasoning_summary != null ? [`model_reasoning_summary = ${tomlString(settings.reasoning_summary)}`] : []),
      'check_for_update_on_startup = false',
      '',
      '[model_providers.polar]',
      'name = "polar"',
      `base_url = ${tomlString(`${ctx.gatewayUrl}/v1`)}`,
      'env_key = "POLAR_API_KEY"',
      'wire_api = "responses"',
      '',
      '[analytics]',
      'enabled = false',
      '',
    ].join('\n');
    return {
      argv: [
        ctx.binPath ?? 'codex', 'exec', '--json', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox',
        '--disable', 'plugins', '--disable', 'remote_plugin', ctx.instruction,
      ],
      env: { CODEX_HOME: codexHome, POLAR_API_KEY: ctx.sessionId },
      files: [{ path: `${codexHome}/config.toml`, content: config }],
    };
  },
  outcome(run) {
    const events = jsonLines(run.stdout);
    const failed = events.find((e) => e.type === 'turn.failed' || e.type === 'error');
    if (failed) {
      const error = failed.error as { message?: string } | undefined;
      return { success: false, reason: `${String(failed.type)}: ${String(error?.message ?? failed.message ?? '').slice(0, 200)}` };
    }
    if (!events.some((e) => e.type === 'turn.completed')) return { success: false, reason: `no turn.completed event (exit ${run.exitCode})` };
    const lastMessage = events
      .filter((e) => e.type === 'item.completed' && (e.item as { type?: string } | undefined)?.type === 'agent_message')
      .at(-1)?.item as { text?: string } | undefined;
    if (run.exitCode !== 0) return { success: false, reason: `turn.completed but exit ${run.exitCode}`, finalText: lastMessage?.text };
    return { success: true, reason: 'turn.completed', finalText: lastMessage?.text };
  },
};
