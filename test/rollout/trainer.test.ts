/**
 * The rollout server as a remote trainer sees it, over HTTP with a control-plane token: groups per task (a shared
 * group_id label), token data of a group (`/rollout/groups/{task_id}/trajectories`, `?include=trajectories`), sampled vs
 * declared policy versions, the unbiased-std option, the trainer callback's credentials, live session stages from
 * heartbeats, stale stages of a dead node, and CANCELLED (not ERROR) for sessions cancelled by early stop.
 * Fake gateway nodes and a fake trainer on Bun.serve port 0; a real SQLite store; an injected clock.
 */
import { afterEach, expect, test } from 'bun:test';
import type { SessionResult, Trace, TrajectoryStatus } from '../../src/core/records.ts';
import type { DispatchSpec } from '../../src/rollout/node-client.ts';
import { RolloutServer, type ServedGroup } from '../../src/rollout/server.ts';
import { callbackBackoffMs } from '../../src/rollout/trainer-callbacks.ts';
import { grpoAdvantages } from '../../src/trace/advantages.ts';
import type { GroupTrajectory } from '../../src/rollout/store-port.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { taskRequest } from '../support/tasks.ts';
import { startFakeGatewayNode } from '../support/fake-node.ts';
import { until } from '../support/poll.ts';

const TOKEN = 'cluster-secret';
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

const capacity = { init_workers: 2, ready_buffer: 2, max_run_workers: 4, postrun_workers: 2 };
const idle = { init: 0, ready: 0, running: 0, postrun: 0, queued: 0 };
let clockNow = 5_000_000;

/** A fake gateway node that accepts dispatches carrying the token (test/support/fake-node.ts), stopped after the file. */
function fakeNode() {
  const node = startFakeGatewayNode(TOKEN);
  cleanups.push(() => node.stop());
  return node;
}

/** One trace: `turns` response tokens, the first one masked out (a template token), logprobs −0.5·k. */
function trace(sessionId: string, taskId: string, reward: number, turns: number, versions: (string | null)[]): Trace {
  const response_ids = Array.from({ length: turns }, (_, k) => 100 + k);
  return {
    prompt_ids: [1, 2, 3],
    response_ids,
    loss_mask: response_ids.map((_, k) => (k === 0 ? 0 : 1)),
    response_logprobs: response_ids.map((_, k) => (k === 0 ? 0 : -0.5 * k)),
    prompt_messages: [{ role: 'user', content: 'fix the bug' }],
    response_messages: [{ role: 'assistant', content: 'done' }],
    tools: [],
    finish_reason: { unified: 'stop', raw: 'stop' },
    reward,
    metadata: { session_id: sessionId, task_id: taskId, builder: 'prefix_merging', harness: 'shell', completion_ids: ['c0'], policy_versions: versions },
  };
}

function resultFor(spec: DispatchSpec, reward: number, opts: { status?: TrajectoryStatus; turns?: number; versions?: (string | null)[]; error?: string } = {}): SessionResult {
  const status = opts.status ?? 'COMPLETED';
  return {
    session_id: spec.session_id,
    task_id: spec.task.task_id,
    status,
    trajectory: {
      status,
      traces: status === 'COMPLETED' ? [trace(spec.session_id, spec.task.task_id, reward, opts.turns ?? 3, opts.versions ?? ['3'])] : [],
      metadata: { reconstruction_stats: { completions: 1, chains: 1, merged: 1, breaks: {} }, evaluation: { outcome_reward: reward }, training_filter: { trainable: status === 'COMPLETED', reasons: [] } },
    },
    timing: { init_ms: 1, ready_queue_ms: 0, run_ms: 2, postrun_ms: 1, build_ms: 0, eval_ms: 1, e2e_ms: 5 },
    node_id: 'n1',
    error: opts.error ?? null,
  };
}

/** Extras may be invalid on purpose (validation tests), so they are spread over the factory's task. */
const task = (id: string, extra: Record<string, unknown> = {}) => ({
  ...taskRequest(id, { num_samples: 3, agent: { harness: 'shell', command: 'true', model_name: 'sim' } }),
  ...extra,
});

