/**
 * Rollout server unit tests against fake gateway nodes (the dispatch contract of docs/architecture.md#contracts on Bun.serve port 0) and a real SQLite store:
 * submit/expand, scheduler choice, idempotent callbacks, early stop, groups + advantages + ack (trainer side),
 * heartbeat timeout re-dispatch, control-plane token, restart from the same database.
 */
import { cancelledText } from '../../src/core/contracts/index.ts';
import { cancelledError } from '../../src/gateway/node-types.ts';
import { afterAll, afterEach, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SessionResult, TrajectoryStatus } from '../../src/core/records.ts';
import type { DispatchSpec } from '../../src/rollout/node-client.ts';
import { pickNode, type SchedulableNode } from '../../src/rollout/scheduler.ts';
import { RolloutServer } from '../../src/rollout/server.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { taskRequest } from '../support/tasks.ts';
import { startFakeGatewayNode } from '../support/fake-node.ts';
import { post, until } from '../support/poll.ts';

const scratch = mkdtempSync(join(tmpdir(), 'polar-rollout-'));
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const capacity = { init_workers: 2, ready_buffer: 2, max_run_workers: 2, postrun_workers: 2 };
const idle = { init: 0, ready: 0, running: 0, postrun: 0, queued: 0 };

/** A fake gateway node (test/support/fake-node.ts), stopped after the file. */
function fakeNode(token?: string) {
  const node = startFakeGatewayNode(token);
  cleanups.push(() => node.stop());
  return node;
}

function resultFor(spec: Pick<DispatchSpec, 'session_id' | 'task'>, reward: number, nodeId = 'n1', status: TrajectoryStatus = 'COMPLETED'): SessionResult {
  return {
    session_id: spec.session_id,
    task_id: spec.task.task_id,
    status,
    trajectory: {
      status,
      traces: [],
      metadata: { reconstruction_stats: { completions: 3, chains: 2, merged: 3, breaks: {}, chain_roles: { main: 1, side: 1, retry: 0, compaction: 0 } }, evaluation: { outcome_reward: reward }, training_filter: { trainable: status === 'COMPLETED', reasons: [] } },
    },
    timing: { init_ms: 1, ready_queue_ms: 0, run_ms: 2, postrun_ms: 1, build_ms: 0, eval_ms: 1, e2e_ms: 5 },
    node_id: nodeId,
    error: null,
    attempt: (spec as DispatchSpec).attempt ?? 0,
  };
}

/** Extras may be invalid on purpose (validation tests), so they are spread over the factory's task. */
const task = (id: string, extra: Record<string, unknown> = {}) => ({
  ...taskRequest(id, { num_samples: 4, agent: { harness: 'shell', command: 'true', model_name: 'sim' } }),
  ...extra,
});

let clockNow = 1_000_000;
const clock = () => clockNow;

function makeServer(store: Store, extra: Partial<ConstructorParameters<typeof RolloutServer>[0]> = {}) {
  const server = new RolloutServer({ store, clock, tickMs: 60_000, heartbeatTimeoutMs: 5_000, ...extra }).start();
  cleanups.push(() => server.stop());
  return server;
}

test('pickNode: run queue first, then postrun, init, READY gap; skips unhealthy, draining, engine-down and full nodes', () => {
  const node = (id: string, stages: Partial<typeof idle>, extra: Partial<SchedulableNode> = {}): SchedulableNode => ({
    node_id: id, healthy: true, draining: false, capacity, stages: { ...idle, ...stages }, in_flight: 0, dispatched_since_heartbeat: 0, ...extra,
  });
  expect(pickNode([node('a', { running: 2 }), node('b', { running: 1, postrun: 2 })])?.node_id).toBe('b');
  expect(pickNode([node('a', { postrun: 1 }), node('b', { init: 2 })])?.node_id).toBe('b');
  expect(pickNode([node('a', { init: 1 }), node('b', { init: 1, ready: 1 })])?.node_id).toBe('a');
  expect(pickNode([node('a', {}, { dispatched_since_heartbeat: 1 }), node('b', { running: 1 }, { dispatched_since_heartbeat: 1 })])?.node_id).toBe('a');
  expect(pickNode([node('a', {}, { healthy: false }), node('b', { running: 2 })])?.node_id).toBe('b');
  expect(pickNode([node('a', {}, { draining: true })])).toBeNull();
  expect(pickNode([node('a', {}, { in_flight: 8 })])).toBeNull();
  // A node whose engine is down gets nothing (its harnesses would fail on 502s); not reported counts as up.
  expect(pickNode([node('a', {}, { engine_ok: false }), node('b', { running: 3 })])?.node_id).toBe('b');
  expect(pickNode([node('a', {}, { engine_ok: false })])).toBeNull();
  expect(pickNode([node('a', {}, { engine_ok: null })])?.node_id).toBe('a');
});

