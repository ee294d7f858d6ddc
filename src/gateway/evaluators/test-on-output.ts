/**
 * `test_on_output`: run a test command and compare with the expectation: `{command, expect_exit_code?: number
 * (default 0 when no output match is given), expect_output?: string (substring of stdout+stderr),
 * expect_output_regex?: string, timeout_s?: number (default 600)}`. Runs in the session's work tree, or with
 * refresh_runtime in a fresh runtime after applying the session's diff (so the agent cannot tamper with the tests'
 * environment). Reward 1 when every given expectation holds, else 0. A command that cannot run (exit 126/127), is
 * killed or times out throws: the session ends ERROR with that reason, never with reward 0.
 */
import { z } from 'zod';
import { testOnOutputConfigSchema } from '../../core/contracts/index.ts';
import { evaluatedRuntime } from './evaluated-runtime.ts';
import type { Evaluator } from './types.ts';

/** The config contract (strict: a misspelt key is an error), shared with the rollout server's submit check. */
const ConfigSchema = testOnOutputConfigSchema;

export const testOnOutputEvaluator: Evaluator = {
  name: 'test_on_output',
  needsDiff: (_config, refresh) => refresh,
  async evaluate(ctx) {
    const parsed = ConfigSchema.safeParse(ctx.config);
    if (!parsed.success) throw new Error(`test_on_output config: ${z.prettifyError(parsed.error)}`);
    const cfg = parsed.data;
    const { runtime, fresh: refresh } = await evaluatedRuntime(ctx);
    const result = await runtime.exec(cfg.command, { timeoutMs: cfg.timeout_s * 1000, signal: ctx.signal });
    const output = `${result.stdout}${result.stderr}`;
    // An evaluation that did not run says nothing about the agent's work: the session fails with the reason instead of
    // scoring 0 (a missing python3 would otherwise silently zero every reward).
    ctx.signal.throwIfAborted();
    const tail = output.trim().slice(-500);
    if (result.timedOut) throw new Error(`test command timed out after ${cfg.timeout_s} s: ${tail}`);
    if (result.exitCode === null) throw new Error(`test command was killed by a signal: ${tail}`);
    if ((result.exitCode === 126 || result.exitCode === 127) && cfg.expect_exit_code !== result.exitCode) {
      throw new Error(`test command could not run (exit ${result.exitCode}: ${result.exitCode === 127 ? 'command not found' : 'not executable'}): ${tail}`);
    }
    const checks: Record<string, boolean> = {};
    const expectExit = cfg.expect_exit_code ?? (cfg.expect_output === undefined && cfg.expect_output_regex === undefined ? 0 : undefined);
    if (expectExit !== undefined) checks.exit_code = result.exitCode === expectExit;
    if (cfg.expect_output !== undefined) checks.output = output.includes(cfg.expect_output);
    if (cfg.expect_output_regex !== undefined) checks.output_regex = new RegExp(cfg.expect_output_regex, 'm').test(output);
    const passed = !result.timedOut && Object.values(checks).every(Boolean);
    return {
      outcome_reward: passed ? 1 : 0,
      details: { exit_code: result.exitCode, timed_out: result.timedOut, checks, fresh_runtime: refresh, output_tail: output.slice(-2000) },
    };
  },
};