async function call<T = Record<string, unknown>>(url: string, init: { method?: string; body?: unknown; token?: string | null } = {}): Promise<{ status: number; body: T }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const token = init.token === undefined ? TOKEN : init.token;
  if (token) headers.authorization = `Bearer ${token}`;
  const response = await fetch(url, { method: init.method ?? (init.body === undefined ? 'GET' : 'POST'), headers, ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }) });
  return { status: response.status, body: (await response.json()) as T };
}

async function setup(extra: { store?: Store; callbackRetries?: number } = {}) {
  const store = extra.store ?? openStore(':memory:');
  if (!extra.store) cleanups.push(() => store.close());
  const server = new RolloutServer({ store, clock: () => clockNow, tickMs: 60_000, heartbeatTimeoutMs: 5_000, controlPlaneToken: TOKEN, ...(extra.callbackRetries !== undefined ? { callbackRetries: extra.callbackRetries } : {}) }).start();
  cleanups.push(() => server.stop());
  const node = fakeNode();
  expect((await call(`${server.url}/nodes/register`, { body: { node_id: 'n1', url: node.url, capacity } })).status).toBe(200);
  return { store, server, node };
}

/** Submit a task and post one result per sample (sample order), returning the dispatches of that task. */
async function runTask(url: string, node: ReturnType<typeof fakeNode>, body: Record<string, unknown>, rewards: number[], opts: (i: number) => Parameters<typeof resultFor>[2] = () => ({})) {
  expect((await call(`${url}/rollout/task/submit`, { body })).status).toBe(200);
  const taskId = body.task_id as string;
  await until(() => node.dispatched.filter((d) => d.task.task_id === taskId).length === rewards.length);
  const specs = node.dispatched.filter((d) => d.task.task_id === taskId).sort((a, b) => a.sample_index - b.sample_index);
  for (const [i, spec] of specs.entries()) {
    const r = await call(`${url}/callbacks/session_result`, { body: resultFor(spec, rewards[i]!, opts(i)) });
    expect(r.body.accepted).toBe(true);
  }
  return specs;
}

test('two tasks sharing a group_id are two groups: each served once and acknowledged separately', async () => {
  const { server, node } = await setup();
  await runTask(server.url, node, task('step3-a', { metadata: { group_id: '7' } }), [1, 0, 0]);
  await runTask(server.url, node, task('step3-b', { metadata: { group_id: '7' } }), [0, 0, 1]);
  const ready = await call<{ groups: ServedGroup[] }>(`${server.url}/rollout/groups?ready=1`);
  expect(ready.body.groups.map((g) => [g.task_id, g.group_id, g.rewards])).toEqual([
    ['step3-a', '7', [1, 0, 0]],
    ['step3-b', '7', [0, 0, 1]],
  ]);
  expect((await call(`${server.url}/rollout/groups/step3-a/ack`, { body: {} })).body).toEqual({ task_id: 'step3-a', group_id: '7', acked: true });
  const after = await call<{ groups: ServedGroup[] }>(`${server.url}/rollout/groups?ready=1`);
  expect(after.body.groups.map((g) => g.task_id)).toEqual(['step3-b']);
  expect(after.body.groups[0]!.acked_at).toBeNull();
  // A third task with the same label after both acks is a new group, not an inherited ack.
  expect((await call(`${server.url}/rollout/groups/step3-b/ack`, { body: {} })).body.acked).toBe(true);
  await runTask(server.url, node, task('step4', { metadata: { group_id: '7' } }), [1, 1, 0]);
  expect((await call<{ groups: ServedGroup[] }>(`${server.url}/rollout/groups?ready=1`)).body.groups.map((g) => g.task_id)).toEqual(['step4']);
  expect((await call(`${server.url}/rollout/groups/7/ack`, { body: {} })).body.acked).toBe(false);
  expect((await call<{ group: ServedGroup }>(`${server.url}/rollout/task/step3-a`)).body.group).toMatchObject({ task_id: 'step3-a', rewards: [1, 0, 0] });
});

