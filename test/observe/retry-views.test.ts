/**
 * Views of a store that `polar run --max-retries` wrote, on hand-made stores: task `t` (3 samples; sample 1 failed
 * for an infrastructure reason) and its retry `t~retry1` that re-ran sample 1 and passed. `polar trace show --task t
 * --sample 1` shows the retry's session (the sample's last attempt, as the summary counts it); an archived run
 * (`t@run1`, moved aside when `t` ran again) still folds its retry (archived with it or left under its own id), in
 * `polar results` and in the export; the dashboard folds the retry into its task the same way (one row, each sample
 * by its last attempt); and the dashboard's pass@1 leaves cancelled sessions out of its denominator.
 */
import { expect, test } from 'bun:test';
import type { ResultStatus } from '../../src/core/contracts/index.ts';
import type { SessionResult, Trace } from '../../src/core/records.ts';
import { dashboardState, type DashboardSource, type DashboardTask } from '../../src/observe/dashboard/state.ts';
import { formatResultTable, resolveSession, resultRows } from '../../src/observe/results.ts';
import { exportTraces } from '../../src/rollout/export.ts';
import { finalAttempts } from '../../src/rollout/run-retries.ts';
import { putGroup } from '../../src/rollout/store-port.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { buildGroup } from '../../src/trace/groups.ts';
import { storeDashboardSource } from '../support/dashboard.ts';
import { taskRequest } from '../support/tasks.ts';

const INFRA = 'evaluation failed: test command could not run (exit 127)';

function trace(sessionId: string, taskId: string, reward: number): Trace {
  return {
    prompt_ids: [1, 2], response_ids: [3, 4], loss_mask: [1, 1], response_logprobs: [-0.5, -0.25], prompt_messages: [], response_messages: [], tools: [],
    finish_reason: { unified: 'stop', raw: 'stop' }, reward,
    metadata: { session_id: sessionId, task_id: taskId, builder: 'prefix_merging', harness: 'shell', completion_ids: [`c-${sessionId}`], policy_versions: [null] },
  };
}

function result(sessionId: string, taskId: string, status: ResultStatus, reward: number, error: string | null = null): SessionResult {
  return {
    session_id: sessionId, task_id: taskId, status, node_id: 'n', error,
    timing: { init_ms: 0, ready_queue_ms: 0, run_ms: 0, postrun_ms: 0, build_ms: 0, eval_ms: 0, e2e_ms: 0 },
    trajectory: {
      // A cancelled session's trajectory stays ERROR (records.ts SessionResult.status).
      status: status === 'CANCELLED' ? 'ERROR' : status, traces: [trace(sessionId, taskId, reward)],
      metadata: { reconstruction_stats: { completions: 1, chains: 1, merged: 0, breaks: {} }, evaluation: { outcome_reward: reward }, training_filter: { trainable: status === 'COMPLETED', reasons: [] } },
    },
  };
}

/** Store task `id` (its sessions `<prefix>0..2`, sample 1 an infrastructure ERROR) and its finished retry `<prefix>r`. */
function seedRun(store: Store, clock: { now: number }, prefix: string): void {
  const task = taskRequest('t', { num_samples: 3 });
  store.tasks.upsert(task, 'COMPLETED');
  const results = [result(`${prefix}0`, 't', 'COMPLETED', 1), result(`${prefix}1`, 't', 'ERROR', 0, INFRA), result(`${prefix}2`, 't', 'COMPLETED', 0)];
  results.forEach((r, i) => {
    store.sessions.insert({ session_id: r.session_id, task_id: 't', sample_index: i, status: r.status });
    store.results.put(r);
  });
  putGroup(store, buildGroup(task, results.map((r, i) => ({ session_id: r.session_id, sample_index: i })), results, false, clock.now));
  clock.now += 1000;
  const retryTask = taskRequest('t~retry1', { num_samples: 1, metadata: { group_id: 't', retry_of: 't', retry_samples: [1] } });
  store.tasks.upsert(retryTask, 'COMPLETED');
  const retry = result(`${prefix}r`, 't~retry1', 'COMPLETED', 1);
  store.sessions.insert({ session_id: retry.session_id, task_id: 't~retry1', sample_index: 0, status: 'COMPLETED' });
  store.results.put(retry);
  putGroup(store, buildGroup(retryTask, [{ session_id: retry.session_id, sample_index: 0 }], [retry], false, clock.now));
  clock.now += 1000;
}

