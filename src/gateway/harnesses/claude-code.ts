/**
 * `claude_code` (@anthropic-ai/claude-code): ANTHROPIC_BASE_URL is the bare gateway origin (the CLI appends
 * /v1/messages); non-essential traffic off; `-p … --output-format stream-json --verbose`, judged by its `result` event.
 * Setting `allowed_tools`: its `--allowedTools` value (default `Bash,Read,Edit,Write`).
 * Source: docs/protocol-notes.md#harness-clis; https://docs.claude.com/en/docs/claude-code/settings (environment variables).
 */
import { parseHarnessSettings } from '../../core/contracts/index.ts';
import { streamJsonResultOutcome, type HarnessAdapter } from './types.ts';

export const claudeCodeAdapter: HarnessAdapter = {
  name: 'claude_code',
  package: { name: '@anthropic-ai/claude-code', version: '2.1.197', bin: 'claude', js: 'native' },
  launch(ctx) {
    const tools = parseHarnessSettings('claude_code', ctx.settings).allowed_tools;
    return {
      argv: [ctx.binPath ?? 'claude', '-p', ctx.instruction, '--allowedTools', tools, '--output-format', 'stream-json', '--verbose'],
      env: {
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