test('a trainer pulls a group\'s token data over HTTP: lengths, masks, logprobs and both advantages per session', async () => {
  const { server, node } = await setup();
  const rewards = [1, 0, 1];
  const specs = await runTask(server.url, node, task('t-tokens', { num_samples: 3 }), rewards, (i) => ({ turns: 2 + i }));
  const { status, body } = await call<ServedGroup & { trajectories: GroupTrajectory[] }>(`${server.url}/rollout/groups/t-tokens/trajectories`);
  expect(status).toBe(200);
  expect(body.grpo_std).toBe('population');
  expect(body.trajectories.map((t) => t.session_id)).toEqual(specs.map((s) => s.session_id));
  const mean = 2 / 3;
  const std = Math.sqrt(rewards.reduce((s, r) => s + (r - mean) ** 2, 0) / 3);
  body.trajectories.forEach((t, i) => {
    expect(t.sample_index).toBe(i);
    expect(t.status).toBe('COMPLETED');
    expect(t.reward).toBe(rewards[i]!);
    expect(t.grpo_advantage).toBeCloseTo((rewards[i]! - mean) / (std + 1e-6), 9);
    expect(t.loo_advantage).toBeCloseTo(rewards[i]! - (2 - rewards[i]!) / 2, 12);
    const [tr] = t.trajectory.traces;
    expect(tr!.response_ids).toHaveLength(2 + i);
    expect(tr!.loss_mask).toHaveLength(tr!.response_ids.length);
    expect(tr!.response_logprobs).toHaveLength(tr!.response_ids.length);
    expect(tr!.loss_mask[0]).toBe(0);
    expect(tr!.loss_mask.slice(1).every((m) => m === 1)).toBe(true);
    expect(tr!.prompt_ids).toEqual([1, 2, 3]);
    expect(tr!.finish_reason.unified).toBe('stop');
  });

  // The same data inline in the ready list, and the unbiased std on request.
  const inline = await call<{ groups: (ServedGroup & { trajectories: GroupTrajectory[] })[] }>(`${server.url}/rollout/groups?ready=1&include=trajectories&std=unbiased`);
  const [g] = inline.body.groups;
  expect(g!.grpo_std).toBe('unbiased');
  const unbiased = std * Math.sqrt(3 / 2);
  g!.grpo_advantages.forEach((a, i) => expect(a).toBeCloseTo((rewards[i]! - mean) / (unbiased + 1e-6), 9));
  expect(g!.trajectories.map((t) => t.grpo_advantage)).toEqual(g!.grpo_advantages);
  expect(g!.trajectories[2]!.trajectory.traces[0]!.response_ids).toHaveLength(4);
  expect((await call<{ groups: ServedGroup[] }>(`${server.url}/rollout/groups?ready=1`)).body.groups[0]).not.toHaveProperty('trajectories');

  // Still readable after the ack (a trainer may ack first and fetch after).
  await call(`${server.url}/rollout/groups/t-tokens/ack`, { body: {} });
  expect((await call<{ trajectories: unknown[] }>(`${server.url}/rollout/groups/t-tokens/trajectories`)).body.trajectories).toHaveLength(3);

  expect((await call(`${server.url}/rollout/groups/nope/trajectories`)).status).toBe(404);
  expect((await call(`${server.url}/rollout/groups/t-tokens/trajectories`, { token: null })).status).toBe(401);
  expect((await call(`${server.url}/rollout/groups?ready=1&std=sample`)).status).toBe(400);
  expect((await call(`${server.url}/rollout/groups?ready=1&include=tokens`)).status).toBe(400);
});

test('policy versions: declared (a number is accepted) and sampled are both reported; one sampled version wins', async () => {
  const { server, node } = await setup();
  await runTask(server.url, node, task('mixed', { metadata: { policy_version: 10 } }), [1, 0, 1], (i) => ({ versions: i === 2 ? ['10', '9'] : ['9', null] }));
  await runTask(server.url, node, task('single', { metadata: { policy_version: '10' } }), [1, 0, 1], () => ({ versions: ['9', '9'] }));
  await runTask(server.url, node, task('none', {}), [1, 0, 1], () => ({ versions: [null] }));
  const groups = (await call<{ groups: ServedGroup[] }>(`${server.url}/rollout/groups?ready=1`)).body.groups;
  const by = Object.fromEntries(groups.map((g) => [g.task_id, g]));
  expect(by.mixed).toMatchObject({ declared_policy_version: '10', policy_versions: ['9', '10'], policy_version: '10' });
  expect(by.single).toMatchObject({ declared_policy_version: '10', policy_versions: ['9'], policy_version: '9' });
  expect(by.none).toMatchObject({ declared_policy_version: null, policy_versions: [], policy_version: null });
  // The node got the coerced string, as its schema expects.
  expect(node.dispatched.find((d) => d.task.task_id === 'mixed')!.task.metadata!.policy_version).toBe('10');
  expect((await call(`${server.url}/rollout/task/submit`, { body: task('bad', { metadata: { policy_version: true } }) })).status).toBe(400);
});