test('submit expands into num_samples secret sessions, dispatches them, and is idempotent per task_id', async () => {
  const store = openStore(':memory:');
  cleanups.push(() => store.close());
  const server = makeServer(store);
  const node = fakeNode();
  expect((await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity })).status).toBe(200);
  const first = await post(`${server.url}/rollout/task/submit`, task('t1'));
  expect(first).toEqual({ status: 200, body: { task_id: 't1', status: 'running', sessions: 4, previous_run: null } });
  // A running task_id is refused, creating nothing.
  const again = await post(`${server.url}/rollout/task/submit`, task('t1'));
  expect(again.status).toBe(409);
  expect(String(again.body.error)).toContain('t1 is running');
  const sessions = store.sessions.listByTask('t1');
  expect(sessions.map((s) => s.sample_index)).toEqual([0, 1, 2, 3]);
  expect(new Set(sessions.map((s) => s.session_id)).size).toBe(4);
  for (const s of sessions) expect(s.session_id).toMatch(/^ps_[A-Za-z0-9_-]{43}$/);
  await until(() => node.dispatched.length === 4);
  expect(node.dispatched[0]!.callback_url).toBe(`${server.url}/callbacks/session_result`);
  expect(store.sessions.listByTask('t1').every((s) => s.node_id === 'n1' && s.status === 'INITIALIZING')).toBe(true);
  const bad = await post(`${server.url}/rollout/task/submit`, { ...task('t2'), num_samples: 0 });
  expect(bad.status).toBe(400);
  expect(String(bad.body.error)).toContain('num_samples');
});

test("submit refuses a harness's misspelt or mistyped agent.settings with a 400 naming the path, in either spelling, and stores nothing", async () => {
  const store = openStore(':memory:');
  cleanups.push(() => store.close());
  const server = makeServer(store);
  const misspelt = await post(`${server.url}/rollout/task/submit`, task('pi-typo', { agent: { harness: 'pi', model_name: 'm', settings: { contex_window: 65536 } } }));
  expect(misspelt.status).toBe(400);
  expect(String(misspelt.body.error)).toContain('agent.settings.contex_window: unknown key');
  const mistyped = await post(`${server.url}/rollout/task/submit`, task('pi-type', { agent: { harness: 'pi', model_name: 'm', settings: { api: 'openai', sampling_params: { temperature: 1 } } } }));
  expect(mistyped.status).toBe(400);
  expect(String(mistyped.body.error)).toMatch(/agent\.settings\.api: .*anthropic-messages/);
  // The Python Polar's spelling (reference-task.ts) reaches the same check.
  const reference = await post(`${server.url}/rollout/task/submit`, { task_id: 'ref', instruction: 'x', agent: { harness: 'pi', import_path: null, settings: { api_typ: 'openai-completions' } } });
  expect(reference.status).toBe(400);
  expect(String(reference.body.error)).toContain('agent.settings.api_typ: unknown key');
  expect(['pi-typo', 'pi-type', 'ref'].map((id) => store.tasks.get(id))).toEqual([null, null, null]);
  // Valid settings with the gateway-read sampling keys are accepted.
  const ok = await post(`${server.url}/rollout/task/submit`, task('pi-ok', { agent: { harness: 'pi', model_name: 'm', settings: { context_window: 65536, sampling_params: { temperature: 1 } } } }));
  expect(ok.status).toBe(200);
});

