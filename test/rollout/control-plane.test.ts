/**
 * The rollout server's control plane against fake gateway nodes (test/support/fake-node.ts): a task is validated at
 * submit with the gateway's own rules; every dispatch answer is classified (a refusal fails that session only, a 409
 * is adopted, transport failures count toward the node's health); results carry their attempt and a stale one is
 * ignored in both orders; a finished task_id runs again as a new run; cancels and early stops read the same in every
 * view; a task with no usable session is FAILED and serves no group.
 */
import { afterEach, expect, test } from 'bun:test';
import type { SessionResult, TrajectoryStatus } from '../../src/core/records.ts';
import type { DispatchSpec } from '../../src/rollout/node-client.ts';
import { RolloutServer } from '../../src/rollout/server.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { startFakeGatewayNode } from '../support/fake-node.ts';
import { taskRequest } from '../support/tasks.ts';
import { post, until } from '../support/poll.ts';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

const capacity = { init_workers: 2, ready_buffer: 2, max_run_workers: 4, postrun_workers: 2 };
let clockNow = 5_000_000;
const clock = () => clockNow;

function setup(answer?: (spec: DispatchSpec) => Response | null) {
  const store: Store = openStore(':memory:');
  const server = new RolloutServer({ store, clock, tickMs: 60_000, heartbeatTimeoutMs: 5_000 }).start();
  const node = startFakeGatewayNode(undefined, answer);
  cleanups.push(() => store.close(), () => server.stop(), () => node.stop());
  return { store, server, node };
}

const task = (id: string, extra: Record<string, unknown> = {}) => ({ ...taskRequest(id, { num_samples: 2 }), ...extra });

function resultFor(spec: DispatchSpec, reward: number, status: TrajectoryStatus = 'COMPLETED', attempt = spec.attempt ?? 0): SessionResult {
  return {
    session_id: spec.session_id, task_id: spec.task.task_id, status, node_id: 'n1', error: status === 'COMPLETED' ? null : 'boom', attempt,
    trajectory: {
      status, traces: [],
      metadata: { reconstruction_stats: { completions: 0, chains: 0, merged: 0, breaks: {} }, evaluation: { outcome_reward: reward }, training_filter: { trainable: status === 'COMPLETED', reasons: [] }, attempt },
    },
    timing: { init_ms: 1, ready_queue_ms: 0, run_ms: 1, postrun_ms: 1, build_ms: 0, eval_ms: 0, e2e_ms: 3 },
  };
}

test('submit validates the whole TaskRequest with the gateway\'s rules and answers 400 naming the field', async () => {
  const { server, store } = setup();
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ agent: { harness: 'openhands_sdk', model_name: 'm' } }, /agent\.harness: unknown harness "openhands_sdk"/],
    [{ agent: { harness: 'shell', model_name: 'm' } }, /agent\.command: the shell harness needs a command/],
    [{ evaluator: { strategy: 'harbor_rubric' } }, /evaluator\.strategy: unknown evaluator "harbor_rubric"/],
    [{ evaluator: { strategy: 'harbor' } }, /evaluator\.config\.tests_dir/],
    [{ evaluator: { strategy: 'test_on_output', config: { command: 'true', expect_exit_cod: 0 } } }, /evaluator\.config\.expect_exit_cod: unknown key/],
    [{ runtime: { kind: 'local', isolaton: 'bwrap' } }, /runtime\.isolaton: unknown key/],
    [{ runtime: { kind: 'local', prepare: [{ upload_dir: { src: '/tmp', dest: '../escape' } }] } }, /runtime\.prepare\[0\]\.upload_dir\.dest: .*leaves the session work directory/],
    [{ agnet: {} }, /agnet: unknown key/],
  ];
  for (const [extra, message] of cases) {
    const r = await post(`${server.url}/rollout/task/submit`, task('bad', extra));
    expect(r.status).toBe(400);
    expect(String(r.body.error)).toMatch(message);
  }
  expect(store.tasks.get('bad')).toBeNull();
});

