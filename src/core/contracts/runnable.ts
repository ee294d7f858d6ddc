/**
 * Whether a TaskRequest can run at all, checked with the same rules by the rollout server at submit and by a gateway
 * at dispatch: the harness is known (and the `shell` harness has a command), its `agent.settings` are valid
 * (harness-settings.ts), the evaluator is known and its `config` is valid (strict: a misspelt key is an error naming
 * its path, at every depth). The names here are the gateway's registries
 * (src/gateway/harnesses/index.ts, src/gateway/evaluators/index.ts); test/architecture.test.ts keeps them equal.
 */
import { z } from 'zod';
import { issueList } from './issues.ts';
import type { TaskRequest } from './task.ts';
import { HARNESS_SETTINGS_SCHEMAS, harnessSettingsProblems, type HarnessName } from './harness-settings.ts';
import { taskSamplingIssues } from './task-sampling.ts';

/** Harness adapters a gateway knows, as `agent.harness` spells them (`-` and `_` are interchangeable). */
export const HARNESS_NAMES = Object.keys(HARNESS_SETTINGS_SCHEMAS) as HarnessName[];

/** `test_on_output`: run a command, compare exit code and output. */
export const testOnOutputConfigSchema = z.strictObject({
  command: z.string().min(1),
  expect_exit_code: z.number().int().optional(),
  expect_output: z.string().optional(),
  expect_output_regex: z.string().optional(),
  timeout_s: z.number().positive().default(600),
});

/** `swebench_harness`: FAIL_TO_PASS / PASS_TO_PASS test ids in a fresh runtime with the session's diff applied. */
export const swebenchHarnessConfigSchema = z.strictObject({
  FAIL_TO_PASS: z.array(z.string().min(1)),
  PASS_TO_PASS: z.array(z.string().min(1)).default([]),
  test_command: z.string().min(1).optional(),
  /** The benchmark's tests as a unified diff, applied after the session's diff. */
  test_patch: z.string().optional(),
  /** Commands run in order before the tests. */
  eval_prepare: z.array(z.string().min(1)).default([]),
  /** Judge the tests from one run's output (src/gateway/evaluators/test-logs.ts). */
  log_parser: z.enum(['pytest', 'unittest']).optional(),
  /** With log_parser: the command (`{{TESTS}}` = every test id, quoted). */
  run_command: z.string().min(1).optional(),
  timeout_s: z.number().positive().default(900),
});

/** `harbor`: a Harbor task's tests/test.sh and its reward file (src/gateway/evaluators/harbor.ts). */
export const harborConfigSchema = z.strictObject({
  tests_dir: z.string().min(1),
  timeout_s: z.number().positive().default(600),
  env: z.record(z.string(), z.string()).default({}),
  workdir: z.string().min(1).optional(),
});

/** Evaluator strategies and the schema of each one's `config` (absent config = `{}`). */
export const EVALUATOR_CONFIG_SCHEMAS = {
  session_completed: z.strictObject({}),
  test_on_output: testOnOutputConfigSchema,
  swebench_harness: swebenchHarnessConfigSchema,
  harbor: harborConfigSchema,
} as const;
export const EVALUATOR_NAMES = Object.keys(EVALUATOR_CONFIG_SCHEMAS) as (keyof typeof EVALUATOR_CONFIG_SCHEMAS)[];

/** Linux's limit on one argv string, bytes (32 pages); execve fails with E2BIG above it. Source: man 2 execve. */
export const MAX_ARG_STRLEN = 131_072;
/** Largest instruction accepted: room for the quoting and the rest of the argument a harness builds around it. */
export const MAX_INSTRUCTION_BYTES = MAX_ARG_STRLEN - 4096;

/** One reason a task cannot run: the field and what is wrong with it. */
export interface RunnableProblem {
  path: string;
  message: string;
}

/**
 * The reasons `task` cannot run, empty when it can. `harnesses` / `evaluators` default to the built-in names; a
 * gateway passes its own registry's names (tests add adapters). An evaluator whose name is known but has no schema
 * here (a registry extension) gets its config checked by itself at evaluation.
 */
export function runnableProblems(task: TaskRequest, known: { harnesses?: readonly string[]; evaluators?: readonly string[] } = {}): RunnableProblem[] {
  const harnesses = known.harnesses ?? HARNESS_NAMES;
  const evaluators = known.evaluators ?? EVALUATOR_NAMES;
  const problems: RunnableProblem[] = [];
  const harness = (task.agent.harness ?? 'shell').replaceAll('-', '_');
  if (!harnesses.includes(harness)) {
    problems.push({ path: 'agent.harness', message: `unknown harness ${JSON.stringify(task.agent.harness)}; known: ${harnesses.join(', ')}` });
  } else if ((harness === 'shell' || harness === 'custom') && !task.agent.command && task.agent.settings?.command === undefined) {
    // A settings.command that is not a command line is the settings check's problem (below), named once.
    problems.push({ path: 'agent.command', message: `the ${harness} harness needs a command (agent.command or agent.settings.command)` });
  }
  if (harnesses.includes(harness)) {
    // Checked here as the adapter checks it at INIT (harness-settings.ts), so the task is refused once, not per session.
    problems.push(...harnessSettingsProblems(harness, task.agent.settings));
  }
  const instructionBytes = Buffer.byteLength(task.instruction, 'utf8');
  if (instructionBytes > MAX_INSTRUCTION_BYTES) {
    problems.push({ path: 'instruction', message: `${instructionBytes} bytes: harness CLIs take the instruction as one command-line argument, which Linux limits to ${MAX_ARG_STRLEN} bytes (MAX_ARG_STRLEN); put the bulk in a file the task uploads and point the instruction at it` });
  }
  problems.push(...taskSamplingIssues(task.agent.settings));
  if (task.evaluator) {
    const name = task.evaluator.strategy;
    if (!evaluators.includes(name)) {
      problems.push({ path: 'evaluator.strategy', message: `unknown evaluator ${JSON.stringify(name)}; known: ${evaluators.join(', ')}` });
    } else {
      const schema = (EVALUATOR_CONFIG_SCHEMAS as Record<string, z.ZodType>)[name];
      const parsed = schema?.safeParse(task.evaluator.config ?? {});
      if (parsed && !parsed.success) problems.push(...issueList(parsed.error, 'evaluator.config'));
    }
  }
  return problems;
}

/** `path: message; …` of the problems (for a 400 body). */
export function formatProblems(problems: readonly RunnableProblem[]): string {
  return problems.map((p) => `${p.path}: ${p.message}`).join('; ');
}