test('a deep queue is dispatched up to the free slots, higher dispatch_priority first; a result frees a slot for the next', async () => {
  const store = openStore(':memory:');
  cleanups.push(() => store.close());
  const server = makeServer(store);
  const node = fakeNode();
  const one = { init_workers: 1, ready_buffer: 2, max_run_workers: 1, postrun_workers: 1 }; // 3 slots before POSTRUN
  expect((await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity: one })).status).toBe(200);
  expect((await post(`${server.url}/rollout/task/submit`, task('bulk', { num_samples: 40 }))).status).toBe(200);
  await until(() => node.dispatched.length === 3);
  expect((await post(`${server.url}/rollout/task/submit`, task('urgent', { num_samples: 2, dispatch_priority: 10 }))).status).toBe(200);
  await server.pump();
  expect(node.dispatched.length).toBe(3);
  expect(store.sessions.countByStatus('REGISTERED')).toBe(39);
  // One result frees one slot: it goes to the urgent task, not to the 37 older bulk sessions.
  expect((await post(`${server.url}/callbacks/session_result`, resultFor(node.dispatched[0]!, 1))).status).toBe(200);
  await until(() => node.dispatched.length === 4);
  await server.pump();
  expect(node.dispatched.length).toBe(4);
  expect(node.dispatched[3]!.task.task_id).toBe('urgent');
  expect(store.sessions.listByTask('bulk').filter((s) => s.status === 'INITIALIZING').length).toBe(2);
});

test('the dispatcher sends a node only what its pipeline can start: the rest waits on the server for the next free node', async () => {
  const store = openStore(':memory:');
  cleanups.push(() => store.close());
  const server = makeServer(store);
  const gw1 = fakeNode();
  const gw2 = fakeNode();
  const full = { init_workers: 4, ready_buffer: 4, max_run_workers: 8, postrun_workers: 4 }; // 12 before POSTRUN
  expect((await post(`${server.url}/nodes/register`, { node_id: 'gw-2', url: gw2.url, capacity: full })).status).toBe(200);
  expect((await post(`${server.url}/rollout/task/submit`, task('batch', { num_samples: 40 }))).status).toBe(200);
  await until(() => gw2.dispatched.length === 12);
  const beat = (id: string, stages: Partial<typeof idle>) => post(`${server.url}/nodes/${id}/heartbeat`, { stages: { ...idle, ...stages } });
  expect((await beat('gw-2', { running: 8, init: 4 })).status).toBe(200);
  await server.pump();
  expect(gw2.dispatched.length).toBe(12);
  expect(store.sessions.countByStatus('REGISTERED')).toBe(28);
  // gw-1 (re)joins: the sessions still on the server go to it, not into gw-2's queue.
  expect((await post(`${server.url}/nodes/register`, { node_id: 'gw-1', url: gw1.url, capacity: full })).status).toBe(200);
  await until(() => gw1.dispatched.length === 12);
  await server.pump();
  expect(gw2.dispatched.length).toBe(12);
  // 4 of gw-2's sessions left RUN for POSTRUN (its READY ones took their RUN slots): INIT/READY is refilled with 4.
  expect((await beat('gw-2', { running: 8, postrun: 4 })).status).toBe(200);
  await until(() => gw2.dispatched.length === 16);
  await server.pump();
  expect(gw2.dispatched.length).toBe(16);
  expect(store.sessions.countByStatus('REGISTERED')).toBe(12);
});

test('a result whose callback never arrived is fetched from the node after two heartbeats report the session ended', async () => {
  const store = openStore(':memory:');
  cleanups.push(() => store.close());
  const server = makeServer(store);
  const node = fakeNode();
  expect((await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity })).status).toBe(200);
  expect((await post(`${server.url}/rollout/task/submit`, task('lost', { num_samples: 2 }))).status).toBe(200);
  await until(() => node.dispatched.length === 2);
  const [a, b] = node.dispatched;
  // The node finished both; only b's callback reached the server.
  node.results.set(a!.session_id, resultFor(a!, 1));
  node.results.set(b!.session_id, resultFor(b!, 0));
  expect((await post(`${server.url}/callbacks/session_result`, resultFor(b!, 0))).status).toBe(200);
  const beat = () => post(`${server.url}/nodes/n1/heartbeat`, { stages: idle, sessions: { [a!.session_id]: 'COMPLETED', [b!.session_id]: 'COMPLETED' } });
  expect((await beat()).status).toBe(200);
  await Bun.sleep(50);
  expect(node.lookups).toEqual([]); // one sighting: its callback may still be in flight
  expect((await beat()).status).toBe(200);
  await until(() => store.sessions.get(a!.session_id)?.status === 'COMPLETED');
  expect(node.lookups).toEqual([a!.session_id]); // b has its result: never asked for
  expect(store.results.get(a!.session_id)?.trajectory.metadata.evaluation).toEqual({ outcome_reward: 1 });
  await until(() => store.tasks.get('lost')?.status === 'COMPLETED');
  expect((store.groups.get('lost')?.data as { rewards?: number[] }).rewards).toEqual([1, 0]);
});

