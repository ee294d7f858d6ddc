/**
 * What the rollout server counts on a node when it decides to dispatch there, against fake gateway nodes
 * (test/support/fake-node.ts): a heartbeat the node built before a dispatch reached it does not erase that dispatch;
 * the pools a `pool_sizing: auto` node reports bound what it is sent; and a node whose engine is down hands its
 * unstarted sessions back (`POST /nodes/{id}/handback`), taken only while another node could run them.
 */
import { afterEach, expect, test } from 'bun:test';
import { RolloutServer } from '../../src/rollout/server.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { startFakeGatewayNode } from '../support/fake-node.ts';
import { taskRequest } from '../support/tasks.ts';
import { post, until } from '../support/poll.ts';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

const idle = { queued: 0, init: 0, ready: 0, running: 0, postrun: 0 };

function setup() {
  const store: Store = openStore(':memory:');
  const server = new RolloutServer({ store, tickMs: 60_000, heartbeatTimeoutMs: 60_000 }).start();
  cleanups.push(() => store.close(), () => server.stop());
  return { store, server };
}

function fakeNode() {
  const node = startFakeGatewayNode();
  cleanups.push(() => node.stop());
  return node;
}

test('a heartbeat built before a dispatch reached the node does not erase it: the node is not sent more than it can take', async () => {
  const { server } = setup();
  const node = fakeNode();
  // One session before POSTRUN (1 RUN slot, no READY buffer), two in all.
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity: { init_workers: 1, ready_buffer: 0, max_run_workers: 1, postrun_workers: 1 } });
  await post(`${server.url}/rollout/task/submit`, taskRequest('t', { num_samples: 3 }));
  await until(() => node.dispatched.length === 1);
  const first = node.dispatched[0]!.session_id;
  // Built by the node before the dispatch arrived: idle, and not listing the session.
  await post(`${server.url}/nodes/n1/heartbeat`, { stages: idle, sessions: {} });
  await Bun.sleep(100);
  expect(node.dispatched).toHaveLength(1);
  // The next heartbeat lists it, running: still full.
  await post(`${server.url}/nodes/n1/heartbeat`, { stages: { ...idle, running: 1 }, sessions: { [first]: 'RUNNING' } });
  await Bun.sleep(100);
  expect(node.dispatched).toHaveLength(1);
  // In POSTRUN its RUN slot is free again: the next one goes out.
  await post(`${server.url}/nodes/n1/heartbeat`, { stages: { ...idle, postrun: 1 }, sessions: { [first]: 'POST_RUN' } });
  await until(() => node.dispatched.length === 2);
});

test('a pool_sizing auto node is sent what the pools it reports can take, not what its registered capacity could', async () => {
  const { server } = setup();
  const node = fakeNode();
  await post(`${server.url}/nodes/register`, { node_id: 'n1', url: node.url, capacity: { init_workers: 4, ready_buffer: 4, max_run_workers: 1, postrun_workers: 4 } });
  // Auto sized the READY buffer down to 1: the node starts INIT for at most 1 RUN + 1 READY; more would wait in its queue.
  await post(`${server.url}/nodes/n1/heartbeat`, { stages: idle, sessions: {}, pools: { init_workers: 1, ready_buffer: 1 } });
  expect(server.listNodes()[0]).toMatchObject({ pools: { init_workers: 1, ready_buffer: 1 } });
  await post(`${server.url}/rollout/task/submit`, taskRequest('t', { num_samples: 6 }));
  await until(() => node.dispatched.length >= 2);
  await Bun.sleep(100);
  expect(node.dispatched).toHaveLength(2);
  // Without pools in its heartbeats (pool_sizing fixed) the registered capacity holds: 1 RUN + 4 READY.
  await post(`${server.url}/nodes/n1/heartbeat`, { stages: { ...idle, queued: 2 }, sessions: Object.fromEntries(node.dispatched.map((d) => [d.session_id, 'REGISTERED'])) });
  await until(() => node.dispatched.length === 5);
});

test('handback: sessions a node with a down engine has not started go to another node as the same sessions, attempt + 1, no result', async () => {
  const { server, store } = setup();
  const a = fakeNode();
  const b = fakeNode();
  const capacity = { init_workers: 2, ready_buffer: 1, max_run_workers: 1, postrun_workers: 1 };
  await post(`${server.url}/nodes/register`, { node_id: 'a', url: a.url, capacity });
  await post(`${server.url}/rollout/task/submit`, taskRequest('t', { num_samples: 3 }));
  await until(() => a.dispatched.length === 2);
  const onA = a.dispatched.map((d) => d.session_id);
  // Alone, A gives nothing back: the sessions would only wait, unbounded, on the server; but its engine counts as down.
  const alone = await post(`${server.url}/nodes/a/handback`, { session_ids: onA, reason: 'engine down for 60 s' });
  expect(alone).toEqual({ status: 200, body: { node_id: 'a', requeued: [] } });
  expect(server.listNodes()[0]).toMatchObject({ engine_ok: false });
  expect(store.sessions.listByTask('t').filter((s) => s.node_id === 'a').map((s) => s.attempt)).toEqual([0, 0]);
  // B joins: it takes the one left, then what A hands back, same ids and samples, attempt 1.
  await post(`${server.url}/nodes/register`, { node_id: 'b', url: b.url, capacity: { ...capacity, ready_buffer: 4 } });
  await until(() => b.dispatched.length === 1);
  const back = await post(`${server.url}/nodes/a/handback`, { session_ids: [...onA, 'not-dispatched-here', b.dispatched[0]!.session_id], reason: 'engine down for 70 s' });
  expect(back.body).toEqual({ node_id: 'a', requeued: onA });
  await until(() => b.dispatched.length === 3);
  expect(b.dispatched.slice(1).map((d) => [d.session_id, d.sample_index, d.attempt])).toEqual(a.dispatched.map((d) => [d.session_id, d.sample_index, 1]));
  expect(a.dispatched).toHaveLength(2);
  expect(a.cancelled).toEqual([]);
  for (const id of onA) expect(store.results.get(id)).toBeNull();
  expect(store.sessions.listByTask('t').map((s) => s.node_id)).toEqual(['b', 'b', 'b']);
  // Bad bodies and unknown nodes.
  expect((await post(`${server.url}/nodes/a/handback`, { session_ids: [] })).status).toBe(400);
  expect((await post(`${server.url}/nodes/nope/handback`, { session_ids: ['x'] })).status).toBe(404);
});
