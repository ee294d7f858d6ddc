/**
 * `gemini_cli` (@google/gemini-cli): GOOGLE_GEMINI_BASE_URL is the bare origin (the SDK appends /v1beta);
 * `$HOME/.gemini/settings.json` selects API-key auth (without it the CLI exits 41) and turns usage statistics off;
 * `-o stream-json`, judged by its final `{type:"result", status}` event. Setting `sandbox: true` adds `--sandbox`.
 * Sources: docs/protocol-notes.md#harness-clis; https://geminicli.com/docs/cli/headless/
 */
import { parseHarnessSettings } from '../../core/contracts/index.ts';
import { jsonLines, type HarnessAdapter } from './types.ts';

export const geminiCliAdapter: HarnessAdapter = {
  name: 'gemini_cli',
  package: { name: '@google/gemini-cli', version: '0.61.0', bin: 'gemini' },
  launch(ctx) {
    const { sandbox } = parseHarnessSettings('gemini_cli', ctx.settings);
    const settings = { security: { auth: { selectedType: 'gemini-api-key' } }, privacy: { usageStatisticsEnabled: false } };
    return {
      argv: [ctx.binPath ?? 'gemini', '-m', ctx.modelName, '--yolo', ...(sandbox === true ? ['--sandbox'] : []), '-o', 'stream-json', '-p', ctx.instruction],
      env: { GOOGLE_GEMINI_BASE_URL: ctx.gatewayUrl, GEMINI_API_KEY: ctx.sessionId, GEMINI_CLI_TRUST_WORKSPACE: 'true' },
      files: [{ path: `${ctx.home}/.gemini/settings.json`, content: `${JSON.stringify(settings, null, 2)}\n` }],
    };
  },
  outcome(run) {
    const result = jsonLines(run.stdout).filter((e) => e.type === 'result').at(-1);
    if (!result) return { success: false, reason: `no result event (exit ${run.exitCode})` };
    if (result.status !== 'success') {
      const error = result.error as { message?: string } | undefined;
      return { success: false, reason: `result status ${String(result.status)}: ${String(error?.message ?? '').slice(0, 200)}` };
    }
    if (run.exitCode !== 0) return { success: false, reason: `result success but exit ${run.exitCode}` };
    return { success: true, reason: 'result event: success' };
  },
};
