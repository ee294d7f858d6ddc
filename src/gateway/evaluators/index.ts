/** The evaluator registry: names as TaskRequest.evaluator.strategy spells them. */
import type { EVALUATOR_CONFIG_SCHEMAS } from '../../core/contracts/index.ts';
import { harborEvaluator } from './harbor.ts';
import { sessionCompletedEvaluator } from './session-completed.ts';
import { swebenchHarnessEvaluator } from './swebench-harness.ts';
import { testOnOutputEvaluator } from './test-on-output.ts';
import type { Evaluator } from './types.ts';

// Typed by the contract's list, so a name the TaskRequest contract documents cannot be missing here.
const STOCK: Readonly<Record<keyof typeof EVALUATOR_CONFIG_SCHEMAS, Evaluator>> = {
  session_completed: sessionCompletedEvaluator,
  test_on_output: testOnOutputEvaluator,
  swebench_harness: swebenchHarnessEvaluator,
  harbor: harborEvaluator,
};
export const EVALUATORS: Readonly<Record<string, Evaluator>> = STOCK;

/** The evaluator for a strategy name. Throws Error listing the known names. */
export function getEvaluator(name: string): Evaluator {
  const evaluator = EVALUATORS[name];
  if (!evaluator) throw new Error(`unknown evaluator ${JSON.stringify(name)}; known: ${Object.keys(EVALUATORS).join(', ')}`);
  return evaluator;
}

export type { EvaluationContext, Evaluator } from './types.ts';
