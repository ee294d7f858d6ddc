/**
 * Dispatch of queued sessions to gateway nodes (stage-pressure choice, ./scheduler.ts), re-queueing when a node is
 * lost, reconciliation with what a node actually holds, and cancellation on nodes.
 */
import type { TaskRequest } from '../core/records.ts';
import { FINAL_SESSION, type RolloutContext } from './context.ts';
import type { NodeRegistry, NodeState } from './node-registry.ts';
import { pickNode } from './scheduler.ts';
import type { SessionRow } from './store-port.ts';

export class Dispatcher {
  #pumping: Promise<void> | null = null;
  #pumpAgain = false;

  constructor(
    private readonly ctx: RolloutContext,
    private readonly nodes: NodeRegistry,
    /** URL gateway nodes post session results to. */
    private readonly callbackUrl: () => string,
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

  async #dispatchPass(): Promise<void> {
    const { store } = this.ctx;
    const queued = store.sessions.listByStatus('REGISTERED');
    if (queued.length === 0 || this.nodes.size === 0) return;
    const priority = new Map<string, number>();
    const taskOf = new Map<string, TaskRequest>();
    for (const s of queued) {
      if (taskOf.has(s.task_id)) continue;
      const row = store.tasks.get(s.task_id);
      if (row) {
        taskOf.set(s.task_id, row.task);
        priority.set(s.task_id, row.task.dispatch_priority ?? 0);
      }
    }
    queued.sort((a, b) => (priority.get(b.task_id) ?? 0) - (priority.get(a.task_id) ?? 0));
    const states = this.nodes.states();
    const sends: Promise<void>[] = [];
    for (const session of queued) {
      const task = taskOf.get(session.task_id);
      if (!task) continue;
      const target = pickNode(states.map((s) => this.nodes.schedulable(s)));
      if (!target) break;
      const attempt = session.attempt;
      store.sessions.update(session.session_id, { status: 'INITIALIZING', node_id: target.node_id, attempt });
      this.nodes.track(target.node_id, session.session_id);
      target.state.dispatchedSinceHeartbeat++;
      sends.push(this.#send(target.state, session, task, attempt));
    }
    await Promise.all(sends);
  }

  async #send(state: NodeState, session: SessionRow, task: TaskRequest, attempt: number): Promise<void> {
    try {
      await state.client.dispatch({ session_id: session.session_id, task: withoutCallbackToken(task), sample_index: session.sample_index, callback_url: this.callbackUrl(), attempt });
      this.ctx.metrics.sessionsDispatched.inc();
      this.ctx.events.publish('session_dispatched', { session_id: session.session_id, task_id: session.task_id, node_id: state.row.node_id, attempt });
    } catch (error) {
      // The node may be down: take it out of rotation until its next heartbeat, and put the session back in the queue.
      this.nodes.untrack(state.row.node_id, session.session_id);
      const current = this.ctx.store.sessions.get(session.session_id);
      if (current && current.status === 'INITIALIZING' && current.node_id === state.row.node_id) {
        this.ctx.store.sessions.update(session.session_id, { status: 'REGISTERED', node_id: null });
      }
      if (state.row.healthy) this.nodeLost(state, `dispatch failed: ${(error as Error).message}`);
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
    const s = this.ctx.store.sessions.get(sessionId);
    if (!s || FINAL_SESSION.has(s.status) || s.node_id !== nodeId) return;
    this.ctx.store.sessions.update(sessionId, { status: 'REGISTERED', node_id: null, attempt: s.attempt + 1 });
    this.ctx.metrics.sessionsRedispatched.inc();
    this.ctx.events.publish('session_requeued', { session_id: sessionId, task_id: s.task_id, from_node: nodeId, attempt: s.attempt + 1 });
  }

  /** Ask a node about every session this server thinks it runs; re-queue the ones it does not know. */
  async reconcileNode(nodeId: string): Promise<void> {
    const state = this.nodes.get(nodeId);
    if (!state) return;
    let changed = false;
    await Promise.all(
      this.nodes.inFlight(nodeId).map(async (id) => {
        try {
          if ((await state.client.getSession(id)) === null) {
            this.requeue(id, nodeId);
            changed = true;
          }
        } catch {
          // Unreachable now: the heartbeat timeout decides.
        }
      }),
    );
    if (changed) void this.pump();
  }

  async cancelOn(nodeId: string, sessionId: string): Promise<void> {
    try {
      await this.nodes.get(nodeId)?.client.cancel(sessionId);
    } catch {
      // The node is gone or refuses; its late result would be ignored anyway.
    }
  }

  /** Mark sessions CANCELLED and cancel them on their nodes; returns how many. */
  async cancelSessions(sessions: SessionRow[]): Promise<number> {
    for (const s of sessions) this.ctx.store.sessions.update(s.session_id, { status: 'CANCELLED' });
    await Promise.all(
      sessions.map(async (s) => {
        if (!s.node_id) return;
        this.nodes.untrack(s.node_id, s.session_id);
        await this.cancelOn(s.node_id, s.session_id);
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