test('results are idempotent; the group carries GRPO and leave-one-out advantages; a trainer never gets a group twice; callback_url once', async () => {
  const store = openStore(':memory:');
  cleanups.push(() => store.close());
  const trainerCalls: unknown[] = [];
  const trainer = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: async (req) => (trainerCalls.push(await req.json()), new Response('ok')) });
  cleanups.push(() => trainer.stop(true));
  const server = makeServer(store);
  const node = fakeNode();
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity });
  await post(`${server.url}/rollout/task/submit`, task('t1', { callback_url: `http://127.0.0.1:${trainer.port}/done`, metadata: { group_id: 'g1' } }));
  await until(() => node.dispatched.length === 4);
  const rewards = [1, 0, 1, 1];
  const bySample = [...node.dispatched].sort((a, b) => a.sample_index - b.sample_index);
  for (const [i, spec] of bySample.entries()) {
    const r = await post(`${server.url}/callbacks/session_result`, resultFor(spec, rewards[i]!));
    expect(r.body).toEqual({ session_id: spec.session_id, accepted: true, duplicate: false, stale: false });
  }
  const dup = await post(`${server.url}/callbacks/session_result`, resultFor(bySample[0]!, 0));
  expect(dup).toEqual({ status: 200, body: { session_id: bySample[0]!.session_id, accepted: false, duplicate: true, stale: false } });
  expect(store.results.listByTask('t1').length).toBe(4);

  // Trainer side: pull, check advantages, ack, pull again.
  const pulled = (await (await fetch(`${server.url}/rollout/groups?ready=1`)).json()) as { groups: { group_id: string; rewards: number[]; grpo_advantages: number[]; loo_advantages: number[] }[] };
  expect(pulled.groups.map((g) => g.group_id)).toEqual(['g1']);
  const g = pulled.groups[0]!;
  expect(g.rewards).toEqual(rewards);
  // Each session reports its chains by role, so a trainer sees main-chain counts apart from side chains.
  expect((g as unknown as { sessions: { chain_roles: unknown; traces: number }[] }).sessions.map((s) => [s.chain_roles, s.traces])).toEqual(
    rewards.map(() => [{ main: 1, side: 1, retry: 0, compaction: 0 }, 0]),
  );
  const mean = 0.75;
  const std = Math.sqrt(rewards.reduce((s, r) => s + (r - mean) ** 2, 0) / 4);
  g.grpo_advantages.forEach((a, i) => expect(a).toBeCloseTo((rewards[i]! - mean) / (std + 1e-6), 6));
  g.loo_advantages.forEach((a, i) => expect(a).toBeCloseTo(rewards[i]! - (3 - rewards[i]!) / 3, 9));
  // Groups are per task: the ack names the task_id; group_id is the label from metadata.
  expect((await post(`${server.url}/rollout/groups/t1/ack`, {})).body).toEqual({ task_id: 't1', group_id: 'g1', acked: true });
  expect((await post(`${server.url}/rollout/groups/t1/ack`, {})).body.acked).toBe(false);
  expect(((await (await fetch(`${server.url}/rollout/groups?ready=1`)).json()) as { groups: unknown[] }).groups).toEqual([]);

  await until(() => trainerCalls.length === 1);
  await server.tick();
  await Bun.sleep(20);
  expect(trainerCalls).toHaveLength(1);
  expect((trainerCalls[0] as { task_id: string; status: string }).status).toBe('completed');
  expect(store.taskCallbacks.get('t1')?.state).toBe('done');
  const status = (await (await fetch(`${server.url}/rollout/task/t1`)).json()) as { status: string; polar_status: string; sessions: { reward: number }[] };
  expect(status.status).toBe('completed');
  expect(status.polar_status).toBe('COMPLETED');
  expect(status.sessions.map((s) => s.reward)).toEqual(rewards);
  expect(await (await fetch(`${server.url}/metrics`)).text()).toContain('polar_rollout_duplicate_results_total 1');
});

