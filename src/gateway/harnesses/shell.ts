/**
 * `shell`: any command line, with `{{INSTRUCTION}}` replaced by the shell-quoted instruction. The command gets the
 * gateway under the common variable names (OpenAI and Anthropic SDK conventions plus POLAR_*). Success = exit 0.
 * The command is `agent.command`, else the one setting, `agent.settings.command`.
 */
import { parseHarnessSettings } from '../../core/contracts/index.ts';
import { shellQuote, type HarnessAdapter } from './types.ts';

export const shellAdapter: HarnessAdapter = {
  name: 'shell',
  package: null,
  launch(ctx) {
    const settings = parseHarnessSettings('shell', ctx.settings);
    const template = ctx.command ?? settings.command;
    if (!template) throw new Error('harness shell needs agent.command (or agent.settings.command)');
    const command = template.replaceAll('{{INSTRUCTION}}', shellQuote(ctx.instruction));
    return {
      argv: ['sh', '-c', command],
      env: {
        POLAR_BASE_URL: ctx.gatewayUrl,
        POLAR_API_KEY: ctx.sessionId,
        POLAR_MODEL: ctx.modelName,
        POLAR_INSTRUCTION: ctx.instruction,
        OPENAI_BASE_URL: `${ctx.gatewayUrl}/v1`,
        OPENAI_API_KEY: ctx.sessionId,
        ANTHROPIC_BASE_URL: ctx.gatewayUrl,
        ANTHROPIC_API_KEY: ctx.sessionId,
      },
      files: [],
    };
  },
  outcome(run) {
    return run.exitCode === 0 ? { success: true, reason: 'exit 0' } : { success: false, reason: `exit ${run.exitCode}` };
  },
};
