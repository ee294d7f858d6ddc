/**
 * `swebench_harness`: apply the session's diff in a fresh runtime, then the task's `test_patch` (the benchmark's tests,
 * applied after the agent's work so the agent cannot have edited them), run `eval_prepare`, then judge every
 * FAIL_TO_PASS and PASS_TO_PASS test.
 *
 * Config: `{FAIL_TO_PASS: string[], PASS_TO_PASS?: string[], test_patch?: string (unified diff), eval_prepare?: string[]
 * (commands run in order before the tests; one failing ends the evaluation unresolved), timeout_s?: number (default 900)}`
 * and one of two ways to run the tests:
 * - `log_parser: "pytest" | "unittest"` with `run_command?: string` (`{{TESTS}}` replaced by every F2P and P2P id,
 *   shell-quoted; default `python3 -m pytest -rA {{TESTS}}` or `python3 -m unittest -v {{TESTS}}`): one run, each
 *   test's status read from the runner's output (src/gateway/evaluators/test-logs.ts; a test not mentioned fails);
 * - else each test on its own: `test_command` (`{{TEST}}` replaced by the shell-quoted id) or the entry itself as a
 *   command; it passes when it exits 0.
 * Reward 1 only when every FAIL_TO_PASS test passes and every PASS_TO_PASS test stays green.
 * A test command that cannot run (exit 126/127), is killed by a signal or times out throws: the session ends ERROR
 * with that reason, never reward 0 (an evaluator that could not judge says nothing about the patch).
 * Source: SWE-bench evaluation (https://github.com/SWE-bench/SWE-bench, harness/grading.py): resolved = all F2P and P2P pass.
 */
import { z } from 'zod';
import { swebenchHarnessConfigSchema } from '../../core/contracts/index.ts';
import { applyDiff } from '../prepare.ts';
import { shellQuote } from '../harnesses/types.ts';
import { TEST_LOG_PARSERS, parseTestLog, testPassed } from './test-logs.ts';
import type { Evaluator } from './types.ts';

/** The config contract (strict: a misspelt key is an error), shared with the rollout server's submit check. */
const ConfigSchema = swebenchHarnessConfigSchema;

const DEFAULT_RUN: Record<(typeof TEST_LOG_PARSERS)[number], string> = {
  pytest: 'python3 -m pytest -rA {{TESTS}}',
  unittest: 'python3 -m unittest -v {{TESTS}}',
};

export const swebenchHarnessEvaluator: Evaluator = {
  name: 'swebench_harness',
  needsDiff: () => true,
  async evaluate(ctx) {
    const parsed = ConfigSchema.safeParse(ctx.config);
    if (!parsed.success) throw new Error(`swebench_harness config: ${z.prettifyError(parsed.error)}`);
    const cfg = parsed.data;
    if (cfg.run_command !== undefined && cfg.log_parser === undefined) throw new Error('swebench_harness config: run_command needs log_parser (pytest or unittest)');
    const diff = await ctx.diff();
    const runtime = await ctx.freshRuntime();
    const timeoutMs = cfg.timeout_s * 1000;
    let stage: 'patch' | 'test_patch' | 'eval_prepare' | null = null;
    let problem: string | null = null;
    try {
      stage = 'patch';
      await applyDiff(runtime, diff, ctx.signal);
      stage = 'test_patch';
      if (cfg.test_patch) await applyDiff(runtime, cfg.test_patch, ctx.signal);
      stage = 'eval_prepare';
      for (const command of cfg.eval_prepare) {
        const r = await runtime.exec(command, { timeoutMs, signal: ctx.signal });
        if (r.exitCode !== 0 || r.timedOut) throw new Error(`eval_prepare ${JSON.stringify(command)} exited ${r.timedOut ? 'on timeout' : r.exitCode}: ${`${r.stdout}${r.stderr}`.trim().slice(-500)}`);
      }
      stage = null;
    } catch (error) {
      problem = error instanceof Error ? error.message : String(error);
    }
    const failToPass: Array<{ test: string; passed: boolean; status?: string | null; exit_code?: number | null; timed_out?: boolean }> = [];
    const passToPass: typeof failToPass = [];
    let outputTail: string | null = null;
    if (problem === null) {
      if (cfg.log_parser) {
        const ids = [...cfg.FAIL_TO_PASS, ...cfg.PASS_TO_PASS];
        const command = (cfg.run_command ?? DEFAULT_RUN[cfg.log_parser]).replaceAll('{{TESTS}}', ids.map(shellQuote).join(' '));
        const r = await runtime.exec(command, { timeoutMs, signal: ctx.signal });
        ctx.signal.throwIfAborted();
        cannotRun('the test run', r, cfg.timeout_s);
        const output = `${r.stdout}\n${r.stderr}`;
        outputTail = output.slice(-4000);
        const statuses = parseTestLog(cfg.log_parser, output);
        const judge = (test: string) => ({ test, passed: !r.timedOut && testPassed(statuses, test), status: statuses.get(test) ?? null });
        failToPass.push(...cfg.FAIL_TO_PASS.map(judge));
        passToPass.push(...cfg.PASS_TO_PASS.map(judge));
      } else {
        const run = async (test: string) => {
          const command = cfg.test_command ? cfg.test_command.replaceAll('{{TEST}}', shellQuote(test)) : test;
          const result = await runtime.exec(command, { timeoutMs, signal: ctx.signal });
          ctx.signal.throwIfAborted();
          cannotRun(`test ${test}`, result, cfg.timeout_s);
          return { test, passed: result.exitCode === 0 && !result.timedOut, exit_code: result.exitCode, timed_out: result.timedOut };
        };
        for (const test of cfg.FAIL_TO_PASS) failToPass.push(await run(test));
        for (const test of cfg.PASS_TO_PASS) passToPass.push(await run(test));
      }
    }
    const applied = problem === null || stage !== 'patch';
    const resolved = problem === null && failToPass.every((t) => t.passed) && passToPass.every((t) => t.passed);
    return {
      outcome_reward: resolved ? 1 : 0,
      details: {
        evaluator: 'swebench_harness', resolved, patch_applied: applied, apply_error: stage === 'patch' ? problem : null,
        failed_stage: stage, error: problem, diff_bytes: diff.length, log_parser: cfg.log_parser ?? null,
        FAIL_TO_PASS: failToPass, PASS_TO_PASS: passToPass, output_tail: outputTail,
      },
    };
  },
};

/**
 * A test command that could not run (timed out, killed by a signal, exit 126/127) is no verdict on the patch: it ends
 * the session ERROR with the reason instead of scoring reward 0.
 * @throws Error naming `what`, the cause and the output tail.
 */
function cannotRun(what: string, result: { exitCode: number | null; timedOut: boolean; stdout: string; stderr: string }, timeoutS: number): void {
  const tail = `${result.stdout}${result.stderr}`.slice(-500).trim();
  if (result.timedOut) throw new Error(`${what} timed out after ${timeoutS} s: ${tail}`);
  if (result.exitCode === null) throw new Error(`${what} was killed by a signal: ${tail}`);
  if (result.exitCode === 126 || result.exitCode === 127) {
    throw new Error(`${what} could not run (exit ${result.exitCode}: ${result.exitCode === 127 ? 'command not found' : 'not executable'}): ${tail}`);
  }
}
