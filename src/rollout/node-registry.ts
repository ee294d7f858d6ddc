/**
 * The rollout server's view of its gateway nodes: registration, heartbeats (stage counts and each session's live
 * status), draining, health, and which sessions this server has in flight on each node.
 * Shapes: src/core/contracts/nodes.ts.
 */
import { formatIssues, heartbeatSchema, LIVE_SESSION_STATUSES, nodeRegistrationSchema, type NodeCapacity, type PoolSizesReport, type StageCounts } from '../core/contracts/index.ts';
import { FINAL_SESSION, HttpError, type RolloutContext } from './context.ts';
import type { NodeClient } from './node-client.ts';
import type { SchedulableNode } from './scheduler.ts';
import type { NodeRow } from './store-port.ts';

const LIVE_SESSION = new Set<string>(LIVE_SESSION_STATUSES);
const NO_STAGES: StageCounts = { init: 0, ready: 0, running: 0, postrun: 0, queued: 0 };

export interface NodeState {
  row: NodeRow;
  client: NodeClient;
  /**
   * Sessions dispatched to the node that no heartbeat has listed yet (its `sessions`), so its stage counts do not
   * include them either. A heartbeat the node built before a dispatch arrived may reach this server after it: only the
   * ids it lists leave this set (a heartbeat without `sessions` clears it, as counting alone did before).
   */
  unconfirmed: Set<string>;
  /** Dispatches in a row that failed in transport (network, 5xx); reset by a heartbeat or an answered dispatch. */
  transportFailures: number;
  /**
   * Loaded from the store after a restart and not heard from since (no heartbeat, no registration): its stage counts
   * are what it reported before the restart, so they read as stale.
   */
  fromStore?: boolean;
  /**
   * The node's engine health from its last heartbeat (null: not reported). A node whose engine is down gets no new
   * sessions: its harnesses would only fail on 502s, each a lost sample.
   */
  engineOk?: boolean | null;
  /** The INIT pool and READY buffer the node reported using (`pool_sizing: auto`); absent: its registered capacity's. */
  pools?: PoolSizesReport | null;
}

export class NodeRegistry {
  readonly #nodes = new Map<string, NodeState>();
  /** node_id → session ids dispatched there and not final. */
  readonly #inFlight = new Map<string, Set<string>>();
  /** Session id → heartbeats in a row in which its node reported it ended while this server still has it open. */
  readonly #endedSightings = new Map<string, number>();

  constructor(private readonly ctx: RolloutContext, private readonly makeClient: (url: string) => NodeClient) {}

  get size(): number {
    return this.#nodes.size;
  }

  get(nodeId: string): NodeState | undefined {
    return this.#nodes.get(nodeId);
  }

  has(nodeId: string): boolean {
    return this.#nodes.has(nodeId);
  }