test('early stop at early_stop_min_usable_sessions cancels the rest on their node', async () => {
  const store = openStore(':memory:');
  cleanups.push(() => store.close());
  const server = makeServer(store);
  const node = fakeNode();
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity });
  await post(`${server.url}/rollout/task/submit`, task('t1', { early_stop_min_usable_sessions: 2 }));
  await until(() => node.dispatched.length === 4);
  await post(`${server.url}/callbacks/session_result`, resultFor(node.dispatched[0]!, 1));
  await post(`${server.url}/callbacks/session_result`, resultFor(node.dispatched[1]!, 0, 'n1', 'ERROR'));
  expect(store.tasks.get('t1')?.status).toBe('RUNNING');
  await post(`${server.url}/callbacks/session_result`, resultFor(node.dispatched[2]!, 0));
  expect(store.tasks.get('t1')?.status).toBe('COMPLETED');
  expect(node.cancelled).toEqual([node.dispatched[3]!.session_id]);
  expect(store.sessions.get(node.dispatched[3]!.session_id)?.status).toBe('CANCELLED');
  const [group] = server.readyGroups();
  expect(group?.early_stopped).toBe(true);
  expect(group?.rewards).toEqual([1, 0]);
});

test('a node that misses heartbeats is unhealthy; its sessions go to another node with attempt + 1; the old attempt\'s late result is stale and ignored', async () => {
  const store = openStore(':memory:');
  cleanups.push(() => store.close());
  const server = makeServer(store);
  const a = fakeNode();
  const b = fakeNode();
  await post(`${server.url}/nodes/register`, { node_id: 'a', url: a.url, capacity });
  await post(`${server.url}/rollout/task/submit`, task('t1', { num_samples: 3 }));
  await until(() => a.dispatched.length === 3);
  await post(`${server.url}/nodes/register`, { node_id: 'b', url: b.url, capacity });
  clockNow += 4_000;
  await post(`${server.url}/nodes/b/heartbeat`, { stages: idle });
  clockNow += 2_000; // a: 6 s without a heartbeat > 5 s timeout; b: 2 s.
  await server.tick();
  await until(() => b.dispatched.length === 3);
  expect(b.dispatched.every((d) => d.attempt === 1)).toBe(true);
  expect(server.listNodes().find((n) => n.node_id === 'a')?.healthy).toBe(false);
  for (const spec of b.dispatched) await post(`${server.url}/callbacks/session_result`, resultFor(spec, 1, 'b'));
  const late = await post(`${server.url}/callbacks/session_result`, resultFor(a.dispatched[0]!, 0, 'a'));
  expect(late.body).toMatchObject({ accepted: false, stale: true });
  expect(store.results.listByTask('t1').map((r) => r.node_id)).toEqual(['b', 'b', 'b']);
  expect(store.tasks.get('t1')?.status).toBe('COMPLETED');
});

test('drained nodes get no new sessions', async () => {
  const store = openStore(':memory:');
  cleanups.push(() => store.close());
  const server = makeServer(store);
  const a = fakeNode();
  await post(`${server.url}/nodes/register`, { node_id: 'a', url: a.url, capacity });
  const drained = await fetch(`${server.url}/nodes/a`, { method: 'DELETE' });
  expect(((await drained.json()) as { draining: boolean }).draining).toBe(true);
  await post(`${server.url}/rollout/task/submit`, task('t1', { num_samples: 1 }));
  await server.tick();
  expect(a.dispatched).toHaveLength(0);
  expect(store.sessions.listByTask('t1')[0]?.status).toBe('REGISTERED');
});