test('polar trace show --task T --sample N: a sample a retry re-ran resolves to its last attempt; the retry id still resolves directly', () => {
  const clock = { now: 1_000 };
  const store = openStore(':memory:', { clock: () => clock.now });
  try {
    seedRun(store, clock, 'a');
    expect(resolveSession(store, { task: 't', sample: 1 })).toBe('ar');
    expect(resolveSession(store, { task: 't', sample: 0 })).toBe('a0');
    expect(resolveSession(store, { task: 't~retry1' })).toBe('ar');
    expect(() => resolveSession(store, { task: 't', sample: 3 })).toThrow('task t has no sample 3 (samples: 0, 1, 2)');
  } finally {
    store.close();
  }
});

test('an archived run (t@run1, moved aside when t ran again) folds its retry: results, export and trace show count it by last attempt', () => {
  const clock = { now: 1_000 };
  const store = openStore(':memory:', { clock: () => clock.now });
  try {
    seedRun(store, clock, 'a');
    // `t` runs again (`polar run --fresh`): the old run is archived as t@run1, its retry t~retry1 too when the new run
    // needs a retry of its own, which then folds into the new run.
    store.transaction(() => store.tasks.archiveRun('t'));
    store.transaction(() => store.tasks.archiveRun('t~retry1'));
    seedRun(store, clock, 'b');
    const ids = store.tasks.list().map((t) => t.task.task_id);
    expect(ids).toEqual(['t@run1', 't~retry1@run1', 't', 't~retry1']);
    expect(finalAttempts(store, ids).map((t) => [t.task_id, t.samples.map((s) => s.session_id)]))
      .toEqual([['t@run1', ['a0', 'ar', 'a2']], ['t', ['b0', 'br', 'b2']]]);
    // `polar results`: the archived run's failed attempt names its retry and stays out of the totals.
    const rows = resultRows(store);
    expect(rows.filter((r) => r.retried_by !== null).map((r) => [r.session_id, r.retried_by])).toEqual([['a1', 'ar'], ['b1', 'br']]);
    expect(formatResultTable(rows)).toContain('8 session(s), 2 re-run by a retry (counted by its last attempt): 6 completed, 0 error, 0 timeout');
    // The export: one group per run, the retry in the archived run's group, no row of the retry as a group of its own.
    const exported = exportTraces(store);
    expect(exported.rows.map((r) => [r.metadata.session_id, r.metadata.task_id, r.sample_index])).toEqual([
      ['a0', 't@run1', 0], ['ar', 't@run1', 1], ['a2', 't@run1', 2], ['b0', 't', 0], ['br', 't', 1], ['b2', 't', 2],
    ]);
    expect(resolveSession(store, { task: 't@run1', sample: 1 })).toBe('ar');
  } finally {
    store.close();
  }
});

test('a retry left under its own id when its task ran again folds into the archived run, never into the new one', () => {
  const clock = { now: 1_000 };
  const store = openStore(':memory:', { clock: () => clock.now });
  try {
    seedRun(store, clock, 'a');
    store.transaction(() => store.tasks.archiveRun('t'));
    // The new run needed no retry, so the old run's t~retry1 keeps its id.
    store.tasks.upsert(taskRequest('t', { num_samples: 1 }), 'COMPLETED');
    store.sessions.insert({ session_id: 'b0', task_id: 't', sample_index: 0, status: 'COMPLETED' });
    store.results.put(result('b0', 't', 'COMPLETED', 1));
    const ids = store.tasks.list().map((t) => t.task.task_id);
    expect(ids).toEqual(['t@run1', 't~retry1', 't']);
    expect(finalAttempts(store, ids).map((t) => [t.task_id, t.samples.map((s) => s.session_id)])).toEqual([['t@run1', ['a0', 'ar', 'a2']], ['t', ['b0']]]);
    // Without the archived run among the ids, the retry is a task of its own (as before).
    expect(finalAttempts(store, ['t', 't~retry1']).map((t) => t.task_id)).toEqual(['t', 't~retry1']);
  } finally {
    store.close();
  }
});

