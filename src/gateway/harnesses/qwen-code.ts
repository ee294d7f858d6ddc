/**
 * `qwen_code` (@qwen-code/qwen-code): OpenAI Chat through OPENAI_BASE_URL (…/v1); usage statistics off in
 * `$HOME/.qwen/settings.json`; `-o stream-json`. Qwen Code exits 0 even when every call failed, so only its
 * `result` event decides. Source: docs/protocol-notes.md#harness-clis, docs/protocol-notes.md#error-behaviour.
 */
import { streamJsonResultOutcome, type HarnessAdapter } from './types.ts';

export const qwenCodeAdapter: HarnessAdapter = {
  name: 'qwen_code',
  package: { name: '@qwen-code/qwen-code', version: '0.15.10', bin: 'qwen' },
  launch(ctx) {
    return {
      argv: [ctx.binPath ?? 'qwen', '--auth-type', 'openai', '--yolo', '-o', 'stream-json', ctx.instruction],
      env: { OPENAI_BASE_URL: `${ctx.gatewayUrl}/v1`, OPENAI_API_KEY: ctx.sessionId, OPENAI_MODEL: ctx.modelName },
      files: [{ path: `${ctx.home}/.qwen/settings.json`, content: `${JSON.stringify({ privacy: { usageStatisticsEnabled: false } }, null, 2)}\n` }],
    };
  },
  outcome: streamJsonResultOutcome,
};