test('the control-plane token is required on node, dispatch, callback and trainer calls, and sent to nodes', async () => {
  const store = openStore(':memory:');
  cleanups.push(() => store.close());
  const server = makeServer(store, { controlPlaneToken: 'sekret' });
  const node = fakeNode('sekret');
  expect((await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity })).status).toBe(401);
  expect((await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity }, 'wrong')).status).toBe(401);
  expect((await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity }, 'sekret')).status).toBe(200);
  expect((await post(`${server.url}/rollout/task/submit`, task('t1'))).status).toBe(401);
  expect((await post(`${server.url}/rollout/task/submit`, task('t1'), 'sekret')).status).toBe(200);
  await until(() => node.dispatched.length === 4); // the fake node itself rejects calls without the token
  expect((await post(`${server.url}/callbacks/session_result`, resultFor(node.dispatched[0]!, 1))).status).toBe(401);
  expect((await fetch(`${server.url}/rollout/groups?ready=1`)).status).toBe(401);
  expect((await fetch(`${server.url}/health`)).status).toBe(200);
});

/**
 * A server on a fresh database at `path` with fake node n1, task `taskId` of `samples` sessions dispatched, then
 * `beforeStop`, then stopped with its store closed (the state a restart finds).
 */
async function dispatchedThenStopped(path: string, taskId: string, samples: number, beforeStop: (server: RolloutServer, node: ReturnType<typeof fakeNode>) => Promise<unknown> = async () => {}) {
  const node = fakeNode();
  const store = openStore(path);
  const server = makeServer(store);
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity });
  await post(`${server.url}/rollout/task/submit`, task(taskId, { num_samples: samples }));
  await until(() => node.dispatched.length === samples);
  await beforeStop(server, node);
  await server.stop();
  store.close();
  return node;
}

test('restart from the same database: dispatched sessions unknown to their node are re-dispatched; results stay exactly once', async () => {
  const path = join(scratch, 'restart.db');
  const node = await dispatchedThenStopped(path, 't1', 3, (server, n) => post(`${server.url}/callbacks/session_result`, resultFor(n.dispatched[0]!, 1)));

  node.known.delete(node.dispatched[1]!.session_id); // the node lost this one while the server was down
  const store = openStore(path);
  cleanups.push(() => store.close());
  const server = makeServer(store);
  await until(() => node.dispatched.length === 4);
  expect(node.dispatched[3]).toMatchObject({ session_id: node.dispatched[1]!.session_id, attempt: 1 });
  for (const spec of node.dispatched) await post(`${server.url}/callbacks/session_result`, resultFor(spec, 1));
  expect(store.results.listByTask('t1').map((r) => r.session_id).sort()).toEqual(node.dispatched.slice(0, 3).map((d) => d.session_id).sort());
  expect(store.tasks.get('t1')?.status).toBe('COMPLETED');
  expect(server.readyGroups()[0]?.rewards).toEqual([1, 1, 1]);
});

test('a result stored while the server was down counts once in session_results_total, and its retried callback is no duplicate', async () => {
  const path = join(scratch, 'stored-while-down.db');
  const node = await dispatchedThenStopped(path, 't-down', 2);
  const store = openStore(path);
  cleanups.push(() => store.close());
  store.results.put(resultFor(node.dispatched[0]!, 1)); // a gateway on the same database, while the server was down
  const server = makeServer(store);
  const metrics = async () => (await fetch(`${server.url}/metrics`)).text();
  expect(await metrics()).toContain('polar_rollout_session_results_total{status="COMPLETED"} 1');
  // The gateway's callback, retried until this server answers: the delivery of the result counted above.
  expect((await post(`${server.url}/callbacks/session_result`, resultFor(node.dispatched[0]!, 1))).status).toBe(200);
  expect(await metrics()).toContain('polar_rollout_duplicate_results_total 0');
  await post(`${server.url}/callbacks/session_result`, resultFor(node.dispatched[1]!, 0));
  const text = await metrics();
  expect(text).toContain('polar_rollout_session_results_total{status="COMPLETED"} 2');
  expect(text).toContain('polar_rollout_duplicate_results_total 0');
  // A further copy is a duplicate, as ever.
  await post(`${server.url}/callbacks/session_result`, resultFor(node.dispatched[0]!, 1));
  expect(await metrics()).toContain('polar_rollout_duplicate_results_total 1');
  expect(store.tasks.get('t-down')?.status).toBe('COMPLETED');
});