test('the trainer callback never gets the control-plane token; metadata.callback_token is sent instead and kept from nodes', async () => {
  const { server, node } = await setup();
  const seen: { path: string; authorization: string | null; body: { task_id: string; group: ServedGroup | null } }[] = [];
  const trainer = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: async (req) => (seen.push({ path: new URL(req.url).pathname, authorization: req.headers.get('authorization'), body: (await req.json()) as never }), new Response('ok')),
  });
  cleanups.push(() => trainer.stop(true));
  const base = `http://127.0.0.1:${trainer.port}`;
  await runTask(server.url, node, task('plain', { callback_url: `${base}/plain` }), [1, 0, 0]);
  await runTask(server.url, node, task('signed', { callback_url: `${base}/signed`, metadata: { callback_token: 'trainer-only', group_id: 'g' } }), [0, 1, 0]);
  await until(() => seen.length === 2);
  const byPath = Object.fromEntries(seen.map((s) => [s.path, s]));
  expect(byPath['/plain']!.authorization).toBeNull();
  expect(byPath['/signed']!.authorization).toBe('Bearer trainer-only');
  expect(byPath['/signed']!.body.group).toMatchObject({ task_id: 'signed', group_id: 'g', rewards: [0, 1, 0] });
  expect(JSON.stringify(seen)).not.toContain(TOKEN);
  const signedSpecs = node.dispatched.filter((d) => d.task.task_id === 'signed');
  expect(signedSpecs).toHaveLength(3);
  for (const spec of signedSpecs) expect(spec.task.metadata).toEqual({ group_id: 'g' });
});

test('a trainer callback that cannot be delivered is visible: the task view\'s callback state, a metric, and the group still served', async () => {
  const { server, node } = await setup({ callbackRetries: 0 });
  const trainer = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('ok') });
  cleanups.push(() => trainer.stop(true));
  const down = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('no') });
  const downUrl = `http://127.0.0.1:${down.port}/cb`;
  down.stop(true); // nothing listens there any more
  type View = { callback: { state: string; attempts: number; last_error: string | null } | null };
  expect((await call(`${server.url}/rollout/task/submit`, { body: task('cb-early', { callback_url: downUrl }) })).status).toBe(200);
  expect((await call<View>(`${server.url}/rollout/task/cb-early`)).body.callback).toEqual({ state: 'not-due', attempts: 0, last_error: null });
  await runTask(server.url, node, task('cb-down', { callback_url: downUrl }), [1, 0, 1]);
  await runTask(server.url, node, task('cb-up', { callback_url: `http://127.0.0.1:${trainer.port}/cb` }), [0, 1, 0]);
  await runTask(server.url, node, task('cb-none'), [0, 1, 1]);
  await until(() => ['cb-down', 'cb-up'].every((id) => server.store.taskCallbacks.get(id)?.state !== 'pending'));
  const failed = (await call<View>(`${server.url}/rollout/task/cb-down`)).body.callback!;
  expect([failed.state, failed.attempts]).toEqual(['failed', 1]);
  expect(failed.last_error).toBeTruthy();
  expect((await call<View>(`${server.url}/rollout/task/cb-up`)).body.callback).toEqual({ state: 'done', attempts: 1, last_error: null });
  expect((await call<View>(`${server.url}/rollout/task/cb-none`)).body.callback).toBeNull();
  const metrics = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
  expect(metrics).toContain('polar_rollout_trainer_callbacks_total{outcome="failed"} 1');
  expect(metrics).toContain('polar_rollout_trainer_callbacks_total{outcome="delivered"} 1');
  expect(server.readyGroups().map((g) => g.task_id)).toContain('cb-down');
  // The default retry window: 12 retries, 0.5 s doubling to 60 s between them, about 6 minutes.
  const waits = Array.from({ length: 12 }, (_, i) => callbackBackoffMs(i + 1));
  expect(waits.slice(0, 3)).toEqual([500, 1000, 2000]);
  expect(Math.max(...waits)).toBe(60_000);
  expect(waits.reduce((a, b) => a + b, 0)).toBe(363_500);
});