test('node registration, heartbeat and handback are strict at every depth: an unknown key is a 400 naming its path, and all issues at once', async () => {
  const { server, node } = setup();
  const stages = { init: 0, ready: 0, running: 0, postrun: 0, queued: 0 };
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['/nodes/register', { node_id: 'n1', url: node.url, capacity, zzz: 1 }, /zzz: unknown key/],
    ['/nodes/register', { node_id: 'n1', url: node.url, capacity: { ...capacity, max_run_worker: 1 } }, /capacity\.max_run_worker: unknown key/],
    ['/nodes/n1/heartbeat', { zzz: 1 }, /stages: .*; zzz: unknown key/],
    ['/nodes/n1/heartbeat', { stages: { ...stages, runing: 1 } }, /stages\.runing: unknown key/],
    ['/nodes/n1/heartbeat', { stages, pools: { init_workers: 1, ready_buffer: 1, postrun_workers: 1 } }, /pools\.postrun_workers: unknown key/],
    ['/nodes/n1/handback', { session_ids: ['s'], resaon: 'typo' }, /resaon: unknown key/],
  ];
  expect((await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity })).status).toBe(200);
  for (const [path, body, message] of cases) {
    const r = await post(`${server.url}${path}`, body);
    expect({ path, status: r.status }).toEqual({ path, status: 400 });
    expect(String(r.body.error)).toMatch(message);
  }
  // The node registered first is unchanged by the refused re-registration.
  expect(server.listNodes().map((n) => [n.node_id, n.capacity.max_run_workers])).toEqual([['n1', capacity.max_run_workers]]);
});

test('a gateway refusal fails that session only: no retry, the node stays healthy, the good task beside it completes', async () => {
  const { server, store, node } = setup((spec) => (spec.task.task_id === 'poison' ? Response.json({ error: 'unknown harness "x"' }, { status: 400 }) : null));
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity });
  await post(`${server.url}/rollout/task/submit`, task('good'));
  await post(`${server.url}/rollout/task/submit`, task('poison'));
  await until(() => node.dispatched.length === 2 && store.tasks.get('poison')?.status === 'FAILED');
  await server.tick();
  await server.tick();
  expect(server.listNodes()[0]!.healthy).toBe(true);
  expect(node.cancelled).toEqual([]);
  const poison = server.taskStatus('poison')!;
  expect(poison.sessions.map((s) => s.status)).toEqual(['ERROR', 'ERROR']);
  expect(poison.sessions.every((s) => s.error?.includes('refused by gateway n1: HTTP 400: unknown harness "x"'))).toBe(true);
  expect(poison.error).toContain('no session of the task is usable');
  for (const spec of node.dispatched) await post(`${server.url}/callbacks/session_result`, resultFor(spec, 1));
  expect(store.tasks.get('good')?.status).toBe('COMPLETED');
  expect(server.readyGroups().map((g) => [g.task_id, g.sessions.length])).toEqual([['good', 2]]);
  expect(node.dispatched.every((d) => d.task.task_id === 'good')).toBe(true);
});

test('409 "already exists" is adopted with the attempt the node runs; nothing is cancelled or dispatched again', async () => {
  const { server, store, node } = setup((spec) => Response.json({ error: 'already exists', session_id: spec.session_id, attempt: 0, status: 'RUNNING' }, { status: 409 }));
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity });
  await post(`${server.url}/rollout/task/submit`, task('t'));
  await until(() => store.sessions.listByTask('t').every((s) => s.status === 'INITIALIZING'));
  await server.tick();
  const sessions = store.sessions.listByTask('t');
  expect(sessions.every((s) => s.node_id === 'n1' && s.attempt === 0)).toBe(true);
  expect(server.listNodes()[0]!.healthy).toBe(true);
  expect(node.cancelled).toEqual([]);
  for (const s of sessions) {
    const r = await post(`${server.url}/callbacks/session_result`, resultFor({ session_id: s.session_id, task: task('t') as never, sample_index: s.sample_index, attempt: 0 }, 1));
    expect(r.body.accepted).toBe(true);
  }
  expect(store.tasks.get('t')?.status).toBe('COMPLETED');
});

test('transport failures count toward the node: three in a row take it out of rotation, nothing it runs is cancelled', async () => {
  let failing = false;
  const { server, store, node } = setup(() => (failing ? new Response('overloaded', { status: 503 }) : null));
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity });
  await post(`${server.url}/rollout/task/submit`, task('running', { num_samples: 1 }));
  await until(() => node.dispatched.length === 1);
  failing = true;
  await post(`${server.url}/rollout/task/submit`, task('later', { num_samples: 1 }));
  for (let i = 0; i < 5 && server.listNodes()[0]!.healthy; i++) await server.tick(); // the timer's retries
  expect(server.listNodes()[0]!.healthy).toBe(false);
  const later = store.sessions.listByTask('later')[0]!;
  expect(later.status).toBe('REGISTERED');
  expect(later.attempt).toBeGreaterThanOrEqual(3);
  expect(node.cancelled).toEqual([]);
  expect(store.sessions.listByTask('running')[0]!.status).toBe('INITIALIZING');
  // The next heartbeat brings it back; the queued session goes out again.
  failing = false;
  await post(`${server.url}/nodes/n1/heartbeat`, { stages: { init: 0, ready: 0, running: 1, postrun: 0, queued: 0 } });
  await until(() => node.dispatched.length === 2);
  expect(node.dispatched[1]!.session_id).toBe(later.session_id);
});

