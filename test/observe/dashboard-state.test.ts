/**
 * The dashboard's snapshot (src/observe/dashboard/state.ts) from an in-memory DashboardSource: a task's policy_version
 * is the one its group reports (README, Trainer API: the one sampled version, else the declared one), so tasks
 * sampled after a weight sync (`POST /rollout/admin/policy_version`) land on that version in the per-version chart.
 */
import { expect, test } from 'bun:test';
import type { SessionResult, TaskRequest, Trace } from '../../src/core/records.ts';
import { dashboardState, type DashboardSource } from '../../src/observe/dashboard/state.ts';
import { taskRequest } from '../support/tasks.ts';

function trace(sessionId: string, taskId: string, versions: (string | null)[]): Trace {
  return {
    prompt_ids: [1], response_ids: [2], loss_mask: [1], response_logprobs: [-0.5], prompt_messages: [], response_messages: [], tools: [],
    finish_reason: { unified: 'stop', raw: 'stop' }, reward: 1,
    metadata: { session_id: sessionId, task_id: taskId, builder: 'prefix_merging', harness: 'pi', completion_ids: ['c'], policy_versions: versions },
  };
}

function result(sessionId: string, taskId: string, reward: number, versions: (string | null)[]): SessionResult {
  return {
    session_id: sessionId, task_id: taskId, status: 'COMPLETED', node_id: 'n1', error: null, attempt: 0,
    trajectory: {
      status: 'COMPLETED', traces: [trace(sessionId, taskId, versions)],
      metadata: { reconstruction_stats: { completions: 1, chains: 1, merged: 1, breaks: {} }, evaluation: { outcome_reward: reward }, training_filter: { trainable: true, reasons: [] } },
    },
    timing: { init_ms: 1, ready_queue_ms: 0, run_ms: 1, postrun_ms: 1, build_ms: 0, eval_ms: 0, e2e_ms: 3 },
  };
}

function source(tasks: { task: TaskRequest; results: SessionResult[] }[]): DashboardSource {
  const byTask = new Map(tasks.map((t) => [t.task.task_id, t]));
  return {
    tasks: () => tasks.map((t, i) => ({ task: t.task, status: 'COMPLETED', created_at: i, updated_at: 100 + i })),
    sessions: (taskId) => byTask.get(taskId)!.results.map((r, i) => ({ session_id: r.session_id, task_id: taskId, sample_index: i, status: r.status, node_id: 'n1', attempt: 0, error: null, created_at: 0, updated_at: 0 })),
    results: (taskId) => byTask.get(taskId)!.results,
    result: () => null,
    session: () => null,
    nodes: () => [],
    health: () => ({}),
  };
}

test('a task sampled at one policy_version shows that version, in its row and in the per-version chart, as its group does', async () => {
  const undeclared = taskRequest('after-sync', { num_samples: 2 });
  const declared = taskRequest('declared', { num_samples: 2, metadata: { policy_version: '7' } });
  const mixed = taskRequest('mixed', { num_samples: 2, metadata: { policy_version: '2' } });
  const before = taskRequest('before-sync', { num_samples: 2 });
  const state = await dashboardState(source([
    { task: undeclared, results: [result('a0', 'after-sync', 1, ['3', '3']), result('a1', 'after-sync', 0, ['3'])] },
    { task: declared, results: [result('d0', 'declared', 1, [null]), result('d1', 'declared', 1, [null])] },
    { task: mixed, results: [result('m0', 'mixed', 1, ['1']), result('m1', 'mixed', 0, ['2'])] },
    { task: before, results: [result('b0', 'before-sync', 0, [null]), result('b1', 'before-sync', 0, [null])] },
  ]), 1_000);
  const byId = Object.fromEntries(state.tasks.map((t) => [t.task_id, t.policy_version]));
  // Sampled at exactly one version: that one; none sampled: the declared one; several: the declared one.
  expect(byId).toEqual({ 'after-sync': '3', declared: '7', mixed: '2', 'before-sync': null });
  expect(state.policies.map((p) => [p.policy_version, p.tasks, p.mean_reward])).toEqual([['3', 1, 0.5], ['7', 1, 1], ['2', 1, 0.5], ['none', 1, 0]]);
});

test('the snapshot counts the sessions the server has not dispatched yet, which no node stage holds', async () => {
  const task = taskRequest('waiting', { num_samples: 2 });
  const src = { ...source([{ task, results: [] }]), undispatched: () => 214 };
  expect((await dashboardState(src, 1_000)).undispatched).toBe(214);
  // A source without the count (e.g. an older server's) reads as none waiting, never as undefined in the page.
  expect((await dashboardState(source([{ task, results: [] }]), 1_000)).undispatched).toBe(0);
});
