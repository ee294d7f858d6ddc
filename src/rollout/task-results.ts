/**
 * What the rollout server does with session outcomes: results in (current attempt only; stale ones recorded and
 * ignored), refusals and cancels recorded as results, and a task finished into its group (or FAILED) when its sessions
 * are final or early stop is reached.
 */
import { cancelledText, resultAttempt, parseSessionResultOutline } from '../core/contracts/index.ts';
import type { SessionResult } from '../core/records.ts';
import { buildGroup, isUsable, rewardOf } from '../trace/groups.ts';
import { ACTIVE_TASK, FINAL_SESSION, HttpError, type RolloutContext } from './context.ts';
import type { Dispatcher } from './dispatcher.ts';
import type { NodeRegistry } from './node-registry.ts';
import { putGroup, type SessionRow } from './store-port.ts';
import type { TrainerCallbacks } from './trainer-callbacks.ts';

/** At most this many sessions wait in TaskResults' awaited-delivery set; the oldest leave first. */
const MAX_AWAITED_DELIVERIES = 10_000;

/**
 * Session metadata key set when a result callback for a session this server had cancelled arrived: that first one is
 * the node's delivery (it replaces the cancel's placeholder trajectory), only a further one is a duplicate.
 */
export const CANCELLED_RESULT_DELIVERED = 'cancelled_result_delivered';

export class TaskResults {
  /**
   * Sessions whose result this server took without their gateway's callback (found in the store at start,
   * `storedWhileDown`, or fetched from the node, `recover`) and whose callback has not arrived yet: that callback is
   * the result's delivery, not a duplicate. Bounded (MAX_AWAITED_DELIVERIES): a callback that never comes is forgotten.
   */
  readonly #awaitedDelivery = new Set<string>();

  constructor(
    private readonly ctx: RolloutContext,
    private readonly nodes: NodeRegistry,
    private readonly dispatcher: Dispatcher,
    private readonly callbacks: TrainerCallbacks,
    /** Dispatch again (a finished session frees a slot). */
    private readonly pump: () => void,
  ) {}

  /**
   * Cancel sessions on their nodes and record each as CANCELLED with `reason` (a result row, unless its current
   * attempt already has one), so the task view, the stored result and exports agree. The rows are written before the
   * nodes are told: a node's result that arrives while its cancel is in flight then keeps this reason (#storeResult).
   */
  async cancel(sessions: SessionRow[], reason: string): Promise<number> {
    this.ctx.store.transaction(() => {
      for (const s of sessions) this.ctx.store.results.put(placeholderResult(s, 'CANCELLED', s.node_id ?? '', reason, s.attempt));
    });
    return this.dispatcher.cancelSessions(sessions, reason);
  }

  /**
   * Store a session's result, once: a second result for the same session is acknowledged and ignored.
   * Finishes the task (group + advantages + trainer callback) when its last session ends, or early at
   * early_stop_min_usable_sessions usable results.
   * @throws HttpError 400 on an invalid result, 404 for an unknown session, 409 when task_id does not match.
   */
  async accept(input: unknown): Promise<{ session_id: string; accepted: boolean; duplicate: boolean; stale: boolean }> {
    return this.#accept(input, true);
  }

