/**
 * Dispatch of queued sessions to gateway nodes (stage-pressure choice, ./scheduler.ts), what each dispatch answer
 * means, re-queueing when a node is lost, adoption of what a node actually holds, and cancellation on nodes.
 */
import type { TaskRequest } from '../core/records.ts';
import { FINAL_SESSION, type RolloutContext } from './context.ts';
import type { NodeRegistry, NodeState } from './node-registry.ts';
import { SESSION_LIST_LIMIT } from './node-client.ts';
import { freeSlots, pickNode } from './scheduler.ts';
import type { SessionRow } from './store-port.ts';

/** Dispatch requests in flight to one node at a time. */
export const DISPATCH_CONCURRENCY = 8;

export class Dispatcher {
  #pumping: Promise<void> | null = null;
  #pumpAgain = false;

  constructor(
    private readonly ctx: RolloutContext,
    private readonly nodes: NodeRegistry,
    /** URL gateway nodes post session results to. */
    private readonly callbackUrl: () => string,
    /** A session a node refused (4xx): the server records it as failed (ERROR with the node's reason). */
    private readonly onRefused: (session: SessionRow, nodeId: string, error: string, attempt: number) => void,
    /** Consecutive transport failures (network, 5xx) after which a node leaves rotation until its next heartbeat. */
    private readonly transportFailureLimit = 3,
  ) {}

