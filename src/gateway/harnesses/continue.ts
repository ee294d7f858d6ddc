/**
 * `continue` (@continuedev/cli, bin `cn`): one `openai` model in a local config.yaml (`--config`), its apiBase the
 * gateway's /v1 and its apiKey the session id; `-p … --auto --format json`: print mode, every tool allowed.
 * State under CONTINUE_GLOBAL_DIR (set inside the session HOME); metrics off with CONTINUE_METRICS_ENABLED=0 and
 * CONTINUE_CLI_ENABLE_TELEMETRY=0. Judged by the `{response, status}` object `--format json` prints, and the exit code.
 * Sources: https://docs.continue.dev/guides/cli , https://docs.continue.dev/reference (config.yaml);
 * checked against @continuedev/cli 1.5.47.
 */
import { jsonLines, type HarnessAdapter } from './types.ts';

export const continueAdapter: HarnessAdapter = {
  name: 'continue',
  package: { name: '@continuedev/cli', version: '1.5.47', bin: 'cn' },
  launch(ctx) {
    const dir = `${ctx.home}/.continue`;
    const configPath = `${dir}/polar.yaml`;
    // JSON is YAML: no YAML writer needed for a fixed shape.
    const config = {
      name: 'polar',
      version: '1.0.0',
      schema: 'v1',
      models: [{
        name: ctx.modelName,
        provider: 'openai',
        model: ctx.modelName,
        apiBase: `${ctx.gatewayUrl}/v1`,
        apiKey: ctx.sessionId,
        roles: ['chat', 'edit', 'apply'],
        capabilities: ['tool_use'],
      }],
    };
    return {
      argv: [ctx.binPath ?? 'cn', '-p', ctx.instruction, '--config', configPath, '--auto', '--format', 'json'],
      env: { CONTINUE_GLOBAL_DIR: dir, CONTINUE_METRICS_ENABLED: '0', CONTINUE_CLI_ENABLE_TELEMETRY: '0' },
      files: [{ path: configPath, content: `${JSON.stringify(config, null, 2)}\n` }],
    };
  },
  outcome(run) {
    // `--format json` prints one object at the end: `{response, status}`; a final answer that is not itself JSON comes
    // wrapped with a `note` saying so. No object (e.g. a config error printed as text) or a non-zero exit: failure.
    const result = jsonLines(run.stdout).filter((e) => 'status' in e && 'response' in e).at(-1);
    const finalText = typeof result?.response === 'string' ? result.response : undefined;
    if (run.exitCode !== 0) {
      // A failed run prints `{"status":"error","message":…}` on stderr instead (e.g. "Connection error." after ~10 s).
      const error = jsonLines(run.stderr).filter((e) => e.status === 'error').at(-1);
      const why = typeof error?.message === 'string' ? error.message : finalText;
      return { success: false, reason: `exit ${run.exitCode}${why ? `: ${why.slice(0, 200)}` : ''}`, finalText };
    }
    if (!result) return { success: false, reason: 'no {response, status} object on stdout (exit 0)' };
    if (result.status !== 'success') return { success: false, reason: `status ${String(result.status)}: ${finalText?.slice(0, 200) ?? ''}`.trim(), finalText };
    return { success: true, reason: 'status success', finalText };
  },
};
