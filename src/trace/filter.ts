/**
 * Rewards and the training filter (docs/architecture.md#training-filter):
 * - a non-COMPLETED trajectory gets reward 0 and a zeroed mask, except an agent-budget timeout during the run, which
 *   stays trainable with reward 0 (the policy ran out of its own budget: a real, aligned failure);
 * - a trace with a parser-invalid tool call keeps its mask with reward 0 (a malformed action the policy sampled);
 * - a trace built from an unsound capture is already masked by the builder; the filter just names it.
 * `metadata.training_filter` records why. Source: Polar `src/polar/trajectory/training_filter.py`.
 */
import type { EvaluationResult, Trace, Trajectory } from '../core/records.ts';

/** Reasons written to `trajectory.metadata.training_filter.reasons` and each trace's `metadata.training_filter`. */
export type FilterReason = 'error' | 'total_timeout' | 'agent_timeout' | 'parser_invalid_tool_call' | 'capture_error';

/** Per-trace record of a filter decision, stored as `trace.metadata.training_filter`. */
export interface TraceFilterNote {
  reason: FilterReason;
  /** True when the loss mask was zeroed. */
  masked: boolean;
  /** The reward before the filter set it to 0. */
  original_reward: number;
}

/**
 * Apply the training filter to a trajectory (idempotent; the input is not mutated).
 * Reads `trajectory.status` and `trajectory.metadata.timeout_kind` ('agent' | 'total', set by buildTrajectory).
 * @returns a new Trajectory with filtered rewards/masks and `metadata.training_filter = {trainable, reasons}`.
 */
export function applyTrainingFilter(trajectory: Trajectory): Trajectory {
  const reasons = new Set<FilterReason>();
  let statusRule: { reason: FilterReason; mask: boolean } | null = null;
  if (trajectory.status === 'TIMEOUT') {
    statusRule = trajectory.metadata.timeout_kind === 'agent'
      ? { reason: 'agent_timeout', mask: false }
      : { reason: 'total_timeout', mask: true };
  } else if (trajectory.status === 'ERROR') {
    statusRule = { reason: 'error', mask: true };
  }
  if (statusRule) reasons.add(statusRule.reason);

  const traces = trajectory.traces.map((trace): Trace => {
    let rule: { reason: FilterReason; mask: boolean } | null = statusRule;
    if (!rule?.mask && Number(trace.metadata.parser_invalid_tool_calls ?? 0) > 0) {
      rule = { reason: 'parser_invalid_tool_call', mask: false };
    }
    if (typeof trace.metadata.capture_error === 'string') reasons.add('capture_error');
    if (rule === null) return trace;
    reasons.add(rule.reason);
    const previous = trace.metadata.training_filter as TraceFilterNote | undefined;
    const note: TraceFilterNote = {
      reason: rule.reason,
      masked: rule.mask,
      original_reward: previous?.original_reward ?? trace.reward,
    };
    return {
      ...trace,
      reward: 0,
      loss_mask: rule.mask && trace.loss_mask.some((m) => m !== 0) ? new Array<number>(trace.loss_mask.length).fill(0) : trace.loss_mask,
      metadata: { ...trace.metadata, training_filter: note },
    };
  });
  return {
    ...trajectory,
    traces,
    metadata: {
      ...trajectory.metadata,
      training_filter: { trainable: !statusRule?.mask, reasons: [...reasons] },
    },
  };
}

/**
 * Assign an evaluator's rewards, then apply the training filter. `trace_rewards` (one per trace, in trace order)
 * takes precedence over `outcome_reward` (broadcast to every trace). The input is not mutated.
 * @throws Error when neither is given, a reward is not a finite number, or `trace_rewards.length` differs from the
 *   number of traces.
 */
export function applyRewards(trajectory: Trajectory, evaluation: EvaluationResult): Trajectory {
  if (evaluation === null || typeof evaluation !== 'object') throw new Error('evaluation must be an object');
  const n = trajectory.traces.length;
  let rewards: number[];
  if (evaluation.trace_rewards !== undefined) {
    const given = evaluation.trace_rewards;
    if (!Array.isArray(given)) throw new Error('evaluation.trace_rewards must be an array of numbers');
    if (given.length !== n) {
      throw new Error(`evaluation.trace_rewards has ${given.length} rewards but the trajectory has ${n} traces`);
    }
    given.forEach((r, i) => assertReward(r, `evaluation.trace_rewards[${i}]`));
    rewards = given.slice();
  } else if (evaluation.outcome_reward !== undefined) {
    assertReward(evaluation.outcome_reward, 'evaluation.outcome_reward');
    const outcome = evaluation.outcome_reward;
    // A broadcast outcome reaches every trace except those whose reward policy says zero (side chains, by config).
    rewards = trajectory.traces.map((trace) => (trace.metadata.reward_policy === 'zero' ? 0 : outcome));
  } else {
    throw new Error('evaluation has neither outcome_reward nor trace_rewards');
  }
  const rewarded: Trajectory = {
    ...trajectory,
    // A fresh evaluation replaces earlier filter notes, so original_reward reflects this evaluation.
    traces: trajectory.traces.map((trace, i) => {
      const { training_filter: _old, ...metadata } = trace.metadata;
      return { ...trace, reward: rewards[i]!, metadata };
    }),
    metadata: { ...trajectory.metadata, evaluation },
  };
  return applyTrainingFilter(rewarded);
}

function assertReward(value: unknown, where: string): asserts value is number {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new Error(`${where} must be a finite number, got ${String(value)}`);
}
