/**
 * `swebench_harness`: apply the session's diff in a fresh runtime, then run every FAIL_TO_PASS and PASS_TO_PASS test.
 * Config: `{FAIL_TO_PASS: string[], PASS_TO_PASS: string[], test_command?: string (with {{TEST}} replaced by the
 * shell-quoted test id; without it each entry is itself a command), timeout_s?: number (per test, default 900)}`.
 * Reward 1 only when every FAIL_TO_PASS test passes and every PASS_TO_PASS test stays green. A test command that cannot
 * run (exit 126/127), is killed by a signal or times out throws: the session ends ERROR with that reason, never reward 0
 * (an evaluator that could not judge says nothing about the patch).
 * Source: SWE-bench evaluation (https://github.com/SWE-bench/SWE-bench, harness/grading.py): resolved = all F2P and P2P pass.
 */
import { z } from 'zod';
import { swebenchHarnessConfigSchema } from '../../core/contracts/index.ts';
import { applyDiff } from '../prepare.ts';
import { shellQuote } from '../harnesses/types.ts';
import type { Evaluator } from './types.ts';

/** The config contract (strict: a misspelt key is an error), shared with the rollout server's submit check. */
const ConfigSchema = swebenchHarnessConfigSchema;

export const swebenchHarnessEvaluator: Evaluator = {
  name: 'swebench_harness',
  needsDiff: () => true,
  async evaluate(ctx) {
    const parsed = ConfigSchema.safeParse(ctx.config);
    if (!parsed.success) throw new Error(`swebench_harness config: ${z.prettifyError(parsed.error)}`);
    const cfg = parsed.data;
    const diff = await ctx.diff();
    const runtime = await ctx.freshRuntime();
    let applied = true;
    let applyError: string | null = null;
    try {
      await applyDiff(runtime, diff, ctx.signal);
    } catch (error) {
      applied = false;
      applyError = error instanceof Error ? error.message : String(error);
    }
    const run = async (test: string) => {
      const command = cfg.test_command ? cfg.test_command.replaceAll('{{TEST}}', shellQuote(test)) : test;
      const result = await runtime.exec(command, { timeoutMs: cfg.timeout_s * 1000, signal: ctx.signal });
      ctx.signal.throwIfAborted();
      const tail = `${result.stdout}${result.stderr}`.slice(-500).trim();
      if (result.timedOut) throw new Error(`test ${test} timed out after ${cfg.timeout_s} s: ${tail}`);
      if (result.exitCode === null) throw new Error(`test ${test} was killed by a signal: ${tail}`);
      if (result.exitCode === 126 || result.exitCode === 127) {
        throw new Error(`test ${test} could not run (exit ${result.exitCode}: ${result.exitCode === 127 ? 'command not found' : 'not executable'}): ${tail}`);
      }
      return { test, passed: result.exitCode === 0 && !result.timedOut, exit_code: result.exitCode, timed_out: result.timedOut };
    };
    const failToPass = [];
    const passToPass = [];
    if (applied) {
      for (const test of cfg.FAIL_TO_PASS) failToPass.push(await run(test));
      for (const test of cfg.PASS_TO_PASS) passToPass.push(await run(test));
    }
    const resolved = applied && failToPass.every((t) => t.passed) && passToPass.every((t) => t.passed);
    return {
      outcome_reward: resolved ? 1 : 0,
      details: { resolved, patch_applied: applied, apply_error: applyError, diff_bytes: diff.length, FAIL_TO_PASS: failToPass, PASS_TO_PASS: passToPass },
    };
  },
};
