/** `session_completed`: 1.0 when the harness exited 0 and its own result event reported success, else 0.0. */
import type { Evaluator } from './types.ts';

export const sessionCompletedEvaluator: Evaluator = {
  name: 'session_completed',
  needsDiff: () => false,
  async evaluate(ctx) {
    const ok = ctx.harness !== null && ctx.harness.exitCode === 0 && ctx.harness.outcome.success;
    return { outcome_reward: ok ? 1 : 0, details: { exit_code: ctx.harness?.exitCode ?? null, harness: ctx.harness?.outcome ?? null } };
  },
};
