/** Chain roles (main / side / retry / compaction), what builder.config keeps, and the side reward policy. */
import { describe, expect, test } from 'bun:test';
import type { IRMessage } from '../../src/core/ir.ts';
import type { CompletionRecord } from '../../src/core/records.ts';
import { applyRewards, buildTrajectory, parseBuilderConfig } from '../../src/trace/index.ts';
import { BASE, rec } from '../support/trace-helpers.ts';

const EOT = 99;
const say = (role: 'system' | 'user' | 'assistant', t: string): IRMessage => ({ role, content: [{ type: 'text', text: t }] });
const MAIN = [say('system', 'agent'), say('user', 'fix it')];
const SIDE = [say('system', 'loop detector'), say('user', 'history')];

/** A 5-turn main conversation with a loop-detection side request after turn 3 that is retried `retries` times. */
function session(retries: number): CompletionRecord[] {
  const records: CompletionRecord[] = [];
  let prompt = [1, 2, 3];
  let messages = MAIN;
  let seq = 0;
  for (let turn = 0; turn < 5; turn++) {
    const response = [100 + turn, EOT];
    records.push(rec({ seq: seq++, prompt, response, messages }));
    prompt = [...prompt, ...response, 50 + turn];
    messages = [...messages, say('assistant', `a${turn}`), say('user', `r${turn}`)];
    if (turn === 2) for (let r = 0; r <= retries; r++) records.push(rec({ seq: seq++, prompt: [7, 7, 8], response: [200 + r, EOT], messages: SIDE }));
  }
  return records;
}

