/**
 * Scheduler bounds (src/rollout/scheduler.ts) against the gateway node's staging (src/gateway/node.ts `pump`): a node
 * gets only what its INIT → READY → RUN pipeline can take (max_run_workers + ready_buffer before POSTRUN), so no
 * session waits in one node's queue while another node is idle, and sessions in POSTRUN never keep the pipeline from
 * being refilled. Each pass is driven the way the dispatcher drives it: pick, then count the dispatch on the node.
 */
import { expect, test } from 'bun:test';
import type { StageCounts } from '../../src/core/contracts/index.ts';
import { pickNode, type SchedulableNode } from '../../src/rollout/scheduler.ts';

/** The gateway's default capacity (src/gateway/node.ts DEFAULT_CAPACITY, config gateway.nodes[]). */
const capacity = { init_workers: 4, ready_buffer: 4, max_run_workers: 8, postrun_workers: 4 };
const idle: StageCounts = { queued: 0, init: 0, ready: 0, running: 0, postrun: 0 };

function node(id: string, stages: Partial<StageCounts>, in_flight: number): SchedulableNode {
  return { node_id: id, healthy: true, draining: false, capacity, stages: { ...idle, ...stages }, in_flight, dispatched_since_heartbeat: 0 };
}

/** One dispatch pass over `queued` sessions, as src/rollout/dispatcher.ts runs it; returns how many each node got. */
function place(nodes: SchedulableNode[], queued: number): Record<string, number> {
  const got: Record<string, number> = Object.fromEntries(nodes.map((n) => [n.node_id, 0]));
  for (let i = 0; i < queued; i++) {
    const target = pickNode(nodes);
    if (!target) break;
    target.in_flight++;
    target.dispatched_since_heartbeat++;
    got[target.node_id]!++;
  }
  return got;
}

test('a node whose pipeline is full gets nothing more; an idle node takes what the pipeline can start, the rest stays on the server', () => {
  // gw-2: 8 running, 4 prepared, 4 more waiting in its own queue for INIT (the reviewer's batch: in_flight 16).
  const busy = node('gw-2', { running: 8, ready: 4, queued: 4 }, 16);
  const restarted = node('gw-1', {}, 0);
  const got = place([busy, restarted], 200);
  expect(got).toEqual({ 'gw-2': 0, 'gw-1': 12 });
  // Alone, the busy node is given nothing: every session it got would wait in its queue.
  expect(pickNode([node('gw-2', { running: 8, ready: 4, queued: 4 }, 16)])).toBeNull();
  expect(pickNode([node('gw-2', { running: 8, init: 4 }, 12)])).toBeNull();
});

test('sessions in POSTRUN do not hold RUN places: the pipeline is refilled up to max_run_workers + ready_buffer', () => {
  // 4 sessions left RUN for POSTRUN since the node was full (8 running + 4 ready): the 4 READY moved up, so INIT/READY
  // has room for exactly 4.
  const n = node('gw-1', { running: 8, postrun: 4 }, 12);
  expect(place([n], 100)).toEqual({ 'gw-1': 4 });
  // A POSTRUN backlog past postrun_workers (POSTRUN is the bottleneck) caps the node in all: 8 + 4 + 4 sessions.
  const backlog = node('gw-1', { running: 6, postrun: 8 }, 14);
  expect(place([backlog], 100)).toEqual({ 'gw-1': 2 });
});

test('sessions dispatched since the last heartbeat count as queued; one that finished since leaves the pre-RUN count', () => {
  const n = { ...node('gw-1', { running: 8 }, 12), dispatched_since_heartbeat: 4 };
  expect(pickNode([n])).toBeNull();
  // The heartbeat said 8 running; 2 of those ran, went through POSTRUN and reported since (in_flight fell to 6).
  expect(place([node('gw-1', { running: 8 }, 6)], 100)).toEqual({ 'gw-1': 6 });
});
