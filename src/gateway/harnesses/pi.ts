/**
 * `pi` (@mariozechner/pi-coding-agent): a `polar` provider in `$PI_CODING_AGENT_DIR/models.json` whose apiKey names
 * the env var holding the session id; `--mode json` prints every agent event, and the last assistant message's
 * `stopReason` decides success (pi -p alone prints only the final text). Settings (harness-settings.ts piSettingsSchema):
 * `api` or the Python Polar's `api_type` (which of the gateway's dialects pi speaks), `reasoning`, `context_window`,
 * `max_tokens` (its model entry), `compat` (the provider's `compat` switches), `thinking` (its `--thinking` level).
 * Sources: docs/protocol-notes.md#harness-clis; pi docs/models.md, docs/json.md (pi-mono packages/coding-agent).
 */
import { parseHarnessSettings, PI_APIS } from '../../core/contracts/index.ts';
import { jsonLines, type HarnessAdapter } from './types.ts';

export { PI_APIS };
type PiApi = (typeof PI_APIS)[number];

/** The base URL pi wants per API: bare host for Anthropic, /v1 for OpenAI, /v1beta for Gemini. */
export function piBaseUrl(api: PiApi, gatewayUrl: string): string {
  if (api === 'anthropic-messages') return gatewayUrl;
  if (api === 'google-generative-ai') return `${gatewayUrl}/v1beta`;
  return `${gatewayUrl}/v1`;
}

export const piAdapter: HarnessAdapter = {
  name: 'pi',
  package: { name: '@mariozechner/pi-coding-agent', version: '0.73.1', bin: 'pi' },
  launch(ctx) {
    const { api, reasoning, context_window, max_tokens, compat, thinking } = parseHarnessSettings('pi', ctx.settings);
    const agentDir = `${ctx.home}/.pi/agent`;
    const models = {
      providers: {
        polar: {
          baseUrl: piBaseUrl(api, ctx.gatewayUrl),
          api,
          apiKey: 'POLAR_API_KEY',
          ...(compat ? { compat } : {}),
          models: [{
            id: ctx.modelName,
            reasoning,
            contextWindow: context_window,
            maxTokens: max_tokens,
          }],
        },
      },
    };
    return {
      argv: [
        ctx.binPath ?? 'pi', '--mode', 'json', '--provider', 'polar', '--model', ctx.modelName, '--no-session',
        ...(thinking != null ? ['--thinking', thinking] : []), ctx.instruction,
      ],
      env: {
        PI_CODING_AGENT_DIR: agentDir,
        POLAR_API_KEY: ctx.sessionId,
        PI_OFFLINE: '1',
        PI_SKIP_VERSION_CHECK: '1',
        PI_TELEMETRY: '0',
      },
      files: [{ path: `${agentDir}/models.json`, content: `${JSON.stringify(models, null, 2)}\n` }],
    };
  },
  outcome(run) {
    const events = jsonLines(run.stdout);
    const end = events.filter((e) => e.type === 'agent_end').at(-1);
    if (!end) return { success: false, reason: `no agent_end event (exit ${run.exitCode})` };
    const messages = Array.isArray(end.messages) ? (end.messages as Record<string, unknown>[]) : [];
    const last = messages.filter((m) => m.role === 'assistant').at(-1);
    if (!last) return { success: false, reason: 'agent_end without an assistant message' };
    const content = Array.isArray(last.content) ? (last.content as Record<string, unknown>[]) : [];
    const finalText = content.filter((p) => p.type === 'text').map((p) => String(p.text ?? '')).join('');
    const stop = String(last.stopReason ?? '');
    if (stop === 'error' || stop === 'aborted') {
      return { success: false, reason: `stopReason ${stop}: ${String(last.errorMessage ?? '').slice(0, 200)}`, finalText };
    }
    if (run.exitCode !== 0) return { success: false, reason: `stopReason ${stop} but exit ${run.exitCode}`, finalText };
    return { success: true, reason: `agent_end: stopReason ${stop}`, finalText };
  },
};