describe('labels', () => {
  test('one side request sampled 10 times: 1 main, 1 side (the last attempt, the one the harness kept), 9 retries; duplicates dropped by default', () => {
    const records = session(9);
    const traj = buildTrajectory(records, { ...BASE, strategy: 'prefix_merging' });
    expect(traj.metadata.reconstruction_stats.chain_roles).toEqual({ main: 1, side: 1, retry: 9, compaction: 0 });
    expect(traj.metadata.reconstruction_stats.dropped_traces).toEqual({ side: 0, retry: 9 });
    expect(traj.traces.map((t) => t.metadata.chain_role)).toEqual(['main', 'side']);
    expect(traj.traces[0]!.metadata.completion_ids).toHaveLength(5);
    expect(traj.traces[1]!.metadata.source_chain).toBe(0);
    expect(traj.traces[1]!.response_ids[0]).toBe(209); // the 10th answer
    const kept = buildTrajectory(records, { ...BASE, strategy: 'prefix_merging', config: { retries: 'keep' } });
    const retries = kept.traces.filter((t) => t.metadata.chain_role === 'retry');
    expect(retries).toHaveLength(9);
    // Each abandoned attempt names the attempt that superseded it.
    expect(retries.every((t) => t.metadata.duplicate === true && t.metadata.source_chain === (t.metadata.chain_index as number) + 1)).toBe(true);
  });

  test('the attempt the harness kept keeps the role, in both builders: a retried final answer, a retry then continued', () => {
    // One-turn task retried once: the second answer is the one the harness ended with.
    const once = [rec({ seq: 0, prompt: [1, 2], response: [10, EOT], messages: MAIN }), rec({ seq: 1, prompt: [1, 2], response: [20, EOT], messages: MAIN })];
    for (const strategy of ['prefix_merging', 'per_request'] as const) {
      const traj = buildTrajectory(once, { ...BASE, strategy });
      expect(traj.traces.map((t) => [t.metadata.completion_ids, t.metadata.chain_role])).toEqual([[['c1'], 'main']]);
      expect(traj.metadata.reconstruction_stats.dropped_completion_ids).toEqual(['c0']);
    }
    // per_request, retried then continued from the re-sample: the abandoned first answer is the retry.
    const next = rec({ seq: 2, prompt: [1, 2, 20, EOT, 50], response: [30, EOT], messages: [...MAIN, say('assistant', 'a'), say('user', 'next')] });
    const traj = buildTrajectory([...once, next], { ...BASE, strategy: 'per_request' });
    expect(traj.traces.map((t) => t.metadata.completion_ids[0])).toEqual(['c1', 'c2']);
    expect(traj.metadata.reconstruction_stats.dropped_completion_ids).toEqual(['c0']);
  });

  test('a retried first call whose re-sample the conversation continues: that chain is main, the abandoned attempt the retry', () => {
    // P sampled (A1), the harness retries P (A2) and goes on from A2: [P→A1] is the abandoned attempt.
    const records = [
      rec({ seq: 0, prompt: [1, 2], response: [10, EOT], messages: MAIN }),
      rec({ seq: 1, prompt: [1, 2], response: [20, EOT], messages: MAIN }),
      rec({ seq: 2, prompt: [1, 2, 20, EOT, 50], response: [30, EOT], messages: [...MAIN, say('assistant', 'a'), say('user', 'next')] }),
      rec({ seq: 3, prompt: [1, 2, 20, EOT, 50, 30, EOT, 51], response: [40, EOT], messages: [...MAIN, say('assistant', 'a'), say('user', 'next'), say('assistant', 'b'), say('user', 'next2')] }),
    ];
    const kept = buildTrajectory(records, { ...BASE, strategy: 'prefix_merging', config: { retries: 'keep' } });
    expect(kept.traces.map((t) => [t.metadata.completion_ids, t.metadata.chain_role, t.metadata.source_chain, t.metadata.duplicate ?? false])).toEqual([
      [['c0'], 'retry', 1, true],
      [['c1', 'c2', 'c3'], 'main', null, false],
    ]);
    expect(kept.metadata.reconstruction_stats.chain_roles).toEqual({ main: 1, side: 0, retry: 1, compaction: 0 });
    // Dropping retries (or only duplicates, the default) leaves the conversation and drops the abandoned attempt.
    for (const retries of ['drop', 'drop_duplicates'] as const) {
      const traj = buildTrajectory(records, { ...BASE, strategy: 'prefix_merging', config: { retries } });
      expect(traj.traces.map((t) => t.metadata.completion_ids)).toEqual([['c1', 'c2', 'c3']]);
      expect(traj.metadata.reconstruction_stats.dropped_completion_ids).toEqual(['c0']);
    }
    // A retry the conversation did not continue stays the retry (the conversation went on from the first answer).
    const fromFirst = [records[0]!, records[1]!, rec({ seq: 2, prompt: [1, 2, 10, EOT, 50], response: [30, EOT], messages: [...MAIN, say('assistant', 'a'), say('user', 'next')] })];
    const traj = buildTrajectory(fromFirst, { ...BASE, strategy: 'prefix_merging', config: { retries: 'keep' } });
    expect(traj.traces.map((t) => [t.metadata.completion_ids, t.metadata.chain_role])).toEqual([[['c0', 'c2'], 'main'], [['c1'], 'retry']]);
  });

  test('per_request labels every completion: 5 main, 1 side, 2 retries', () => {
    const traj = buildTrajectory(session(2), { ...BASE, strategy: 'per_request', config: { retries: 'keep' } });
    expect(traj.metadata.reconstruction_stats.chain_roles).toEqual({ main: 5, side: 1, retry: 2, compaction: 0 });
  });

  test('side: drop leaves only the main chain; side_reward: zero gives side chains 0 under a broadcast outcome', () => {
    const records = session(0);
    const dropped = buildTrajectory(records, { ...BASE, strategy: 'prefix_merging', config: { side: 'drop' } });
    expect(dropped.traces.map((t) => t.metadata.chain_role)).toEqual(['main']);
    expect(dropped.metadata.reconstruction_stats.dropped_traces).toEqual({ side: 1, retry: 0 });
    const zero = applyRewards(buildTrajectory(records, { ...BASE, strategy: 'prefix_merging', config: { side_reward: 'zero' } }), { outcome_reward: 1 });
    expect(zero.traces.map((t) => [t.metadata.chain_role, t.metadata.reward_policy, t.reward])).toEqual([['main', 'outcome', 1], ['side', 'zero', 0]]);
    const outcome = applyRewards(buildTrajectory(records, { ...BASE, strategy: 'prefix_merging' }), { outcome_reward: 1 });
    expect(outcome.traces.map((t) => t.reward)).toEqual([1, 1]);
  });

  test('a main chain that restarts with a shorter history is a compaction of the chain before it', () => {
    const records = session(0);
    const last = records.at(-1)!;
    records.push(rec({ seq: last.seq + 1, prompt: [1, 2, 3, 9, 9], response: [300, EOT], messages: [...MAIN, say('user', 'summary of the work so far')] }));
    const traj = buildTrajectory(records, { ...BASE, strategy: 'prefix_merging' });
    expect(traj.traces.map((t) => [t.metadata.chain_role, t.metadata.source_chain])).toEqual([['main', null], ['side', 0], ['compaction', 0]]);
  });
});

test('builder.config errors name their path', () => {
  expect(() => parseBuilderConfig({ sides: 'keep' })).toThrow(/builder\.config\.sides/);
  expect(() => parseBuilderConfig({ retries: 'sometimes' })).toThrow(/builder\.config\.retries/);
  expect(parseBuilderConfig(undefined)).toEqual({ side: 'keep', retries: 'drop_duplicates', side_reward: 'outcome' });
  expect(() => buildTrajectory([], { ...BASE, strategy: 'prefix_merging', config: { side: 'maybe' } })).toThrow(/builder\.config\.side/);
});