test('a callback in flight when its task id is submitted again is superseded: the new run\'s callback is still sent', async () => {
  const { server, node } = await setup();
  const posts: string[] = [];
  let release: (() => void) | null = null;
  const trainer = Bun.serve({
    port: 0, hostname: '127.0.0.1',
    async fetch(req) {
      const body = (await req.json()) as { task_id: string; status: string };
      posts.push(`${body.task_id}:${body.status}`);
      if (posts.length === 1) await new Promise<void>((resolve) => (release = resolve));
      return new Response('ok');
    },
  });
  cleanups.push(() => trainer.stop(true));
  const cb = `http://127.0.0.1:${trainer.port}/cb`;
  await runTask(server.url, node, task('x', { callback_url: cb }), [1, 0, 1]);
  await until(() => release !== null);
  // The trainer (restarted) submits x again while the old run's callback is still in flight.
  expect((await call(`${server.url}/rollout/task/submit`, { body: task('x', { callback_url: cb }) })).status).toBe(200);
  release!();
  await until(() => server.store.taskCallbacks.get('x@run1')?.state === 'superseded');
  await Bun.sleep(100);
  type View = { callback: { state: string } | null };
  expect((await call<View>(`${server.url}/rollout/task/x`)).body.callback).toMatchObject({ state: 'not-due' }); // the new run's own
  const specs = () => node.dispatched.filter((d) => d.task.task_id === 'x');
  await until(() => specs().length === 6);
  for (const spec of specs().slice(3)) await call(`${server.url}/callbacks/session_result`, { body: resultFor(spec, 1) });
  await until(() => posts.length === 2);
  expect(posts).toEqual(['x:completed', 'x:completed']); // the old run's, then the new run's; never one for 'x@run1'
  await until(() => server.store.taskCallbacks.get('x')?.state === 'done'); // written once the trainer has answered
  expect((await call<View>(`${server.url}/rollout/task/x`)).body.callback).toMatchObject({ state: 'done', attempts: 1 });
});

test('heartbeats carrying session statuses make RUNNING / POST_RUN visible; a dead node\'s stage counts read as stale', async () => {
  const { server, node } = await setup();
  expect((await call(`${server.url}/rollout/task/submit`, { body: task('live', { num_samples: 2 }) })).status).toBe(200);
  await until(() => node.dispatched.length === 2);
  const [a, b] = [...node.dispatched].sort((x, y) => x.sample_index - y.sample_index);
  const running = { init: 0, ready: 0, running: 1, postrun: 1, queued: 0 };
  const hb = await call(`${server.url}/nodes/n1/heartbeat`, { body: { stages: running, sessions: { [a!.session_id]: 'RUNNING', [b!.session_id]: 'POST_RUN', stranger: 'RUNNING' } } });
  expect(hb.status).toBe(200);
  type TaskView = { sessions: { session_id: string; status: string }[] };
  const view = (await call<TaskView>(`${server.url}/rollout/task/live`)).body.sessions.map((s) => s.status);
  expect(view).toEqual(['RUNNING', 'POST_RUN']);
  // The sessions gauge counts them by the same statuses.
  const metrics = (await server.metricsText()).text;
  expect(metrics).toContain('polar_rollout_sessions{status="RUNNING"} 1');
  expect(metrics).toContain('polar_rollout_sessions{status="POST_RUN"} 1');
  expect(metrics).toContain('polar_rollout_sessions{status="INITIALIZING"} 0');
  // A final status in a heartbeat is ignored: only the SessionResult ends a session.
  await call(`${server.url}/nodes/n1/heartbeat`, { body: { stages: running, sessions: { [a!.session_id]: 'COMPLETED' } } });
  expect((await call<TaskView>(`${server.url}/rollout/task/live`)).body.sessions[0]!.status).toBe('RUNNING');
  expect((await call(`${server.url}/nodes/n1/heartbeat`, { body: { stages: running, sessions: ['x'] } })).status).toBe(400);

  type NodeView = { node_id: string; healthy: boolean; stages: typeof idle; stages_stale: boolean; last_reported_stages: typeof idle };
  expect((await call<NodeView[]>(`${server.url}/nodes`)).body[0]).toMatchObject({ healthy: true, stages: running, stages_stale: false });
  clockNow += 6_000;
  await server.tick();
  const dead = (await call<NodeView[]>(`${server.url}/nodes`)).body[0]!;
  expect(dead).toMatchObject({ healthy: false, stages: idle, stages_stale: true, last_reported_stages: running });
  expect((await call<{ nodes: { nodes: NodeView[] } }>(`${server.url}/rollout/status`)).body.nodes.nodes[0]!.stages).toEqual(idle);
});