test('after a restart a node\'s stage counts read as stale until it is heard from again', async () => {
  const path = join(scratch, 'stale-stages.db');
  const running = { ...idle, running: 2 };
  await dispatchedThenStopped(path, 't-stale', 2, (server) => post(`${server.url}/nodes/n1/heartbeat`, { stages: running }));
  const store = openStore(path);
  cleanups.push(() => store.close());
  const server = makeServer(store);
  type NodeView = { stages: typeof idle; stages_stale: boolean; last_reported_stages: typeof idle; healthy: boolean };
  const before = (await (await fetch(`${server.url}/nodes`)).json()) as NodeView[];
  expect(before[0]).toMatchObject({ healthy: true, stages: idle, stages_stale: true, last_reported_stages: running });
  await post(`${server.url}/nodes/n1/heartbeat`, { stages: { ...idle, running: 1 } });
  const after = (await (await fetch(`${server.url}/nodes`)).json()) as NodeView[];
  expect(after[0]).toMatchObject({ stages: { ...idle, running: 1 }, stages_stale: false });
});

test('a restarted server counts the heartbeat timeout from when it listens, so a slow start re-dispatches nothing', async () => {
  const path = join(scratch, 'slow-start.db');
  const node = await dispatchedThenStopped(path, 't-slow', 2);

  const store = openStore(path);
  cleanups.push(() => store.close());
  // Constructed (the store loaded) but not listening for longer than the heartbeat timeout: no node could reach it.
  const slow = new RolloutServer({ store, clock, tickMs: 60_000, heartbeatTimeoutMs: 5_000 });
  clockNow += 6_000;
  slow.start();
  cleanups.push(() => slow.stop());
  await slow.tick();
  expect(node.dispatched).toHaveLength(2);
  expect(store.sessions.listByTask('t-slow').map((s) => [s.node_id, s.attempt])).toEqual([['n1', 0], ['n1', 0]]);
  // The timeout still applies from there on: a node that stays silent after the server listens is lost.
  clockNow += 6_000;
  await slow.tick();
  expect(store.sessions.listByTask('t-slow').every((s) => s.attempt === 1)).toBe(true);
});

test('a cancelled session reads "cancelled: by request" in the DELETE answer, in GET, and in the node\'s own result', async () => {
  const store = openStore(':memory:');
  cleanups.push(() => store.close());
  const server = makeServer(store);
  const node = fakeNode();
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity });
  await post(`${server.url}/rollout/task/submit`, task('t-cancel', { num_samples: 1 }));
  await until(() => node.dispatched.length === 1);
  type Status = { results: { error: string | null }[] };
  const deleted = (await (await fetch(`${server.url}/rollout/task/t-cancel`, { method: 'DELETE' })).json()) as Status;
  expect(deleted.results.map((r) => r.error)).toEqual(['cancelled: by request']);
  expect(((await (await fetch(`${server.url}/rollout/task/t-cancel`)).json()) as Status).results.map((r) => r.error)).toEqual(['cancelled: by request']);
  // The node writes the same text for the same reason (src/gateway/node-types.ts cancelledError).
  expect(cancelledError({ kind: 'cancelled', reason: 'by request' })).toBe('cancelled: by request');
  expect(cancelledText('cancelled by the trainer')).toBe('cancelled by the trainer');
});

