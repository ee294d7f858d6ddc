/**
 * Trainer callbacks: when a task ends, POST `{task_id, status, group}` to its `callback_url`, retried with backoff and
 * persisted, so a restart delivers what was pending. The control-plane token never leaves the cluster: the call carries
 * only the task's own `metadata.callback_token`.
 */
import type { TaskRequest } from '../core/records.ts';
import { errorText, type RolloutContext } from './context.ts';
import type { TaskCallbackRow } from './store-port.ts';

export class TrainerCallbacks {
  #inFlight = new Set<string>();
  /** Deliveries in progress; stop() aborts and awaits them so none writes to a closed store. */
  #jobs = new Set<Promise<void>>();
  #abort = new AbortController();
  #nextTry = new Map<string, number>();

  constructor(
    private readonly ctx: RolloutContext,
    private readonly opts: { retries: number; fetch: typeof fetch; body: (taskId: string, status: string) => unknown },
  ) {}

  /** Re-arm after a stop (the server started again). */
  restart(): void {
    this.#abort = new AbortController();
  }

  /** Abort deliveries in flight (they stay pending in the store) and wait for them. */
  async stop(): Promise<void> {
    this.#abort.abort();
    await Promise.allSettled([...this.#jobs]);
  }

  /** Queue the callback of a finished task (once; only when it has a callback_url). Call inside the finishing transaction. */
  queue(taskId: string): void {
    const task = this.ctx.store.tasks.get(taskId)?.task;
    if (!task?.callback_url || this.ctx.store.taskCallbacks.get(taskId)) return;
    this.ctx.store.taskCallbacks.upsert({ task_id: taskId, state: 'pending', attempts: 0, last_error: null, updated_at: this.ctx.clock() });
  }

  /**
   * POST each pending callback whose backoff has passed. Delivery is at-least-once: the state is persisted as `done`
   * right after a 2xx, so only a crash in between can repeat a call (the body names the task).
   */
  async deliver(): Promise<void> {
    const now = this.ctx.clock();
    const pending = this.ctx.store.taskCallbacks.listByState('pending').filter((c) => !this.#inFlight.has(c.task_id) && (this.#nextTry.get(c.task_id) ?? 0) <= now);
    if (this.ctx.stopped()) return;
    await Promise.all(
      pending.map((c) => {
        const job = this.#deliverOne(c).finally(() => this.#jobs.delete(job));
        this.#jobs.add(job);
        return job;
      }),
    );
  }

  /**
   * Whether the callback's row changed while it was being delivered: its task id was submitted again and the run
   * archived (store/tasks.ts archiveRun marks it superseded), so its outcome must not be written onto the new run.
   */
  #moved(cb: TaskCallbackRow): boolean {
    const now = this.ctx.store.taskCallbacks.get(cb.task_id);
    if (now !== null && now.state === cb.state && now.attempts === cb.attempts && now.updated_at === cb.updated_at) return false;
    this.#nextTry.delete(cb.task_id);
    return true;
  }

  async #deliverOne(cb: TaskCallbackRow): Promise<void> {
    const { store } = this.ctx;
    const row = store.tasks.get(cb.task_id);
    if (!row?.task.callback_url) return;
    this.#inFlight.add(cb.task_id);
    try {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      const callbackToken = callbackTokenOf(row.task);
      if (callbackToken) headers.authorization = `Bearer ${callbackToken}`;
      const body = this.opts.body(cb.task_id, row.status);
      const response = await this.opts.fetch(row.task.callback_url, { method: 'POST', headers, body: JSON.stringify(body), signal: AbortSignal.any([AbortSignal.timeout(10_000), this.#abort.signal]) });
      await response.body?.cancel();
      if (this.#moved(cb)) return;
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      store.taskCallbacks.upsert({ ...cb, state: 'done', attempts: cb.attempts + 1, last_error: null, updated_at: this.ctx.clock() });
      this.#nextTry.delete(cb.task_id);
      this.ctx.metrics.trainerCallbacks.inc({ outcome: 'delivered' });
      this.ctx.events.publish('trainer_callback', { task_id: cb.task_id, ok: true });
    } catch (error) {
      if (this.ctx.stopped()) return; // aborted by stop(): not an attempt; it stays pending for the next start
      if (this.#moved(cb)) return;
      const attempts = cb.attempts + 1;
      const state = attempts > this.opts.retries ? 'failed' : 'pending';
      store.taskCallbacks.upsert({ ...cb, state, attempts, last_error: errorText(error), updated_at: this.ctx.clock() });
      // A backoff only for a callback that will be tried again: a failed one is never listed as pending again.
      if (state === 'pending') this.#nextTry.set(cb.task_id, this.ctx.clock() + callbackBackoffMs(attempts));
      else this.#nextTry.delete(cb.task_id);
      this.ctx.metrics.trainerCallbacks.inc({ outcome: state === 'failed' ? 'failed' : 'retry' });
      if (state === 'failed') {
        this.ctx.events.publish('trainer_callback', { task_id: cb.task_id, ok: false, error: errorText(error) });
        // Given up: say so where an operator looks (the group is still served by GET /rollout/groups).
        console.error(`polar rollout: the callback of task ${cb.task_id} to ${row.task.callback_url} failed ${attempts} time(s) and is given up: ${errorText(error)}; its group stays readable at GET /rollout/groups`);
      }
    } finally {
      this.#inFlight.delete(cb.task_id);
    }
  }
}

/**
 * Wait before retry `attempts` + 1, ms: 0.5 s doubling to at most 60 s, so the default 12 retries span about 6 minutes (363.5 s)
 * (a trainer restarting takes longer than the 16 s of the first five).
 */
export function callbackBackoffMs(attempts: number): number {
  return Math.min(60_000, 250 * 2 ** attempts);
}

/** metadata.callback_token of a task, or null. */
function callbackTokenOf(task: TaskRequest): string | null {
  const token = task.metadata?.callback_token;
  return typeof token === 'string' && token.length > 0 ? token : null;
}
