/**
 * The `polar run` summary text: at most 100 columns whatever the names, a per-task table with — for a sample that
 * was not evaluated, and a warning naming cause and fix when sessions split into several chains or joins were
 * re-rendered (and none when they did not); and, on a hand-made store, the same pass@1 and mean reward as the
 * dashboard: cancelled samples are not judged (out of pass@1's n, and said so), ERROR ones count as failures in pass@1
 * and are out of the mean reward (they have none).
 */
import { expect, test } from 'bun:test';
import type { ResultStatus } from '../../src/core/contracts/index.ts';
import { dashboardState } from '../../src/observe/dashboard/state.ts';
import { formatSplits, summarizeSplits } from '../../src/stack/run-outputs.ts';
import { chainWarning, formatSummaryTable, summarizeRun, SUMMARY_WIDTH, type HarnessSummary, type RunSummary } from '../../src/stack/run-summary.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { storeDashboardSource } from '../support/dashboard.ts';
import { sessionResult } from '../support/records.ts';
import { taskRequest } from '../support/tasks.ts';

function harness(overrides: Partial<HarnessSummary> = {}): HarnessSummary {
  return {
    harness: 'claude-code', tasks: 2, sessions: 4, statuses: { COMPLETED: 4 }, completed: 4, harness_failures: 0, harness_ok: 4, harness_failure_reasons: [],
    pass_at_1: 0.5, mean_reward: 0.5, mean_turns: 3.25, completions: 13, traces: { per_request: 13, prefix_merging: 4 },
    trainer_tokens: { per_request: 91234, prefix_merging: 20345 }, rerender_mismatches: 0, groups_with_reward_variance: 1,
    p50: { init_ms: 120, ready_queue_ms: 0, run_ms: 12_345, postrun_ms: 80, e2e_ms: 12_600 }, trainable_tokens: 1834, chain_breaks: {}, split_sessions: 0,
    chain_roles: { main: 4, side: 1, retry: 0, compaction: 0 }, sessions_with_one_main_chain: 4, retried_sessions: 0, cancelled: 0, unfinished: 0,
    ...overrides,
  };
}

function summary(h: HarnessSummary): RunSummary {
  return {
    harnesses: [h], engine_busy_fraction: 0.42, wall_ms: 30_000,
    tasks: [
      { task_id: 'a-task-with-a-rather-long-identifier-that-goes-on', harness: h.harness, rewards: [1, 0, null], pass_at_1: 1 / 3, cancelled: 0, unfinished: 0, mean_turns: 3, chains: 3, trainable_tokens: 900, failed: 1, retried: 0 },
      { task_id: 'short', harness: h.harness, rewards: [1], pass_at_1: 1, cancelled: 0, unfinished: 0, mean_turns: 4, chains: 1, trainable_tokens: 934, failed: 0, retried: 0 },
    ],
  };
}

test('the summary fits 100 columns and lists each task with — for an unevaluated sample', () => {
  const text = formatSummaryTable(summary(harness({ harness_failures: 1, harness_ok: 3, harness_failure_reasons: ['x '.repeat(150)] })));
  for (const line of text.split('\n')) expect(line.length).toBeLessThanOrEqual(SUMMARY_WIDTH);
  const taskLine = text.split('\n').find((l) => l.startsWith('a-task-with'))!;
  expect(taskLine).toMatch(/^a-task-with-a-rather-long-i…\s+1 0 —\s+0\.33\s+3\.0\s+3\s+900\s+1$/);
  expect(text).toMatch(/^claude-code\s+4\s+4\s+3\s+0\.500\s+3\.25\s+1\.00\s+1834\s+0\s+13s$/m);
  expect(text.replace(/\n {2}/g, ' ')).toContain('claude-code: traces per_request 13 / prefix_merging 4; trainer tokens 91234 / 20345; main chains 4 (4/4 one), side/retry/compact 1/0/0;');
  expect(text).not.toContain('warning:');
  expect(chainWarning(summary(harness()))).toBeNull();
});