test('a node that leaves (stopping on a signal): its sessions are queued again with attempt + 1 at once and go to another node; 404 for an unknown node', async () => {
  const { server, store, node } = setup();
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity });
  await post(`${server.url}/rollout/task/submit`, task('t'));
  await until(() => node.dispatched.length === 2);
  // A stopping node drains first, then leaves: gone, it counts as unhealthy (an alert on unhealthy nodes must fire).
  expect((await fetch(`${server.url}/nodes/n1`, { method: 'DELETE' })).status).toBe(200);
  const left = await post(`${server.url}/nodes/n1/leave`, {});
  expect(left.body).toEqual({ node_id: 'n1', requeued: 2 });
  expect(server.listNodes()[0]!.healthy).toBe(false);
  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  expect(metrics).toContain('polar_rollout_nodes{state="unhealthy"} 1');
  expect(metrics).toContain('polar_rollout_nodes{state="draining"} 0');
  expect(store.sessions.listByTask('t').map((s) => [s.status, s.attempt, s.node_id])).toEqual([['REGISTERED', 1, null], ['REGISTERED', 1, null]]);
  expect(store.tasks.get('t')?.status).toBe('RUNNING');
  // The node comes back (a restart: it holds nothing): the queued sessions go out again as attempt 1.
  node.forget();
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity });
  await until(() => node.dispatched.length === 4);
  await Bun.sleep(100); // the re-registration's reconcile has answered: nothing is dispatched a third time
  expect(node.dispatched).toHaveLength(4);
  expect(node.dispatched.slice(2).map((d) => d.attempt)).toEqual([1, 1]);
  expect((await post(`${server.url}/nodes/nope/leave`, {})).status).toBe(404);
});

test('a result of a stale attempt is ignored whichever arrives first', async () => {
  const { server, store, node } = setup();
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity });
  await post(`${server.url}/rollout/task/submit`, task('t'));
  await until(() => node.dispatched.length === 2);
  // Both sessions go back to the queue with attempt 1 (the node "forgot" them) and are dispatched again.
  node.forget();
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity });
  await until(() => node.dispatched.length === 4);
  await Bun.sleep(100); // the re-registration's reconcile has answered: nothing is dispatched a third time
  expect(node.dispatched).toHaveLength(4);
  const [a0, b0, a1, b1] = [node.dispatched[0]!, node.dispatched[1]!, ...node.dispatched.slice(2).sort((x, y) => (x.session_id === node.dispatched[0]!.session_id ? -1 : y.session_id === node.dispatched[0]!.session_id ? 1 : 0))];
  expect(a1!.session_id).toBe(a0.session_id);
  expect([a1!.attempt, b1!.attempt]).toEqual([1, 1]);
  // Stale first, then current.
  expect((await post(`${server.url}/callbacks/session_result`, resultFor(a0, 0))).body).toMatchObject({ accepted: false, stale: true });
  expect((await post(`${server.url}/callbacks/session_result`, resultFor(a1!, 1))).body).toMatchObject({ accepted: true });
  // Current first, then stale.
  expect((await post(`${server.url}/callbacks/session_result`, resultFor(b1!, 1))).body).toMatchObject({ accepted: true });
  expect((await post(`${server.url}/callbacks/session_result`, resultFor(b0, 0))).body).toMatchObject({ accepted: false, stale: true });
  expect(store.results.listByTask('t').map((r) => r.attempt)).toEqual([1, 1]);
  expect(server.readyGroups()[0]!.rewards).toEqual([1, 1]);
});