test('a session whose node result arrives while its cancel is in flight keeps the cancel\'s reason', async () => {
  const store = openStore(':memory:');
  cleanups.push(() => store.close());
  const server = makeServer(store);
  // The node finished the session just as the cancel came: its COMPLETED result (error null) reaches the server
  // before the node answers the DELETE.
  let callback: Promise<unknown> = Promise.resolve();
  const node = startFakeGatewayNode(undefined, undefined, async (id) => {
    const spec = node.dispatched.find((d) => d.session_id === id)!;
    callback = post(`${server.url}/callbacks/session_result`, resultFor(spec, 1));
    await callback;
  });
  cleanups.push(() => node.stop());
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity });
  await post(`${server.url}/rollout/task/submit`, task('t-race', { num_samples: 1 }));
  await until(() => node.dispatched.length === 1);
  type Status = { results: { status: string; error: string | null }[] };
  const deleted = (await (await fetch(`${server.url}/rollout/task/t-race`, { method: 'DELETE' })).json()) as Status;
  await callback;
  expect(deleted.results.map((r) => r.error)).toEqual(['cancelled: by request']);
  expect(store.results.get(node.dispatched[0]!.session_id)).toMatchObject({ status: 'CANCELLED', error: 'cancelled: by request' });
});

/** A server with one fake node and one dispatched session of task `taskId`, and its duplicate_results counter. */
async function oneSessionOnOneNode(taskId: string) {
  const store = openStore(':memory:');
  cleanups.push(() => store.close());
  const server = makeServer(store);
  const node = fakeNode();
  const duplicates = async () => Number(/^polar_rollout_duplicate_results_total (\d+)$/m.exec(await (await fetch(`${server.url}/metrics`)).text())![1]);
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity });
  await post(`${server.url}/rollout/task/submit`, task(taskId, { num_samples: 1 }));
  await until(() => node.dispatched.length === 1);
  return { store, server, node, duplicates };
}

test('duplicate_results: the late callback of a result the server recovered from its node is no duplicate; a further copy is', async () => {
  const { store, server, node, duplicates } = await oneSessionOnOneNode('t-late');
  const [a] = node.dispatched;
  // The node finished a; its callback is late, so the server fetches the result after two heartbeats (recover).
  node.results.set(a!.session_id, resultFor(a!, 1));
  const beat = () => post(`${server.url}/nodes/n1/heartbeat`, { stages: idle, sessions: { [a!.session_id]: 'COMPLETED' } });
  await beat();
  await beat();
  await until(() => store.sessions.get(a!.session_id)?.status === 'COMPLETED');
  // The late callback is the result's one delivery; a further copy is a duplicate.
  expect((await post(`${server.url}/callbacks/session_result`, resultFor(a!, 1))).body).toMatchObject({ accepted: false, duplicate: true });
  expect(await duplicates()).toBe(0);
  await post(`${server.url}/callbacks/session_result`, resultFor(a!, 1));
  expect(await duplicates()).toBe(1);
});

test('duplicate_results: the node\'s first result for a session the server cancelled is no duplicate; a second is', async () => {
  const { store, server, node, duplicates } = await oneSessionOnOneNode('t-cancelled');
  const [b] = node.dispatched;
  await fetch(`${server.url}/rollout/task/t-cancelled`, { method: 'DELETE' });
  // The node's result (its trajectory, kept under the cancel's status and reason).
  expect((await post(`${server.url}/callbacks/session_result`, resultFor(b!, 0, 'n1', 'ERROR'))).body).toMatchObject({ accepted: false, duplicate: true });
  expect(store.results.get(b!.session_id)).toMatchObject({ status: 'CANCELLED', error: 'cancelled: by request' });
  expect(store.results.get(b!.session_id)?.trajectory.metadata.placeholder).toBeUndefined();
  expect(await duplicates()).toBe(0);
  await post(`${server.url}/callbacks/session_result`, resultFor(b!, 0, 'n1', 'ERROR'));
  expect(await duplicates()).toBe(1);
});

test('bad input gives 4xx, never a crash', async () => {
  const store = openStore(':memory:');
  cleanups.push(() => store.close());
  const server = makeServer(store);
  expect((await fetch(`${server.url}/rollout/task/submit`, { method: 'POST', body: 'not json' })).status).toBe(400);
  expect((await post(`${server.url}/callbacks/session_result`, { session_id: 'x' })).status).toBe(400);
  expect((await post(`${server.url}/nodes/nope/heartbeat`, { stages: idle })).status).toBe(404);
  expect((await fetch(`${server.url}/rollout/task/nope`)).status).toBe(404);
  expect((await fetch(`${server.url}/rollout/task/nope`, { method: 'DELETE' })).status).toBe(404);
});
