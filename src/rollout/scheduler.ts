/**
 * Stage-pressure scheduling: a session goes to the healthy, non-draining node with the least
 * pressure, compared stage by stage: run queue first, then POSTRUN, then INIT, then the READY gap (a bigger gap wins),
 * among the nodes with a free slot: a node gets only what its INIT → READY → RUN pipeline can take without queueing
 * (`max_run_workers + ready_buffer` sessions before POSTRUN, {@link freeSlots}), so the rest waits on the server for
 * whichever node frees a place first. Pure functions, so the choice is unit-testable without servers.
 */
import type { NodeCapacity, StageCounts } from '../core/contracts/index.ts';

/** What the scheduler knows of one node. */
export interface SchedulableNode {
  node_id: string;
  healthy: boolean;
  draining: boolean;
  /** The node's engine health from its last heartbeat; false = down (no new sessions), null/absent = not reported. */
  engine_ok?: boolean | null;
  capacity: NodeCapacity;
  /** Stage counts from the node's last heartbeat (zeros before the first one). */
  stages: StageCounts;
  /** Sessions this server has dispatched to the node and not yet seen finish (from its own records). */
  in_flight: number;
  /** Of those, sessions dispatched after the node's last heartbeat (not yet visible in `stages`). */
  dispatched_since_heartbeat: number;
}

/**
 * Sessions a node can take before RUN without any of them waiting in its queue: `max_run_workers + ready_buffer`,
 * never below 1. The node's pump (src/gateway/node.ts `pump`) starts INIT only while INIT + READY holds fewer than
 * `ready_buffer` plus the free RUN slots, so INIT + READY + RUNNING never exceeds this; every session past it waits in
 * the node's queue (`stages.queued`) however many `init_workers` the node has. `init_workers` only bounds how many of
 * these are being prepared at once, so it is not added: counting it and POSTRUN's workers as places let a node hold up
 * to `init_workers + postrun_workers` sessions in its queue (8 with the defaults) while another node sat idle with
 * nothing left on the server to dispatch.
 */
export function preRunSlots(capacity: NodeCapacity): number {
  return Math.max(1, capacity.max_run_workers + capacity.ready_buffer);
}

/**
 * Sessions a node may hold at once from this server, POSTRUN included: {@link preRunSlots} + `postrun_workers`. The
 * POSTRUN queue is unbounded on the node and each session in it still holds its sandbox; more than `postrun_workers`
 * there means POSTRUN is the node's bottleneck, and dispatching more would only grow that backlog (and hold sandboxes)
 * while another node could take the work.
 */
export function nodeSlots(capacity: NodeCapacity): number {
  return preRunSlots(capacity) + capacity.postrun_workers;
}

/**
 * This server's sessions on the node that have not reached POSTRUN yet: the node's last heartbeat's queued + INIT +
 * READY + RUNNING, plus the sessions dispatched since (counted as queued), at most `in_flight` (a session that ran and
 * finished since the heartbeat has left `in_flight` but still reads RUNNING in `stages`).
 */
export function preRunLoad(node: SchedulableNode): number {
  const { stages } = node;
  return Math.min(node.in_flight, stages.queued + stages.init + stages.ready + stages.running + node.dispatched_since_heartbeat);
}

/**
 * How many more sessions the node should get now: 0 when it is unhealthy, draining or its engine is down; else
 * `min(preRunSlots − preRunLoad, nodeSlots − in_flight)`, at least 0. Sessions in POSTRUN do not count against the
 * first bound: they no longer need a RUN slot, so the pipeline (INIT → READY → RUN) is refilled as soon as a heartbeat
 * shows them there, while nothing is sent that would wait in the node's queue. A session that leaves RUN is seen at the
 * next heartbeat (or its result), so for up to one heartbeat interval its INIT place stays unused; the READY buffer
 * covers RUN meanwhile (a RUN slot that frees takes a READY session at once).
 */
export function freeSlots(node: SchedulableNode): number {
  if (!node.healthy || node.draining || node.engine_ok === false) return 0;
  return Math.max(0, Math.min(preRunSlots(node.capacity) - preRunLoad(node), nodeSlots(node.capacity) - node.in_flight));
}

/**
 * Pressure tuple of a node, compared lexicographically (smaller = less loaded): [run queue per run worker, POSTRUN per
 * postrun worker, INIT per init worker, −READY gap]. Sessions dispatched since the last heartbeat count as queued.
 */
export function pressureOf(node: SchedulableNode): [number, number, number, number] {
  const { stages, capacity } = node;
  const per = (count: number, workers: number) => count / Math.max(1, workers);
  const runQueue = stages.running + stages.ready + stages.queued + node.dispatched_since_heartbeat;
  const readyGap = Math.max(0, capacity.ready_buffer - stages.ready);
  return [per(runQueue, capacity.max_run_workers), per(stages.postrun, capacity.postrun_workers), per(stages.init, capacity.init_workers), -readyGap];
}

function compareTuples(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < a.length; i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * The node for the next session, or null when no node has a free slot ({@link freeSlots}: none healthy, non-draining
 * with its engine up and room before RUN and in all).
 * Ties go to the node with fewer in-flight sessions, then to the smaller node_id (stable order).
 */
export function pickNode<N extends SchedulableNode>(nodes: readonly N[]): N | null {
  let best: N | null = null;
  let bestKey: number[] = [];
  for (const node of nodes) {
    if (freeSlots(node) === 0) continue;
    const key = [...pressureOf(node), node.in_flight];
    const order = best === null ? -1 : compareTuples(key, bestKey) || node.node_id.localeCompare(best.node_id);
    if (order < 0) {
      best = node;
      bestKey = key;
    }
  }
  return best;
}