test('a finished task_id submitted again runs as a new run; the old run stays stored apart and is never served as the new one', async () => {
  const { server, store, node } = setup();
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity });
  await post(`${server.url}/rollout/task/submit`, task('t'));
  await until(() => node.dispatched.length === 2);
  for (const spec of node.dispatched) await post(`${server.url}/callbacks/session_result`, resultFor(spec, 0));
  expect(server.readyGroups().map((g) => g.rewards)).toEqual([[0, 0]]);
  expect((await post(`${server.url}/rollout/groups/t/ack`, {})).body.acked).toBe(true);
  const again = await post(`${server.url}/rollout/task/submit`, task('t'));
  expect(again.body).toMatchObject({ status: 'running', previous_run: 't@run1' });
  expect(server.taskStatus('t')!.sessions.every((s) => s.status !== 'COMPLETED')).toBe(true);
  expect(server.readyGroups()).toEqual([]);
  await until(() => node.dispatched.length === 4);
  for (const spec of node.dispatched.slice(2)) await post(`${server.url}/callbacks/session_result`, resultFor(spec, 1));
  expect(server.readyGroups().map((g) => [g.task_id, g.rewards])).toEqual([['t', [1, 1]]]);
  expect(store.results.listByTask('t@run1').map((r) => r.task_id)).toEqual(['t@run1', 't@run1']);
  expect(store.tasks.get('t@run1')?.status).toBe('COMPLETED');

  // A run whose group was read but not acknowledged before the id came back: the group is retired with the run (not
  // served again as t@run2), stays readable there, and the trainer's ack of 't' reaches the new run's group.
  const third = await post(`${server.url}/rollout/task/submit`, task('t'));
  expect(third.body).toMatchObject({ previous_run: 't@run2' });
  expect(server.readyGroups()).toEqual([]);
  expect((await fetch(`${server.url}/rollout/groups/t@run2/trajectories`)).status).toBe(200);
  await until(() => node.dispatched.length === 6);
  for (const spec of node.dispatched.slice(4)) await post(`${server.url}/callbacks/session_result`, resultFor(spec, 1));
  expect(server.readyGroups().map((g) => g.task_id)).toEqual(['t']);
  expect((await post(`${server.url}/rollout/groups/t/ack`, {})).body.acked).toBe(true);
  expect(server.readyGroups()).toEqual([]);
});

test('early stop: a session cancelled by it is CANCELLED in the task view and the stored result, even when it later completes', async () => {
  const { server, store, node } = setup();
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity });
  await post(`${server.url}/rollout/task/submit`, task('t', { num_samples: 3, early_stop_min_usable_sessions: 1 }));
  await until(() => node.dispatched.length === 3);
  await post(`${server.url}/callbacks/session_result`, resultFor(node.dispatched[0]!, 1));
  expect(store.tasks.get('t')?.status).toBe('COMPLETED');
  const late = node.dispatched[1]!;
  await post(`${server.url}/callbacks/session_result`, resultFor(late, 1));
  const view = server.taskStatus('t')!.sessions.find((s) => s.session_id === late.session_id)!;
  expect(view.status).toBe('CANCELLED');
  expect(store.results.get(late.session_id)?.status).toBe('CANCELLED');
  expect(store.results.get(late.session_id)?.error).toContain('early stop');
  expect(server.readyGroups()[0]!.sessions.map((s) => s.session_id)).toEqual([node.dispatched[0]!.session_id]);
});

test('a task whose sessions all failed is FAILED with the reasons, and no empty group is served', async () => {
  const { server, store, node } = setup();
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity });
  await post(`${server.url}/rollout/task/submit`, task('t'));
  await until(() => node.dispatched.length === 2);
  for (const spec of node.dispatched) await post(`${server.url}/callbacks/session_result`, resultFor(spec, 0, 'ERROR'));
  expect(store.tasks.get('t')?.status).toBe('FAILED');
  expect(server.taskStatus('t')!.error).toContain('boom');
  // The reference's word for a batch whose sessions all ended in errors is "completed" (with those results).
  expect(server.taskStatus('t')).toMatchObject({ status: 'completed', polar_status: 'FAILED', completed_sessions: 2 });
  expect(server.readyGroups()).toEqual([]);
});

test('a node whose heartbeat says its engine is down gets no sessions until it says the engine is back', async () => {
  const { server, node } = setup();
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity });
  const idle = { queued: 0, init: 0, ready: 0, running: 0, postrun: 0 };
  expect((await post(`${server.url}/nodes/n1/heartbeat`, { stages: idle, engine_ok: false })).status).toBe(200);
  expect(server.listNodes()[0]).toMatchObject({ healthy: true, engine_ok: false });
  await post(`${server.url}/rollout/task/submit`, task('t'));
  await Bun.sleep(150);
  expect(node.dispatched).toHaveLength(0);
  await post(`${server.url}/nodes/n1/heartbeat`, { stages: idle, engine_ok: true });
  await until(() => node.dispatched.length === 2);
});
