/**
 * Stage-pressure scheduling: a session goes to the healthy, non-draining node with the least
 * pressure, compared stage by stage: run queue first, then POSTRUN, then INIT, then the READY gap (a bigger gap wins).
 * Pure functions, so the choice is unit-testable without servers.
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

/** Sessions a node may hold at once from this server: every pool plus the READY buffer, never below 1. */
export function nodeSlots(capacity: NodeCapacity): number {
  return Math.max(1, capacity.init_workers + capacity.ready_buffer + capacity.max_run_workers + capacity.postrun_workers);
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
 * The node for the next session, or null when every healthy, non-draining node whose engine is not down is full
 * (in_flight ≥ its slots).
 * Ties go to the node with fewer in-flight sessions, then to the smaller node_id (stable order).
 */
export function pickNode<N extends SchedulableNode>(nodes: readonly N[]): N | null {
  let best: N | null = null;
  let bestKey: number[] = [];
  for (const node of nodes) {
    if (!node.healthy || node.draining || node.engine_ok === false || node.in_flight >= nodeSlots(node.capacity)) continue;
    const key = [...pressureOf(node), node.in_flight];
    const order = best === null ? -1 : compareTuples(key, bestKey) || node.node_id.localeCompare(best.node_id);
    if (order < 0) {
      best = node;
      bestKey = key;
    }
  }
  return best;
}