test('sessions cancelled by early stop are CANCELLED in results and task status, never ERROR; a restart relabels stored ones', async () => {
  const { store, server, node } = await setup();
  expect((await call(`${server.url}/rollout/task/submit`, { body: task('early', { num_samples: 4, early_stop_min_usable_sessions: 2 }) })).status).toBe(200);
  await until(() => node.dispatched.length === 4);
  const specs = [...node.dispatched].sort((x, y) => x.sample_index - y.sample_index);
  // A gateway sharing the database stores its result before the callback arrives (polar serve).
  const shared = resultFor(specs[3]!, 0, { status: 'ERROR', error: 'cancelled' });
  for (const spec of specs.slice(0, 2)) await call(`${server.url}/callbacks/session_result`, { body: resultFor(spec, 1) });
  expect(store.tasks.get('early')?.status).toBe('COMPLETED');
  expect(node.cancelled.sort()).toEqual([specs[2]!.session_id, specs[3]!.session_id].sort());

  // The cancelled sessions' results arrive as ERROR "cancelled": one by callback only, one stored first by the gateway.
  const late = await call(`${server.url}/callbacks/session_result`, { body: resultFor(specs[2]!, 0, { status: 'ERROR', error: 'cancelled' }) });
  expect(late.body).toMatchObject({ accepted: false, duplicate: true });
  expect(store.results.put(shared)).toBe(true);
  await call(`${server.url}/callbacks/session_result`, { body: shared });
  for (const spec of specs.slice(2)) {
    expect(store.results.get(spec.session_id)?.status).toBe('CANCELLED');
  }
  expect(store.results.listByTask('early').map((r) => r.status).sort()).toEqual(['CANCELLED', 'CANCELLED', 'COMPLETED', 'COMPLETED']);
  const view = (await call<{ sessions: { status: string }[]; group: ServedGroup }>(`${server.url}/rollout/task/early`)).body;
  expect(view.sessions.map((s) => s.status)).toEqual(['COMPLETED', 'COMPLETED', 'CANCELLED', 'CANCELLED']);
  expect(view.group.sessions.map((s) => s.status)).toEqual(['COMPLETED', 'COMPLETED']);

  // A result a gateway stored while no callback got through is relabelled when the server starts again.
  await server.stop();
  store.results.put(resultFor({ ...specs[0]!, session_id: 'ghost' }, 0, { status: 'ERROR', error: 'cancelled' }));
  store.sessions.insert({ session_id: 'ghost', task_id: 'early', sample_index: 4, status: 'CANCELLED' });
  const restarted = new RolloutServer({ store, clock: () => clockNow, tickMs: 60_000, controlPlaneToken: TOKEN }).start();
  cleanups.push(() => restarted.stop());
  await until(() => store.results.get('ghost')?.status === 'CANCELLED');
});

test('grpoAdvantages: unbiased std is the population std × sqrt(n/(n−1)); a group of one gives 0; a bad std throws', () => {
  const rewards = [1, 0, 0, 1, 1];
  const mean = 0.6;
  const population = Math.sqrt(rewards.reduce((s, r) => s + (r - mean) ** 2, 0) / 5);
  const unbiased = grpoAdvantages(rewards, 0, 'unbiased');
  unbiased.forEach((a, i) => expect(a).toBeCloseTo((rewards[i]! - mean) / (population * Math.sqrt(5 / 4)), 12));
  expect(grpoAdvantages(rewards, 0)).toEqual(grpoAdvantages(rewards, 0, 'population'));
  expect(grpoAdvantages([0.5], 1e-6, 'unbiased')).toEqual([0]);
  expect(() => grpoAdvantages([1, 0], 1e-6, 'sample' as never)).toThrow(/std must be/);
});