  /**
   * accept, for a gateway's callback (`delivery`) or a result this server fetched itself (recover): only a delivery
   * can be a duplicate, and a fetched result that is taken waits for its callback (#awaitedDelivery).
   */
  async #accept(input: unknown, delivery: boolean): Promise<{ session_id: string; accepted: boolean; duplicate: boolean; stale: boolean }> {
    let result: SessionResult;
    try {
      result = parseSessionResultOutline(input) as unknown as SessionResult;
    } catch (error) {
      throw new HttpError(400, (error as Error).message);
    }
    const session = this.ctx.store.sessions.get(result.session_id);
    if (!session) throw new HttpError(404, 'unknown session');
    if (session.task_id !== result.task_id) throw new HttpError(409, `session belongs to task ${session.task_id}, not ${result.task_id}`);
    const attempt = resultAttempt(result);
    if (attempt !== session.attempt) {
      // A killed, re-dispatched or lost attempt finished after all: recorded (metric, event) and ignored, whichever
      // arrives first; the current attempt's result decides.
      this.ctx.metrics.staleResults.inc();
      this.ctx.events.publish('stale_result', { session_id: session.session_id, task_id: session.task_id, attempt, current_attempt: session.attempt, node_id: result.node_id, status: result.status });
      return { session_id: result.session_id, accepted: false, duplicate: false, stale: true };
    }
    const stored = this.#storeResult(session, result);
    if (stored !== 'stored') {
      // Only a repeated delivery of a result is a duplicate: not the first callback of a result this server took
      // without it (found in the store at start, fetched by recover), not this server's own fetch of a result whose
      // callback came first, and not the node's first result for a session this server cancelled.
      const awaited = this.#awaitedDelivery.delete(result.session_id);
      if (delivery && stored === 'duplicate' && !awaited) this.ctx.metrics.duplicateResults.inc();
      return { session_id: result.session_id, accepted: false, duplicate: true, stale: false };
    }
    if (!delivery) this.#awaitDelivery(result.session_id);
    this.ctx.metrics.sessionResults.inc({ status: result.status });
    for (const nodeId of this.nodes.untrackEverywhere(session.session_id)) if (nodeId !== result.node_id) void this.dispatcher.cancelOn(nodeId, session.session_id);
    this.ctx.events.publish('session_result', { session_id: session.session_id, task_id: session.task_id, status: result.status, reward: rewardOf(result), node_id: result.node_id });
    await this.checkTask(session.task_id);
    this.pump();
    return { session_id: result.session_id, accepted: true, duplicate: false, stale: false };
  }

  /**
   * Store a current-attempt result and finish its session; false when the session was already final. A gateway sharing
   * this store (`polar serve`, `polar run`) has put the row before its callback arrives, so "new" means: the session is
   * not final yet, whoever stored the row. A session this server cancelled (task cancel, early stop) keeps CANCELLED
   * in every view, whatever its node reports later (the group was built without it).
   */
  #storeResult(session: SessionRow, result: SessionResult): 'stored' | 'duplicate' | 'cancelled' {
    return this.ctx.store.transaction(() => {
      const current = this.ctx.store.sessions.get(session.session_id);
      if (current?.status === 'CANCELLED') {
        // The node's trajectory replaces the cancel placeholder; the status and the cancel's reason stay.
        const reason = this.ctx.store.results.get(session.session_id)?.error ?? result.error;
        if (!this.ctx.store.results.put({ ...result, status: 'CANCELLED', error: reason })) this.ctx.store.results.setStatus(session.session_id, 'CANCELLED', ['ERROR', 'TIMEOUT', 'COMPLETED']);
        // The first result for a cancelled session is the node's delivery of it (a gateway sharing the store has put
        // the row already, so the row cannot tell); the session remembers it, so only a further one is a duplicate.
        if (current.metadata[CANCELLED_RESULT_DELIVERED] === true) return 'duplicate';
        this.ctx.store.sessions.update(session.session_id, { metadata: { ...current.metadata, [CANCELLED_RESULT_DELIVERED]: true } });
        return 'cancelled';
      }
      const fresh = this.ctx.store.results.put(result);
      if (!current || FINAL_SESSION.has(current.status)) return 'duplicate';
      const kept = fresh ? result : (this.ctx.store.results.get(session.session_id) ?? result);
      this.ctx.store.sessions.update(session.session_id, { status: kept.status });
      return 'stored';
    });
  }

  /** Remember that `sessionId`'s result was taken before its callback arrived (bounded: the oldest is forgotten). */
  #awaitDelivery(sessionId: string): void {
    this.#awaitedDelivery.add(sessionId);
    if (this.#awaitedDelivery.size > MAX_AWAITED_DELIVERIES) this.#awaitedDelivery.delete(this.#awaitedDelivery.values().next().value!);
  }

  /**
   * A result a gateway stored (on the same store) while this server was down, which finished its session at start
   * (RolloutServer `#loadState`): counted in `polar_rollout_session_results_total` now, once, and its gateway's
   * retried callback is then not counted as a duplicate.
   */
  storedWhileDown(sessionId: string, status: string): void {
    this.ctx.metrics.sessionResults.inc({ status });
    this.#awaitDelivery(sessionId);
  }

  /**
   * Fetch from their node the results of sessions it reports ended but whose callback this server never accepted
   * (NodeRegistry heartbeat), and accept each as if it had been posted; a result of another attempt is stale as usual.
   * Never throws: an unreachable node or a session without a result is left to the next heartbeat.
   */
  async recover(nodeId: string, sessionIds: readonly string[]): Promise<void> {
    const client = this.nodes.get(nodeId)?.client;
    if (!client) return;
    for (const id of sessionIds) {
      if (this.ctx.stopped()) return;
      const view = await client.getSession(id).catch(() => null);
      if (!view?.result) continue;
      try {
        const outcome = await this.#accept(view.result, false);
        this.ctx.events.publish('result_recovered', { session_id: id, node_id: nodeId, accepted: outcome.accepted, stale: outcome.stale });
      } catch (error) {
        this.ctx.events.publish('result_recovered', { session_id: id, node_id: nodeId, accepted: false, error: error instanceof Error ? error.message : String(error) });
      }
    }
  }

  /** A session a gateway refused at dispatch: it fails alone (ERROR with the node's reason), never retried. */
  refused(session: SessionRow, nodeId: string, error: string, attempt: number): void {
    const reason = `refused by gateway ${nodeId}: ${error}`;
    const result = placeholderResult(session, 'ERROR', nodeId, reason, attempt);
    this.ctx.metrics.refusedDispatches.inc();
    if (this.#storeResult({ ...session, attempt }, result) !== 'stored') return;
    this.ctx.metrics.sessionResults.inc({ status: 'ERROR' });
    this.ctx.events.publish('session_result', { session_id: session.session_id, task_id: session.task_id, status: 'ERROR', reward: 0, node_id: nodeId, error: reason });
    void this.checkTask(session.task_id);
  }

  /**
   * Finish a task whose sessions are all final (or early at early_stop_min_usable_sessions usable results): its group
   * of usable current-attempt results with advantages, COMPLETED, and the trainer callback. A task none of whose
   * sessions is usable gets no group (a group is never empty) and ends FAILED, the sessions' errors in its status.
   */
  async checkTask(taskId: string): Promise<void> {
    const row = this.ctx.store.tasks.get(taskId);
    if (!row || row.status !== ACTIVE_TASK) return;
    const sessions = this.ctx.store.sessions.listByTask(taskId);
    const open = sessions.filter((s) => !FINAL_SESSION.has(s.status));
    const minUsable = row.task.early_stop_min_usable_sessions;
    // Nothing can finish yet (sessions open, and too few final ones for an early stop): the results, each with its
    // trajectories, are not read. Every result calls this, so reading them made a group cost O(group²) decodes.
    if (open.length > 0 && (minUsable === undefined || sessions.length - open.length < minUsable)) return;
    const byId = new Map(sessions.map((s) => [s.session_id, s]));
    // Only results of the session's current attempt count (a shared store may hold a stale attempt's row for a while).
    const results = this.ctx.store.results.listByTask(taskId).filter((r) => {
      const s = byId.get(r.session_id);
      return s !== undefined && FINAL_SESSION.has(s.status) && resultAttempt(r) === s.attempt;
    });
    const usable = results.filter(isUsable).length;
    let earlyStopped = false;
    if (minUsable !== undefined && usable >= minUsable && open.length > 0) {
      earlyStopped = true;
      await this.cancel(open, `early stop: ${usable} usable session(s) reached early_stop_min_usable_sessions = ${minUsable}`);
    } else if (open.length > 0) return;
    const group = usable > 0 ? buildGroup(row.task, sessions, results, earlyStopped, this.ctx.clock()) : null;
    const status = group ? 'COMPLETED' : 'FAILED';
    const finished = this.ctx.store.transaction(() => {
      const again = this.ctx.store.tasks.get(taskId);
      if (!again || again.status !== ACTIVE_TASK) return false;
      if (group) putGroup(this.ctx.store, group);
      this.ctx.store.tasks.setStatus(taskId, status);
      this.callbacks.queue(taskId);
      return true;
    });
    if (!finished) return;
    this.ctx.events.publish('task_finished', { task_id: taskId, status, early_stopped: earlyStopped });
    if (group) this.ctx.events.publish('group_ready', group);
    void this.callbacks.deliver();
  }
}

/** A result for a session that ended without a trajectory (refused at dispatch, cancelled before it ran). */
function placeholderResult(session: SessionRow, status: 'ERROR' | 'CANCELLED', nodeId: string, reason: string, attempt: number): SessionResult {
  return {
    session_id: session.session_id, task_id: session.task_id, status, node_id: nodeId, error: status === 'CANCELLED' ? cancelledText(reason) : reason, attempt,
    trajectory: {
      status: 'ERROR', traces: [],
      metadata: {
        reconstruction_stats: { completions: 0, chains: 0, merged: 0, breaks: {} }, evaluation: null,
        training_filter: { trainable: false, reasons: [reason] }, attempt, placeholder: true,
      },
    },
    timing: { init_ms: 0, ready_queue_ms: 0, run_ms: 0, postrun_ms: 0, build_ms: 0, eval_ms: 0, e2e_ms: 0 },
  };
}
