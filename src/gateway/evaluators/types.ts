/** Evaluators turn a finished session into an EvaluationResult. Source: docs/architecture.md#staging-model (evaluators). */
import type { EvaluationResult, TaskRequest } from '../../core/records.ts';
import type { HarnessOutcome } from '../harnesses/types.ts';
import type { Runtime } from '../runtimes/types.ts';

export interface EvaluationContext {
  task: TaskRequest;
  /** The evaluator's `config` section ({} when absent). */
  config: Record<string, unknown>;
  /** The session's own runtime, still running (its work tree holds the agent's changes). */
  runtime: Runtime;
  /** Exit code and judged outcome of the harness (null when it never ran). */
  harness: { exitCode: number | null; outcome: HarnessOutcome } | null;
  /** A fresh runtime prepared like the session's (started in the background at RUNNING with refresh_runtime). */
  freshRuntime(): Promise<Runtime>;
  /** The session's changes against its prepared state (`git diff` text). */
  diff(): Promise<string>;
  signal: AbortSignal;
}

export interface Evaluator {
  readonly name: string;
  /** True when this evaluator reads the session diff (the node then commits a baseline during INIT). */
  needsDiff(config: Record<string, unknown>, refreshRuntime: boolean): boolean;
  /** Throws Error on bad config or when the evaluation itself cannot run (the session then ends in ERROR). */
  evaluate(ctx: EvaluationContext): Promise<EvaluationResult>;
}