  /** Dispatch queued sessions to nodes. Calls coalesce: at most one pass runs at a time, and one more follows. */
  pump(): Promise<void> {
    if (this.#pumping) {
      this.#pumpAgain = true;
      return this.#pumping;
    }
    this.#pumping = (async () => {
      try {
        do {
          this.#pumpAgain = false;
          await this.#dispatchPass();
        } while (this.#pumpAgain && !this.ctx.stopped());
      } finally {
        this.#pumping = null;
      }
    })();
    return this.#pumping;
  }

  /** Resolves when no dispatch pass is running. */
  async idle(): Promise<void> {
    await this.#pumping;
  }

  /**
   * One pass: as many queued sessions as the nodes have free slots, in dispatch order (task dispatch_priority, then
   * age), each to the node pickNode chooses, all recorded INITIALIZING in one transaction before any is sent.
   * Costs O(free slots × nodes), not O(queue): with 10,000 sessions queued a pass reads only what it can place
   * (bench/scale-out.ts).
   */
  async #dispatchPass(): Promise<void> {
    const { store } = this.ctx;
    if (this.nodes.size === 0) return;
    const nodes = this.nodes.states().map((s) => this.nodes.schedulable(s));
    let free = 0;
    for (const n of nodes) free += freeSlots(n);
    if (free === 0) return;
    const queued = store.sessions.listQueued(free);
    if (queued.length === 0) return;
    const tasks = new Map<string, TaskRequest | null>();
    const taskOf = (id: string) => {
      if (!tasks.has(id)) tasks.set(id, store.tasks.get(id)?.task ?? null);
      return tasks.get(id) ?? null;
    };
    const sends: { state: NodeState; session: SessionRow; task: TaskRequest; attempt: number }[] = [];
    store.transaction(() => {
      for (const session of queued) {
        const task = taskOf(session.task_id);
        if (!task) continue;
        const target = pickNode(nodes);
        if (!target) break;
        const attempt = session.attempt;
        store.sessions.update(session.session_id, { status: 'INITIALIZING', node_id: target.node_id, attempt });
        this.nodes.dispatched(target.state, session.session_id);
        // The snapshot pickNode compares moves with the registry.
        target.in_flight++;
        target.dispatched_since_heartbeat++;
        sends.push({ state: target.state, session, task, attempt });
      }
    });
    // At most DISPATCH_CONCURRENCY requests in flight per node: a burst of hundreds at once made loaded gateways answer
    // after the client timeout, and each timed-out dispatch was re-queued and ran a second time elsewhere
    // (bench/scale-out.ts, 16 gateways × 8,000 sessions: 459 sessions ran twice).
    const byNode = new Map<NodeState, typeof sends>();
    for (const d of sends) byNode.set(d.state, [...(byNode.get(d.state) ?? []), d]);
    await Promise.all([...byNode.values()].map(async (list) => {
      let next = 0;
      await Promise.all(Array.from({ length: Math.min(DISPATCH_CONCURRENCY, list.length) }, async () => {
        while (next < list.length) {
          const d = list[next++]!;
          await this.#send(d.state, d.session, d.task, d.attempt);
        }
      }));
    }));
  }

  /**
   * Send one session and act on the node's answer (src/core/contracts/dispatch.ts `DispatchOutcome`): accepted; held
   * (the node already runs it: adopt its attempt, never dispatch twice); refused (this session cannot run: it fails
   * alone, the node stays in rotation); unavailable (the node's trouble: back to the queue with attempt + 1, and
   * `transportFailureLimit` in a row take the node out of rotation until its next heartbeat).
   */
  async #send(state: NodeState, session: SessionRow, task: TaskRequest, attempt: number): Promise<void> {
    const nodeId = state.row.node_id;
    const outcome = await state.client.dispatch({ session_id: session.session_id, task: withoutCallbackToken(task), sample_index: session.sample_index, callback_url: this.callbackUrl(), attempt });
    const current = this.ctx.store.sessions.get(session.session_id);
    const stillOurs = current !== null && current.node_id === nodeId && !FINAL_SESSION.has(current.status);
    switch (outcome.kind) {
      case 'accepted':
        state.transportFailures = 0;
        this.ctx.metrics.sessionsDispatched.inc();
        this.ctx.events.publish('session_dispatched', { session_id: session.session_id, task_id: session.task_id, node_id: nodeId, attempt });
        return;
      case 'held': {
        state.transportFailures = 0;
        const held = outcome.attempt ?? attempt;
        if (stillOurs && held !== current.attempt) this.ctx.store.sessions.update(session.session_id, { attempt: held });
        this.ctx.events.publish('session_adopted', { session_id: session.session_id, task_id: session.task_id, node_id: nodeId, attempt: held });
        return;
      }
      case 'refused':
        state.transportFailures = 0;
        this.nodes.untrack(nodeId, session.session_id);
        if (stillOurs) this.onRefused(session, nodeId, outcome.error, attempt);
        return;
      case 'unavailable':
        this.nodes.untrack(nodeId, session.session_id);
        if (stillOurs) {
          // The request may have reached the node (a timeout): the next dispatch is attempt + 1, so a result of the
          // lost one is recognised as stale.
          this.ctx.store.sessions.update(session.session_id, { status: 'REGISTERED', node_id: null, attempt: current.attempt + 1 });
        }
        state.transportFailures++;
        if (state.row.healthy && state.transportFailures >= this.transportFailureLimit) {
          this.nodes.markUnhealthy(state, `${state.transportFailures} dispatches in a row failed: ${outcome.error}`);
        }
        return;
    }
  }

  /** A node is down: mark it unhealthy and re-queue its sessions (asking it, best effort, to stop them). */
  nodeLost(state: NodeState, reason: string): void {
    for (const id of this.nodes.markUnhealthy(state, reason)) {
      this.requeue(id, state.row.node_id);
      // Best effort: a partitioned node that is still alive should stop working on the session.
      void this.cancelOn(state.row.node_id, id);
    }
  }

  /** Put a dispatched, unfinished session back in the queue with attempt + 1. */
  requeue(sessionId: string, nodeId: string): void {
    this.nodes.untrack(nodeId, sessionId);
    const s = this.#reopen(sessionId, nodeId);
    if (!s) return;
    this.ctx.metrics.sessionsRedispatched.inc();
    this.ctx.events.publish('session_requeued', { session_id: sessionId, task_id: s.task_id, from_node: nodeId, attempt: s.attempt + 1 });
  }

  /**
   * Back to REGISTERED with attempt + 1 (a result of the dispatch it leaves is then stale), when it is unfinished and
   * the store has it on `nodeId`. @returns the session as it was, or null when it was not reopened.
   */
  #reopen(sessionId: string, nodeId: string): SessionRow | null {
    const s = this.ctx.store.sessions.get(sessionId);
    if (!s || FINAL_SESSION.has(s.status) || s.node_id !== nodeId) return null;
    this.ctx.store.sessions.update(sessionId, { status: 'REGISTERED', node_id: null, attempt: s.attempt + 1 });
    return s;
  }

  /**
   * A node whose engine has been down a while gives back sessions it holds but has not started (`POST
   * /nodes/{id}/handback`): each one this server dispatched there and still has open is queued again, same session id
   * and sample index, with attempt + 1 like any re-dispatch (a result of the handed-back dispatch, which the node
   * dropped, would be stale). No result is recorded, so it is no failed attempt. Taken back only while another node
   * could run them (healthy, not draining, engine not reported down): otherwise nothing is taken, and the sessions wait
   * on their node, bounded by its `gateway.engine_wait_s`, instead of waiting unbounded in this server's queue.
   * Returns the ids taken back (the node drops exactly those).
   */
  handBack(nodeId: string, sessionIds: readonly string[], reason: string): string[] {
    const elsewhere = this.nodes.states().some((s) => s.row.node_id !== nodeId && s.row.healthy && !s.row.draining && s.engineOk !== false);
    if (!elsewhere) return [];
    const tracked = new Set(this.nodes.inFlight(nodeId));
    const taken: string[] = [];
    this.ctx.store.transaction(() => {
      for (const id of new Set(sessionIds)) {
        if (!tracked.has(id)) continue;
        const s = this.#reopen(id, nodeId);
        if (!s) continue;
        this.nodes.untrack(nodeId, id);
        taken.push(id);
        this.ctx.metrics.sessionsHandedBack.inc();
        this.ctx.events.publish('session_handed_back', { session_id: id, task_id: s.task_id, sample_index: s.sample_index, from_node: nodeId, attempt: s.attempt + 1, reason });
      }
    });
    return taken;
  }

  /**
   * Ask a node what it holds (`GET /sessions`) and compare with what this server thinks it runs there: a session the
   * node holds is adopted (its attempt taken over: nothing is dispatched again or cancelled); one it does not hold goes
   * back to the queue with attempt + 1. An unreachable node is left to the heartbeat timeout.
   */
  async reconcileNode(nodeId: string): Promise<void> {
    const state = this.nodes.get(nodeId);
    if (!state) return;
    let held: Map<string, number>;
    let complete: boolean;
    // Only what was dispatched before the node was asked: a dispatch that lands while the list is on its way (the
    // re-registration also pumps the queue) is not in it and must not be queued again.
    const asked = this.nodes.inFlight(nodeId);
    try {
      const listed = await state.client.listSessions();
      held = new Map(listed.map((s) => [s.session_id, s.attempt]));
      complete = listed.length < SESSION_LIST_LIMIT;
    } catch {
      return; // unreachable now: the heartbeat timeout decides
    }
    if (this.ctx.stopped()) return;
    let changed = false;
    const still = new Set(this.nodes.inFlight(nodeId));
    for (const id of asked) {
      if (!still.has(id)) continue;
      let attempt = held.get(id);
      const row = this.ctx.store.sessions.get(id);
      if (!row || FINAL_SESSION.has(row.status)) continue;
      if (attempt === undefined && !complete) {
        // A full page may have cut the list short: ask about this one (a failure leaves it to the heartbeat timeout).
        const one = await state.client.getSession(id).catch(() => undefined);
        if (one === undefined) continue;
        if (one !== null) attempt = one.attempt ?? row.attempt;
      }
      if (attempt === undefined) {
        this.requeue(id, nodeId);
        changed = true;
      } else if (attempt !== row.attempt) {
        this.ctx.store.sessions.update(id, { attempt });
        this.ctx.events.publish('session_adopted', { session_id: id, task_id: row.task_id, node_id: nodeId, attempt });
      }
    }
    if (changed) void this.pump();
  }

  async cancelOn(nodeId: string, sessionId: string, reason?: string): Promise<void> {
    try {
      await this.nodes.get(nodeId)?.client.cancel(sessionId, reason);
    } catch {
      // The node is gone or refuses; its late result would be ignored anyway.
    }
  }

  /** Mark sessions CANCELLED and cancel them on their nodes; returns how many. */
  async cancelSessions(sessions: SessionRow[], reason?: string): Promise<number> {
    for (const s of sessions) this.ctx.store.sessions.update(s.session_id, { status: 'CANCELLED' });
    await Promise.all(
      sessions.map(async (s) => {
        if (!s.node_id) return;
        this.nodes.untrack(s.node_id, s.session_id);
        await this.cancelOn(s.node_id, s.session_id, reason);
      }),
    );
    return sessions.length;
  }
}

/** The task as nodes get it: without metadata.callback_token, a secret meant only for the trainer's callback_url. */
export function withoutCallbackToken(task: TaskRequest): TaskRequest {
  if (!task.metadata || !('callback_token' in task.metadata)) return task;
  const { callback_token: _dropped, ...metadata } = task.metadata;
  return { ...task, metadata };
}