test('split chains and re-rendered joins get one warning with the likely cause and the option that fixes it', () => {
  const split = summary(harness({ split_sessions: 3, chain_breaks: { prefix_break: 3 }, traces: { per_request: 13, prefix_merging: 7 } }));
  const warning = chainWarning(split)!;
  expect(warning).toContain('3 of 4 session(s) split into more than one chain (prefix_break 3)');
  expect(warning).toContain('--system-messages in-place');
  expect(warning).toContain('engine.system_messages: in_place');
  const text = formatSummaryTable(split);
  expect(text).toContain('warning: 3 of 4 session(s)');
  for (const line of text.split('\n')) expect(line.length).toBeLessThanOrEqual(SUMMARY_WIDTH);

  const rerendered = chainWarning(summary(harness({ rerender_mismatches: 2 })))!;
  expect(rerendered).toContain('2 join(s) re-rendered');
  expect(rerendered).toContain('--mode token');
  expect(rerendered).not.toContain('split into');

  // dropped_message breaks (OpenClaw's per-request context message) name their own cause, not the template's.
  const dropped = chainWarning(summary(harness({ split_sessions: 2, chain_breaks: { prefix_break: 0, dropped_message: 6 } })))!;
  expect(dropped).toContain('dropped_message 6');
  expect(dropped).toContain('agent.settings.tools_deny');
  expect(dropped).not.toContain('--system-messages');
});

test('the legend explains pass@1 as it does the other columns', () => {
  const text = formatSummaryTable(summary(harness()));
  const legend = text.split('\n').find((l) => l.startsWith('pass@1: '));
  expect(legend).toBeDefined();
  expect(legend).toContain('reward ≥ 1');
  for (const line of text.split('\n')) expect(line.length).toBeLessThanOrEqual(SUMMARY_WIDTH);
});

test('sessions re-run by --max-retries get one line naming the tasks; none without retries', () => {
  const base = summary(harness({ retried_sessions: 2 }));
  const retried = { ...base, tasks: base.tasks.map((t) => (t.task_id === 'short' ? { ...t, retried: 2 } : t)) };
  const text = formatSummaryTable(retried);
  expect(text.replace(/\n {2}/g, ' ')).toContain('retried: 2 session(s) re-run after infrastructure failures; each sample counts by its last attempt (short 2)');
  for (const line of text.split('\n')) expect(line.length).toBeLessThanOrEqual(SUMMARY_WIDTH);
  expect(formatSummaryTable(summary(harness()))).not.toContain('retried:');
});

/** Task `id` with one session per entry: a status with a stored result, or `{session: status}` for a session without one. */
function seed(store: Store, id: string, samples: ({ status: ResultStatus; reward?: number } | { session: string })[], metadata: Record<string, unknown> = {}): void {
  store.tasks.upsert(taskRequest(id, { num_samples: samples.length, metadata }), 'COMPLETED');
  samples.forEach((s, i) => {
    const sessionId = `${id}${i}`;
    const status = 'session' in s ? s.session : s.status;
    store.sessions.insert({ session_id: sessionId, task_id: id, sample_index: i, status });
    if (!('session' in s)) store.results.put(sessionResult(sessionId, id, s.status, s.reward ?? 0, s.status === 'CANCELLED' ? 'cancelled: run deadline' : null));
  });
}

