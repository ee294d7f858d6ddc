import { describe, expect, test } from 'bun:test';
import { applyRewards, buildTrajectory, grpoAdvantages, leaveOneOutAdvantages } from '../../src/trace/index.ts';
import { BASE, rec } from '../support/trace-helpers.ts';

const EOT = 99;
const main = [
  rec({ seq: 0, prompt: [1, 2], response: [10, EOT] }),
  rec({ seq: 1, prompt: [1, 2, 10, EOT, 50], response: [11, EOT] }),
];
const sub = rec({ seq: 2, prompt: [3, 4], response: [12, EOT] });
const build = (status: 'COMPLETED' | 'TIMEOUT' | 'ERROR', timeoutKind?: 'agent' | 'total', records = [...main, sub]) =>
  buildTrajectory(records, { ...BASE, strategy: 'prefix_merging', status, timeoutKind });

describe('rewards', () => {
  test('traces start with reward 0; outcome_reward is broadcast to every trace', () => {
    const traj = build('COMPLETED');
    expect(traj.traces.map((t) => t.reward)).toEqual([0, 0]);
    const rewarded = applyRewards(traj, { outcome_reward: 1 });
    expect(rewarded.traces.map((t) => t.reward)).toEqual([1, 1]);
    expect(rewarded.metadata.evaluation).toEqual({ outcome_reward: 1 });
    expect(rewarded.metadata.training_filter).toEqual({ trainable: true, reasons: [] });
    expect(traj.traces[0]!.reward).toBe(0); // input not mutated
  });

  test('trace_rewards are assigned one to one; a length mismatch is a clear error', () => {
    const traj = build('COMPLETED');
    expect(applyRewards(traj, { trace_rewards: [0.25, 0.75] }).traces.map((t) => t.reward)).toEqual([0.25, 0.75]);
    expect(() => applyRewards(traj, { trace_rewards: [1] })).toThrow('evaluation.trace_rewards has 1 rewards but the trajectory has 2 traces');
    expect(() => applyRewards(traj, {})).toThrow(/neither outcome_reward nor trace_rewards/);
    expect(() => applyRewards(traj, { outcome_reward: Number.NaN })).toThrow(/outcome_reward must be a finite number/);
  });
});

describe('training filter', () => {
  test('ERROR: reward 0 and a zeroed mask, not trainable', () => {
    const traj = applyRewards(build('ERROR'), { outcome_reward: 1 });
    expect(traj.traces.map((t) => t.reward)).toEqual([0, 0]);
    expect(traj.traces.every((t) => t.loss_mask.every((m) => m === 0))).toBe(true);
    expect(traj.metadata.training_filter).toEqual({ trainable: false, reasons: ['error'] });
    expect(traj.traces[0]!.metadata.training_filter).toEqual({ reason: 'error', masked: true, original_reward: 1 });
  });

  test('a total-budget TIMEOUT is masked; the mask is already zero straight from the builder', () => {
    const built = build('TIMEOUT', 'total');
    expect(built.traces.every((t) => t.loss_mask.every((m) => m === 0))).toBe(true);
    const traj = applyRewards(built, { outcome_reward: 1 });
    expect(traj.traces.map((t) => t.reward)).toEqual([0, 0]);
    expect(traj.metadata.training_filter).toEqual({ trainable: false, reasons: ['total_timeout'] });
  });

  test('an agent-budget TIMEOUT during the run stays trainable with reward 0', () => {
    const traj = applyRewards(build('TIMEOUT', 'agent'), { outcome_reward: 1 });
    expect(traj.traces.map((t) => t.reward)).toEqual([0, 0]);
    expect(traj.traces[0]!.loss_mask).toEqual([1, 1, 0, 1, 1]);
    expect(traj.metadata.training_filter).toEqual({ trainable: true, reasons: ['agent_timeout'] });
    expect(traj.traces[1]!.metadata.training_filter).toEqual({ reason: 'agent_timeout', masked: false, original_reward: 1 });
  });

  test('a parser-invalid tool call keeps its mask with reward 0; other traces keep their reward', () => {
    const bad = rec({ seq: 2, prompt: [3, 4], response: [12, EOT], toolCalls: [{ id: 'x', name: 'bash', arguments: '{oops', parserInvalid: true }] });
    const traj = applyRewards(build('COMPLETED', undefined, [...main, bad]), { outcome_reward: 1 });
    expect(traj.traces.map((t) => t.reward)).toEqual([1, 0]);
    expect(traj.traces[1]!.loss_mask).toEqual([1, 1]);
    expect(traj.traces[1]!.metadata.parser_invalid_tool_calls).toBe(1);
    expect(traj.traces[1]!.metadata.training_filter).toEqual({ reason: 'parser_invalid_tool_call', masked: false, original_reward: 1 });
    expect(traj.metadata.training_filter).toEqual({ trainable: true, reasons: ['parser_invalid_tool_call'] });
  });

  test('re-evaluating replaces the previous rewards and notes', () => {
    const once = applyRewards(build('TIMEOUT', 'agent'), { outcome_reward: 1 });
    const twice = applyRewards(once, { outcome_reward: 0.5 });
    expect(twice.traces[0]!.metadata.training_filter).toEqual({ reason: 'agent_timeout', masked: false, original_reward: 0.5 });
  });
});

describe('advantages', () => {
  test('GRPO: (r − mean) / (std + eps) with the population std', () => {
    const adv = grpoAdvantages([1, 0, 0, 1]);
    // mean 0.5, population std 0.5
    expect(adv).toEqual([0.5, -0.5, -0.5, 0.5].map((d) => d / (0.5 + 1e-6)));
    const r = [3, 1, 2];
    const mean = 2;
    const std = Math.sqrt(2 / 3);
    expect(grpoAdvantages(r, 0)).toEqual(r.map((x) => (x - mean) / std));
    expect(grpoAdvantages([1, 1, 1])).toEqual([0, 0, 0]);
    expect(grpoAdvantages([])).toEqual([]);
    expect(() => grpoAdvantages([1, Number.POSITIVE_INFINITY])).toThrow(/rewards\[1\] must be a finite number/);
  });

  test('leave-one-out: r − mean of the others; 0 for a group of one', () => {
    expect(leaveOneOutAdvantages([1, 0, 0, 1])).toEqual([1 - 1 / 3, 0 - 2 / 3, 0 - 2 / 3, 1 - 1 / 3]);
    expect(leaveOneOutAdvantages([0.7])).toEqual([0]);
    expect(leaveOneOutAdvantages([])).toEqual([]);
  });
});
