/**
 * `custom`: any agent CLI this project has no adapter for, described by its settings (TaskRequest.agent.settings):
 *
 * ```yaml
 * agent:
 *   harness: custom
 *   settings:
 *     command: mycli --yes --prompt {{INSTRUCTION}}      # sh command line; or agent.command
 *     base_url_env: {MYCLI_BASE_URL: /v1}                # variable → path appended to the gateway origin
 *     api_key_env: [MYCLI_API_KEY]                       # variables that get the session id (the harness's key)
 *     model_env: [MYCLI_MODEL]                           # variables that get the model name
 *     env: {MYCLI_TELEMETRY: "0"}                        # further variables ({{…}} placeholders allowed)
 *     files: {.mycli/config.json: '{"model": "{{MODEL}}"}'}  # files under the session HOME ({{…}} allowed)
 * ```
 *
 * Placeholders in `command`, `env` values and `files` contents (in `command` each value is shell-quoted, elsewhere it is
 * as is): `{{INSTRUCTION}}`, `{{MODEL}}`, `{{API_KEY}}`, `{{GATEWAY_URL}}` (origin, no path), `{{HOME}}`, `{{WORK_DIR}}`. Unlike `shell`,
 * which sets a fixed set of OpenAI/Anthropic variable names, `custom` sets exactly the variables named here, so a CLI
 * that reads its own names (or would pick up a stray OPENAI_BASE_URL) is pointed at the gateway deliberately.
 * Success: exit 0 (the CLI's own result format is unknown here; write a wrapper command when exit codes lie).
 * The schema: harness-settings.ts customSettingsSchema.
 * @throws Error naming the settings path when a setting is missing, of the wrong type, or unknown.
 */
import { parseHarnessSettings } from '../../core/contracts/index.ts';
import { shellQuote, type HarnessAdapter, type HarnessContext } from './types.ts';

/** Replace the placeholders in one pass (a value holding `{{…}}` is not expanded again); `quote` wraps each value. */
function fill(template: string, ctx: HarnessContext, quote: (value: string) => string = (v) => v): string {
  const values: Record<string, string> = {
    INSTRUCTION: ctx.instruction, MODEL: ctx.modelName, API_KEY: ctx.sessionId, GATEWAY_URL: ctx.gatewayUrl, HOME: ctx.home, WORK_DIR: ctx.workDir,
  };
  return template.replace(/\{\{([A-Z_]+)\}\}/g, (whole, name: string) => (values[name] === undefined ? whole : quote(values[name])));
}

export const customAdapter: HarnessAdapter = {
  name: 'custom',
  package: null,
  launch(ctx) {
    const settings = parseHarnessSettings('custom', ctx.settings);
    const template = ctx.command ?? settings.command;
    if (!template) throw new Error('harness custom needs agent.command or agent.settings.command');
    const env: Record<string, string> = {};
    for (const [name, value] of Object.entries(settings.env)) env[name] = fill(value, ctx);
    for (const [name, path] of Object.entries(settings.base_url_env)) env[name] = `${ctx.gatewayUrl}${path}`;
    for (const name of settings.api_key_env) env[name] = ctx.sessionId;
    for (const name of settings.model_env) env[name] = ctx.modelName;
    return {
      argv: ['sh', '-c', fill(template, ctx, shellQuote)],
      env,
      files: Object.entries(settings.files).map(([path, content]) => ({ path: `${ctx.home}/${path}`, content: fill(content, ctx) })),
    };
  },
  outcome(run) {
    return run.exitCode === 0 ? { success: true, reason: 'exit 0' } : { success: false, reason: `exit ${run.exitCode}` };
  },
};