test('dashboard pass@1: cancelled sessions are out of the denominator, in the task row and per policy_version', async () => {
  const task = taskRequest('c', { num_samples: 4 });
  const results = [result('c0', 'c', 'COMPLETED', 1), result('c1', 'c', 'COMPLETED', 0), result('c2', 'c', 'CANCELLED', 0, 'cancelled: run deadline'), result('c3', 'c', 'CANCELLED', 0, 'cancelled: run deadline')];
  const allCancelled = taskRequest('x', { num_samples: 1 });
  const byTask = new Map([['c', { task, results }], ['x', { task: allCancelled, results: [result('x0', 'x', 'CANCELLED', 0, 'cancelled')] }]]);
  const src: DashboardSource = {
    tasks: () => [...byTask.values()].map((t, i) => ({ task: t.task, status: 'COMPLETED', created_at: i, updated_at: 100 + i })),
    sessions: (taskId) => byTask.get(taskId)!.results.map((r, i) => ({ session_id: r.session_id, task_id: taskId, sample_index: i, status: r.status, node_id: 'n', attempt: 0, error: null, created_at: 0, updated_at: 0 })),
    results: (taskId) => byTask.get(taskId)!.results,
    result: () => null,
    session: () => null,
    nodes: () => [],
    health: () => ({}),
  };
  const state = await dashboardState(src, 1_000);
  expect(state.tasks.map((t) => [t.task_id, t.pass_at_1])).toEqual([['x', null], ['c', 0.5]]);
  expect(state.policies.map((p) => [p.tasks, p.pass_at_1])).toEqual([[1, 0.5]]);
});

test('dashboard: a retry folds into its task (one row, each sample by its last attempt, pass@1 over those), archived runs too', async () => {
  const clock = { now: 1_000 };
  const store = openStore(':memory:', { clock: () => clock.now });
  try {
    seedRun(store, clock, 'a');
    const row = (t: DashboardTask) => [t.task_id, t.status, t.finished, t.rewards, t.session_list.map((s) => [s.sample_index, s.session_id]), t.pass_at_1, t.retried];
    let state = await dashboardState(storeDashboardSource(store), clock.now);
    expect(state.tasks.map(row)).toEqual([['t', 'COMPLETED', 3, [1, 1, 0], [[0, 'a0'], [1, 'ar'], [2, 'a2']], 2 / 3, 1]]);
    expect(state.policies.map((p) => [p.tasks, p.sessions, p.pass_at_1])).toEqual([[1, 3, 2 / 3]]);
    // The re-run attempt's error still happened: listed under its own task and sample.
    expect(state.errors.map((e) => [e.task_id, e.session_id, e.sample_index, e.error])).toEqual([['t', 'a1', 1, INFRA]]);

    // While the retry runs, the task is not finished (and stays off the per-version chart).
    store.tasks.setStatus('t~retry1', 'RUNNING');
    state = await dashboardState(storeDashboardSource(store), clock.now);
    expect(state.tasks.map((t) => [t.task_id, t.status])).toEqual([['t', 'RUNNING']]);
    expect(state.policies).toEqual([]);
    store.tasks.setStatus('t~retry1', 'COMPLETED');

    // `t` runs again: the archived run t@run1 keeps its retry, the new run folds its own.
    store.transaction(() => store.tasks.archiveRun('t'));
    store.transaction(() => store.tasks.archiveRun('t~retry1'));
    seedRun(store, clock, 'b');
    state = await dashboardState(storeDashboardSource(store), clock.now);
    expect(state.tasks.map(row)).toEqual([
      ['t', 'COMPLETED', 3, [1, 1, 0], [[0, 'b0'], [1, 'br'], [2, 'b2']], 2 / 3, 1],
      ['t@run1', 'COMPLETED', 3, [1, 1, 0], [[0, 'a0'], [1, 'ar'], [2, 'a2']], 2 / 3, 1],
    ]);
  } finally {
    store.close();
  }
});