test('summarizeRun: cancelled samples are not judged (pass@1 and mean reward as the dashboard has them), and the summary says how many', async () => {
  const store = openStore(':memory:');
  try {
    // c: two judged samples (1, 0), one cancelled with a result, one cancelled before it had one (run deadline).
    seed(store, 'c', [{ status: 'COMPLETED', reward: 1 }, { status: 'COMPLETED', reward: 0 }, { status: 'CANCELLED' }, { session: 'CANCELLED' }], { split: 'train' });
    // e: a pass and an ERROR (no reward: a failure in pass@1, not a 0 in the mean reward).
    seed(store, 'e', [{ status: 'COMPLETED', reward: 1 }, { status: 'ERROR' }], { split: 'test' });
    // x: every sample cancelled: no pass@1 at all.
    seed(store, 'x', [{ status: 'CANCELLED' }], { split: 'test' });
    const summary = summarizeRun(store, ['c', 'e', 'x']);
    expect(summary.tasks.map((t) => [t.task_id, t.rewards, t.pass_at_1, t.cancelled, t.failed])).toEqual([
      ['c', [1, 0, null, null], 0.5, 2, 0], ['e', [1, null], 0.5, 0, 1], ['x', [null], null, 1, 0],
    ]);
    const [h] = summary.harnesses;
    expect([h!.sessions, h!.cancelled, h!.pass_at_1, h!.mean_reward]).toEqual([7, 3, 0.5, 2 / 3]);
    const text = formatSummaryTable(summary);
    expect(text.replace(/\n {2}/g, ' ')).toContain('cancelled: 3 sample(s) cancelled (task cancel, early stop or run deadline) were not judged: left out of pass@1 and mean reward (c 2, x 1)');
    expect(text).toMatch(/^x\s+—\s+-\s/m);
    for (const line of text.split('\n')) expect(line.length).toBeLessThanOrEqual(SUMMARY_WIDTH);

    // The dashboard reads the same store and shows the same numbers.
    const state = await dashboardState(storeDashboardSource(store), 1_000);
    const dashboard = Object.fromEntries(state.tasks.map((t) => [t.task_id, t.pass_at_1]));
    expect(dashboard).toEqual(Object.fromEntries(summary.tasks.map((t) => [t.task_id, t.pass_at_1])));
    expect(state.policies.map((p) => [p.pass_at_1, p.mean_reward])).toEqual([[h!.pass_at_1!, h!.mean_reward!]]);

    // Per split, by the same rules.
    const splits = summarizeSplits(store, ['c', 'e', 'x']);
    expect(splits).toEqual({
      test: { tasks: 2, sessions: 3, completed: 1, cancelled: 1, unfinished: 0, mean_reward: 1, pass_at_1: 0.5 },
      train: { tasks: 1, sessions: 4, completed: 2, cancelled: 2, unfinished: 0, mean_reward: 0.5, pass_at_1: 0.5 },
    });
    expect(formatSplits(splits)).toContain('split train: 1 task(s), 4 session(s), 2 completed, 2 cancelled, mean reward 0.500, pass@1 0.500');
  } finally {
    store.close();
  }
});

test('summarizeRun after an interrupted run: samples queued again are unfinished, not failures, not harness ok, and said so', async () => {
  const store = openStore(':memory:');
  try {
    // i: one pass, one interrupted and queued again (REGISTERED, no result), one still RUNNING; j: one ERROR, one queued.
    seed(store, 'i', [{ status: 'COMPLETED', reward: 1 }, { session: 'REGISTERED' }, { session: 'RUNNING' }]);
    seed(store, 'j', [{ status: 'ERROR' }, { session: 'REGISTERED' }]);
    const summary = summarizeRun(store, ['i', 'j']);
    expect(summary.tasks.map((t) => [t.task_id, t.rewards, t.pass_at_1, t.unfinished, t.failed])).toEqual([
      ['i', [1, null, null], 1, 2, 0], ['j', [null, null], 0, 1, 1],
    ]);
    const [h] = summary.harnesses;
    expect([h!.sessions, h!.completed, h!.harness_ok, h!.unfinished, h!.pass_at_1, h!.mean_reward]).toEqual([5, 1, 2, 3, 0.5, 1]);
    const text = formatSummaryTable(summary);
    expect(text.replace(/\n {2}/g, ' ')).toContain('unfinished: 3 sample(s) did not finish (an interrupted run queues them again; the same --out resumes them): not judged yet, left out of pass@1 and mean reward (i 2, j 1)');
    expect(text).toMatch(/^i\s+1 — —\s+1\.00\s/m);
    for (const line of text.split('\n')) expect(line.length).toBeLessThanOrEqual(SUMMARY_WIDTH);
    // The dashboard agrees.
    const state = await dashboardState(storeDashboardSource(store), 1_000);
    expect(Object.fromEntries(state.tasks.map((t) => [t.task_id, t.pass_at_1]))).toEqual({ i: 1, j: 0 });
  } finally {
    store.close();
  }
});
