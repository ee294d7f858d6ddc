/** The runtime an evaluator runs its checks in, shared by the evaluators that honour `evaluator.refresh_runtime`. */
import { applyDiff } from '../prepare.ts';
import type { Runtime } from '../runtimes/types.ts';
import type { EvaluationContext } from './types.ts';

/**
 * `{runtime, fresh}`: the session's own runtime (fresh false), or with `evaluator.refresh_runtime: true` a fresh
 * runtime with the session's diff applied (fresh true), so the agent cannot have tampered with the checks'
 * environment. Throws what `ctx.diff`, `ctx.freshRuntime` or `applyDiff` throw (a diff that does not apply, an
 * aborted signal).
 */
export async function evaluatedRuntime(ctx: EvaluationContext): Promise<{ runtime: Runtime; fresh: boolean }> {
  if (ctx.task.evaluator?.refresh_runtime !== true) return { runtime: ctx.runtime, fresh: false };
  const diff = await ctx.diff();
  const runtime = await ctx.freshRuntime();
  await applyDiff(runtime, diff, ctx.signal);
  return { runtime, fresh: true };
}