  ids(): string[] {
    return [...this.#nodes.keys()];
  }

  states(): NodeState[] {
    return [...this.#nodes.values()];
  }

  /** Known nodes from the store after a restart, each given a full heartbeat period before it is declared dead. */
  load(): void {
    for (const row of this.ctx.store.nodes.list()) {
      this.#nodes.set(row.node_id, { row, client: this.makeClient(row.url), unconfirmed: new Set(), transportFailures: 0, fromStore: true });
    }
    this.restartHeartbeatClocks();
  }

  /**
   * Start every node's heartbeat period now: called when the server starts listening, because until then no node
   * could reach it (a slow start after `load` must not declare the nodes dead and re-dispatch their sessions, whose
   * work would then be thrown away as stale).
   */
  restartHeartbeatClocks(): void {
    const now = this.ctx.clock();
    for (const state of this.#nodes.values()) state.row = { ...state.row, last_heartbeat: Math.max(state.row.last_heartbeat, now) };
  }

  /**
   * Register (or re-register) a node. Returns the row and whether the node was known before (its sessions then need
   * reconciling). @throws HttpError 400 on an invalid registration.
   */
  register(input: unknown): { row: NodeRow; known: boolean } {
    const parsed = nodeRegistrationSchema.safeParse(input);
    if (!parsed.success) throw new HttpError(400, `invalid registration: ${formatIssues(parsed.error)}`);
    const now = this.ctx.clock();
    const previous = this.#nodes.get(parsed.data.node_id)?.row;
    const row: NodeRow = {
      ...parsed.data,
      stages: previous?.stages ?? { ...NO_STAGES },
      healthy: true,
      draining: false,
      last_heartbeat: now,
      registered_at: now,
    };
    this.ctx.store.nodes.upsert(row);
    this.#nodes.set(row.node_id, { row, client: this.makeClient(row.url), unconfirmed: new Set(), transportFailures: 0 });
    this.ctx.events.publish('node_registered', { node_id: row.node_id, url: row.url });
    return { row, known: previous !== undefined };
  }

  /**
   * Record a heartbeat's stage counts and live session statuses; an unhealthy node becomes healthy again.
   * @throws HttpError 404 for an unknown node, 400 for an invalid heartbeat.
   */
  heartbeat(nodeId: string, input: unknown): { row: NodeRow; recovered: boolean; ended: string[] } {
    const state = this.#nodes.get(nodeId);
    if (!state) throw new HttpError(404, `unknown node ${nodeId}: register first`);
    const parsed = heartbeatSchema.safeParse(input);
    if (!parsed.success) throw new HttpError(400, `invalid heartbeat: ${formatIssues(parsed.error)}`);
    const recovered = !state.row.healthy;
    state.row = { ...state.row, stages: parsed.data.stages, healthy: true, last_heartbeat: this.ctx.clock() };
    state.fromStore = false;
    const engineWasOk = state.engineOk !== false;
    state.engineOk = parsed.data.engine_ok ?? null;
    if (engineWasOk && state.engineOk === false) this.ctx.events.publish('node_engine_down', { node_id: nodeId });
    if (!engineWasOk && state.engineOk !== false) this.ctx.events.publish('node_engine_up', { node_id: nodeId });
    state.pools = parsed.data.pools ?? null;
    // Only the dispatches this heartbeat shows the node holding are in its counts now; the rest still count as queued.
    if (parsed.data.sessions) for (const id of Object.keys(parsed.data.sessions)) state.unconfirmed.delete(id);
    else state.unconfirmed.clear();
    state.transportFailures = 0;
    const ended = this.ctx.store.transaction(() => {
      this.ctx.store.nodes.upsert(state.row);
      return parsed.data.sessions ? this.#refreshSessionStages(nodeId, parsed.data.sessions) : [];
    });
    if (recovered) this.ctx.events.publish('node_healthy', { node_id: nodeId });
    return { row: state.row, recovered, ended };
  }

  /**
   * Take a node's view of the sessions it runs (RUNNING, POST_RUN, …) into the store, for `GET /rollout/task/{id}`.
   * Only sessions this server dispatched to that node and still has open move; final statuses come with results.
   */
  /**
   * Also returns the sessions whose result this server is missing: the node reported them ended (a status that is not
   * live) in two heartbeats in a row while this server still has them open on that node. Their callback was lost
   * (retries exhausted while this server was overloaded) or arrived as stale before this server adopted the node's
   * attempt (a dispatch that timed out but reached the node); the caller fetches the result from the node. Two
   * sightings, so a callback that is merely in flight is not raced.
   */
  #refreshSessionStages(nodeId: string, statuses: Record<string, string>): string[] {
    const mine = this.#inFlight.get(nodeId);
    if (!mine) return [];
    const ended: string[] = [];
    for (const [sessionId, status] of Object.entries(statuses)) {
      if (!mine.has(sessionId)) continue;
      const live = LIVE_SESSION.has(status);
      if (live) this.#endedSightings.delete(sessionId);
      const current = this.ctx.store.sessions.get(sessionId);
      if (!current || current.node_id !== nodeId || FINAL_SESSION.has(current.status)) continue;
      if (!live) {
        const seen = (this.#endedSightings.get(sessionId) ?? 0) + 1;
        this.#endedSightings.set(sessionId, seen);
        if (seen >= 2) ended.push(sessionId);
        continue;
      }
      if (current.status !== status) this.ctx.store.sessions.update(sessionId, { status });
    }
    return ended;
  }

  /** The node said its engine is down (a handback): no dispatch to it until a heartbeat says the engine is back. */
  engineDown(state: NodeState): void {
    if (state.engineOk !== false) this.ctx.events.publish('node_engine_down', { node_id: state.row.node_id });
    state.engineOk = false;
  }

  /** Drain a node: it gets no new sessions; the ones it runs finish. @throws HttpError 404 for an unknown node. */
  drain(nodeId: string): { node_id: string; draining: true; in_flight: number } {
    const state = this.#nodes.get(nodeId);
    if (!state) throw new HttpError(404, `unknown node ${nodeId}`);
    state.row = { ...state.row, draining: true };
    this.ctx.store.nodes.upsert(state.row);
    this.ctx.events.publish('node_draining', { node_id: nodeId });
    return { node_id: nodeId, draining: true, in_flight: this.inFlightCount(nodeId) };
  }

  /**
   * Take a node out of rotation until its next heartbeat; returns the sessions it had in flight (the caller decides:
   * a lost node's are re-queued, a node with transport trouble keeps them).
   */
  markUnhealthy(state: NodeState, reason: string): string[] {
    state.row = { ...state.row, healthy: false };
    this.ctx.store.nodes.upsert(state.row);
    this.ctx.events.publish('node_unhealthy', { node_id: state.row.node_id, reason });
    return [...(this.#inFlight.get(state.row.node_id) ?? [])];
  }

  /** Nodes whose last heartbeat is older than `timeoutMs` and still count as healthy. */
  expired(timeoutMs: number): NodeState[] {
    const now = this.ctx.clock();
    return this.states().filter((s) => s.row.healthy && now - s.row.last_heartbeat > timeoutMs);
  }

  /**
   * Every known node with its in-flight count and heartbeat age (ms). An unhealthy node's `stages` are zeros with
   * `stages_stale: true`; what it last reported stays in `last_reported_stages`.
   */
  list() {
    const now = this.ctx.clock();
    return this.states().map(({ row, fromStore, engineOk, pools }) => ({
      ...row,
      engine_ok: engineOk ?? null,
      pools: pools ?? null,
      stages: row.healthy && !fromStore ? row.stages : { ...NO_STAGES },
      stages_stale: !row.healthy || fromStore === true,
      last_reported_stages: row.stages,
      in_flight: this.inFlightCount(row.node_id),
      heartbeat_age_ms: now - row.last_heartbeat,
    }));
  }

  /** The scheduler's view of a node. */
  schedulable(s: NodeState): SchedulableNode & { state: NodeState } {
    return {
      node_id: s.row.node_id,
      healthy: s.row.healthy,
      draining: s.row.draining,
      engine_ok: s.engineOk ?? null,
      capacity: effectiveCapacity(s.row.capacity, s.pools ?? null),
      stages: s.row.stages,
      in_flight: this.inFlightCount(s.row.node_id),
      dispatched_since_heartbeat: this.#unconfirmedCount(s),
      state: s,
    };
  }

  /** Of the node's unconfirmed dispatches, those still in flight there (a refused or finished one no longer counts). */
  #unconfirmedCount(s: NodeState): number {
    const mine = this.#inFlight.get(s.row.node_id);
    let n = 0;
    for (const id of s.unconfirmed) {
      if (mine?.has(id)) n++;
      else s.unconfirmed.delete(id);
    }
    return n;
  }

  /** A session was just dispatched to the node: it counts as queued there until a heartbeat lists it. */
  dispatched(state: NodeState, sessionId: string): void {
    this.track(state.row.node_id, sessionId);
    state.unconfirmed.add(sessionId);
  }

  track(nodeId: string, sessionId: string): void {
    let set = this.#inFlight.get(nodeId);
    if (!set) this.#inFlight.set(nodeId, (set = new Set()));
    set.add(sessionId);
  }

  /** Forget a session on a node; true when it was tracked there. */
  untrack(nodeId: string, sessionId: string): boolean {
    this.#endedSightings.delete(sessionId);
    this.#nodes.get(nodeId)?.unconfirmed.delete(sessionId);
    return this.#inFlight.get(nodeId)?.delete(sessionId) ?? false;
  }

  /** Forget a session on every node; returns the nodes it was tracked on. */
  untrackEverywhere(sessionId: string): string[] {
    this.#endedSightings.delete(sessionId);
    const nodes: string[] = [];
    for (const [nodeId, set] of this.#inFlight) if (set.delete(sessionId)) nodes.push(nodeId);
    for (const state of this.#nodes.values()) state.unconfirmed.delete(sessionId);
    return nodes;
  }

  inFlight(nodeId: string): string[] {
    return [...(this.#inFlight.get(nodeId) ?? [])];
  }

  inFlightCount(nodeId: string): number {
    return this.#inFlight.get(nodeId)?.size ?? 0;
  }

  /** Node counts by state, for the metrics gauges. */
  counts(): { healthy: number; unhealthy: number; draining: number } {
    const out = { healthy: 0, unhealthy: 0, draining: 0 };
    for (const { row } of this.#nodes.values()) {
      // A node that left or stopped heartbeating is unhealthy even if it was draining first (it is gone).
      if (!row.healthy) out.unhealthy++;
      else if (row.draining) out.draining++;
      else out.healthy++;
    }
    return out;
  }
}

/**
 * The capacity the scheduler plans with: the registered one, its INIT pool and READY buffer lowered to what the node
 * reported using (`pool_sizing: auto` sizes them below the configured bounds, and a node's pump starts INIT only while
 * INIT + READY fit in the buffer in use, so a session counted on the registered buffer would wait in its queue).
 */
export function effectiveCapacity(capacity: NodeCapacity, pools: PoolSizesReport | null): NodeCapacity {
  if (!pools) return capacity;
  return { ...capacity, init_workers: Math.min(capacity.init_workers, pools.init_workers), ready_buffer: Math.min(capacity.ready_buffer, pools.ready_buffer) };
}
