/**
 * `claude_code` (@anthropic-ai/claude-code): ANTHROPIC_BASE_URL is the bare gateway origin (the CLI appends
 * /v1/messages); non-essential traffic off; `-p … --output-format stream-json --verbose`, judged by its `result` event.
 * Settings (harness-settings.ts claudeCodeSettingsSchema): `allowed_tools` (`--allowedTools`, default
 * `Bash,Read,Edit,Write`), `disallowed_tools`, `max_turns`, `reasoning_effort` (`--effort`), `max_budget_usd`,
 * `fallback_model`, `append_system_prompt` (each its flag), `max_thinking_tokens` (MAX_THINKING_TOKENS).
 * Source: docs/protocol-notes.md#harness-clis; https://docs.claude.com/en/docs/claude-code/settings (environment variables).
 */
import { parseHarnessSettings } from '../../core/contracts/index.ts';
import { streamJsonResultOutcome, type HarnessAdapter } from './types.ts';

export const claudeCodeAdapter: HarnessAdapter = {
  name: 'claude_code',
  package: { name: '@anthropic-ai/claude-code', version: '2.1.197', bin: 'claude', js: 'native' },
  launch(ctx) {
    const s = parseHarnessSettings('claude_code', ctx.settings);
    const flags: string[] = [];
    const flag = (name: string, value: string | number | null | undefined) => {
      if (value != null) flags.push(name, String(value));
    };
    flag('--disallowedTools', s.disallowed_tools);
    flag('--max-turns', s.max_turns);
    flag('--effort', s.reasoning_effort);
    flag('--max-budget-usd', s.max_budget_usd);
    flag('--fallback-model', s.fallback_model);
    flag('--append-system-prompt', s.append_system_prompt);
    return {
      argv: [ctx.binPath ?? 'claude', '-p', ctx.instruction, '--allowedTools', s.allowed_tools, ...flags, '--output-format', 'stream-json', '--verbose'],
      env: {
        ...(s.max_thinking_tokens ? { MAX_THINKING_TOKENS: String(s.max_thinking_tokens) } : {}),
        ANTHROPIC_BASE_URL: ctx.gatewayUrl,
        ANTHROPIC_API_KEY: ctx.sessionId,
        ANTHROPIC_MODEL: ctx.modelName,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        // Needed when the sandbox runs as root with permissions bypassed.
        IS_SANDBOX: '1',
      },
      files: [],
    };
  },
  outcome: streamJsonResultOutcome,
};
