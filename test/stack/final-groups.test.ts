/**
 * finalGroups (src/rollout/run-retries.ts) and the export over it, on hand-made stores: a task of 3 samples whose
 * sample 1 failed for an infrastructure reason (an evaluator that could not run, so the failed attempt has a trace) and
 * a `polar run` retry `t~retry1` re-running it. Until the retry has a result the task has no evaluated group; after,
 * the group is over the 3 last attempts. A retry stored before its task (an earlier run's, left by `--fresh`) is never
 * folded into the task's new run.
 */
import { expect, test } from 'bun:test';
import type { SessionResult, Trace, TrajectoryStatus } from '../../src/core/records.ts';
import { exportTraces } from '../../src/rollout/export.ts';
import { putGroup } from '../../src/rollout/store-port.ts';
import { finalGroups } from '../../src/rollout/run-retries.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { grpoAdvantages } from '../../src/trace/advantages.ts';
import { buildGroup } from '../../src/trace/groups.ts';
import { taskRequest } from '../support/tasks.ts';

function trace(sessionId: string, taskId: string, reward: number): Trace {
  return {
    prompt_ids: [1, 2], response_ids: [3, 4], loss_mask: [1, 1], response_logprobs: [-0.5, -0.25], prompt_messages: [], response_messages: [], tools: [],
    finish_reason: { unified: 'stop', raw: 'stop' }, reward,
    metadata: { session_id: sessionId, task_id: taskId, builder: 'prefix_merging', harness: 'shell', completion_ids: [`c-${sessionId}`], policy_versions: [null] },
  };
}

function result(sessionId: string, taskId: string, status: TrajectoryStatus, reward: number, error: string | null = null): SessionResult {
  return {
    session_id: sessionId, task_id: taskId, status, node_id: 'n', error,
    timing: { init_ms: 0, ready_queue_ms: 0, run_ms: 0, postrun_ms: 0, build_ms: 0, eval_ms: 0, e2e_ms: 0 },
    trajectory: {
      status, traces: [trace(sessionId, taskId, reward)],
      metadata: { reconstruction_stats: { completions: 1, chains: 1, merged: 0, breaks: {} }, evaluation: { outcome_reward: reward }, training_filter: { trainable: status === 'COMPLETED', reasons: [] } },
    },
  };
}

/** Task `t` (samples 0: reward 1, 1: infrastructure ERROR, 2: reward 0) with its stored group, and the retry of sample 1 (no result yet). */
function seeded(clock: { now: number }): Store {
  const store = openStore(':memory:', { clock: () => clock.now });
  const task = taskRequest('t', { num_samples: 3 });
  store.tasks.upsert(task, 'COMPLETED');
  const results = [result('s0', 't', 'COMPLETED', 1), result('s1', 't', 'ERROR', 0, 'evaluation failed: test command could not run (exit 127)'), result('s2', 't', 'COMPLETED', 0)];
  results.forEach((r, i) => {
    store.sessions.insert({ session_id: r.session_id, task_id: 't', sample_index: i, status: r.status });
    store.results.put(r);
  });
  putGroup(store, buildGroup(task, results.map((r, i) => ({ session_id: r.session_id, sample_index: i })), results, false, clock.now));
  clock.now += 1000;
  store.tasks.upsert(taskRequest('t~retry1', { num_samples: 1, metadata: { group_id: 't', retry_of: 't', retry_samples: [1] } }), 'RUNNING');
  store.sessions.insert({ session_id: 'r0', task_id: 't~retry1', sample_index: 0, status: 'RUNNING' });
  return store;
}

test('a retry still running: the task has no evaluated group yet, and its failed attempt is already left out', () => {
  const store = seeded({ now: 1_000 });
  try {
    const [t, ...rest] = finalGroups(store, ['t', 't~retry1']);
    expect([rest, t!.folded, t!.group, t!.samples.map((s) => s.session_id)]).toEqual([[], true, null, ['s0', 'r0', 's2']]);
    const exported = exportTraces(store);
    expect(exported.rows.map((r) => [r.metadata.session_id, r.sample_index, r.advantage, r.metadata.group_id])).toEqual([['s0', 0, 0, null], ['s2', 2, 0, null]]);
    expect([exported.evaluatedSessions, exported.replacedSessions]).toEqual([2, 1]);
  } finally {
    store.close();
  }
});

test('the retry ended: one group of 3 in sample order with the retry at sample 1, advantages over the 3', () => {
  const clock = { now: 1_000 };
  const store = seeded(clock);
  try {
    const retry = result('r0', 't~retry1', 'COMPLETED', 1);
    store.results.put(retry);
    store.tasks.upsert(store.tasks.get('t~retry1')!.task, 'COMPLETED');
    putGroup(store, buildGroup(store.tasks.get('t~retry1')!.task, [{ session_id: 'r0', sample_index: 0 }], [retry], false, clock.now));
    const [t] = finalGroups(store, ['t', 't~retry1']);
    const group = t!.group!;
    expect([group.task_id, group.group_id, group.created_at, group.sessions.map((s) => [s.session_id, s.sample_index]), group.rewards])
      .toEqual(['t', 't', 2_000, [['s0', 0], ['r0', 1], ['s2', 2]], [1, 1, 0]]);
    const rows = exportTraces(store).rows;
    expect(rows.map((r) => [r.metadata.session_id, r.metadata.task_id, r.metadata.session_task_id, r.sample_index, r.metadata.group_id])).toEqual([
      ['s0', 't', 't', 0, 't'], ['r0', 't', 't~retry1', 1, 't'], ['s2', 't', 't', 2, 't'],
    ]);
    expect(rows.map((r) => r.advantage)).toEqual(grpoAdvantages([1, 1, 0]));
    expect(rows[1]!.metadata.replaced_sessions).toEqual(['s1']);
  } finally {
    store.close();
  }
});

test('a retry stored before its task (an earlier run of the id) is listed as a task of its own, never folded in', () => {
  const clock = { now: 1_000 };
  const store = seeded(clock);
  try {
    store.results.put(result('r0', 't~retry1', 'COMPLETED', 1));
    store.tasks.upsert(store.tasks.get('t~retry1')!.task, 'COMPLETED');
    // `t` runs again (`--fresh`): the old run is archived and a new one stored after the old retry.
    store.transaction(() => store.tasks.archiveRun('t'));
    clock.now += 1000;
    store.tasks.upsert(taskRequest('t', { num_samples: 3 }), 'COMPLETED');
    ['n0', 'n1', 'n2'].forEach((id, i) => {
      store.sessions.insert({ session_id: id, task_id: 't', sample_index: i, status: 'ERROR' });
      store.results.put(result(id, 't', i === 1 ? 'ERROR' : 'COMPLETED', 1, i === 1 ? 'evaluation failed: test command could not run (exit 127)' : null));
    });
    const groups = finalGroups(store, ['t', 't~retry1']);
    expect(groups.map((g) => [g.task_id, g.folded, g.samples.map((s) => s.session_id)])).toEqual([['t', false, ['n0', 'n1', 'n2']], ['t~retry1', false, ['r0']]]);
  } finally {
    store.close();
  }
});
