/**
 * The rollout server's answers in the Python Polar's shapes (NVIDIA-NeMo/ProRL-Agent-Server
 * `src/polar/rollout/server.py` and `manager.py`), read from the store: `GET /rollout/task/{id}` (TaskStatus),
 * the trainer callback body (TaskResult), `GET /rollout/status`, the cancel tombstone of
 * `DELETE /rollout/task/{id}?register_if_missing=true`, and the dotted SSE event names. No control-plane decisions are
 * made here; reference-shapes.ts holds the per-record conversions.
 *
 * Our own keys stay next to the reference's (its pydantic models ignore unknown keys): a task view also carries
 * `num_samples`, `created_at`, `updated_at`, `sessions` (per-session status, node, attempt, reward, error), `group`
 * (rewards and GRPO / leave-one-out advantages) and `polar_status` (our uppercase status word).
 */
import type { TaskRequest } from '../core/records.ts';
import type { EventHub } from '../observe/events.ts';
import { referenceEvents, referenceNodeInfo, referenceSessionResult, referenceTaskStatus, referenceTaskStatusWord, type NodeView } from './reference-shapes.ts';
import { rewardOf } from '../trace/groups.ts';
import { groupFromRow, type RolloutStore } from './store-port.ts';

/** How long a cancel tombstone refuses a late submit of its task_id (the reference's 300 s). */
export const CANCEL_TOMBSTONE_TTL_MS = 300_000;

/** Finished results of a task in the reference's SessionResult shape, in sample order. */
function referenceResults(store: RolloutStore, task: TaskRequest): Record<string, unknown>[] {
  const sampleIndex = new Map(store.sessions.listByTask(task.task_id).map((s) => [s.session_id, s.sample_index]));
  return store.results
    .listByTask(task.task_id)
    .sort((a, b) => (sampleIndex.get(a.session_id) ?? 0) - (sampleIndex.get(b.session_id) ?? 0))
    .map((r) => referenceSessionResult(r, { task, sample_index: sampleIndex.get(r.session_id), reward: rewardOf(r) }));
}

/** One session of a task view (our key `sessions`). */
export interface TaskSessionView {
  session_id: string;
  sample_index: number;
  status: string;
  node_id: string | null;
  attempt: number;
  reward: number | null;
  error: string | null;
}

/** TaskStatus plus our keys. */
export type TaskView = ReturnType<typeof referenceTaskStatus> & {
  polar_status: string;
  num_samples: number;
  created_at: number;
  updated_at: number;
  sessions: TaskSessionView[];
  group: ReturnType<typeof groupFromRow> | null;
  /** Why a FAILED task has no group: its sessions' errors (null otherwise). */
  error: string | null;
  /**
   * The trainer callback's delivery when the task has a callback_url (null otherwise): `not-due` until the task ends,
   * then `pending` (retrying: `attempts` so far, `last_error`), `done`, `failed` (given up) or `superseded` (the task
   * id was submitted again while it was pending: this run's callback is not sent).
   */
  callback: { state: string; attempts: number; last_error: string | null } | null;
};

/**
 * `GET /rollout/task/{id}`: TaskStatus `{task_id, status, total_sessions, completed_sessions, results, result_paths}`
 * plus our keys (see the module header). Null for an unknown task.
 */
export function referenceTaskView(store: RolloutStore, taskId: string): TaskView | null {
  const row = store.tasks.get(taskId);
  if (!row) return null;
  const results = referenceResults(store, row.task);
  const byId = new Map(results.map((r) => [r.session_id as string, r]));
  const sessions = store.sessions.listByTask(taskId).map((s): TaskSessionView => {
    const r = byId.get(s.session_id);
    const meta = (r?.metadata ?? {}) as { reward?: number };
    return { session_id: s.session_id, sample_index: s.sample_index, status: s.status, node_id: s.node_id, attempt: s.attempt, reward: meta.reward ?? null, error: (r?.error as string | null | undefined) ?? s.error ?? null };
  });
  const groupRow = store.groups.get(taskId);
  return {
    ...referenceTaskStatus({ task_id: taskId, status: row.status, task: row.task, results }),
    polar_status: row.status,
    num_samples: row.task.num_samples,
    created_at: row.created_at,
    updated_at: row.updated_at,
    sessions,
    group: groupRow ? groupFromRow(groupRow) : null,
    callback: callbackView(store, taskId, row.task),
    error: row.status === 'FAILED' ? `no session of the task is usable: ${[...new Set(sessions.map((s) => s.error).filter((e): e is string => e !== null))].join('; ')}` : null,
  };
}

/** The trainer callback's delivery, for a task with a callback_url: pending (queued or retrying), done or failed. */
function callbackView(store: RolloutStore, taskId: string, task: TaskRequest): { state: string; attempts: number; last_error: string | null } | null {
  if (!task.callback_url) return null;
  const row = store.taskCallbacks.get(taskId);
  return row ? { state: row.state, attempts: row.attempts, last_error: row.last_error } : { state: 'not-due', attempts: 0, last_error: null };
}

/**
 * The body POSTed to a task's callback_url: TaskResult `{task_id, status, results, result_paths}` plus `polar_status`
 * (ours: FAILED where `status` says completed) and `group` (the evaluated group as the trainer API serves it, or null).
 * Null for an unknown task.
 */
export function referenceTaskResult(store: RolloutStore, taskId: string, group: unknown): Record<string, unknown> | null {
  const row = store.tasks.get(taskId);
  if (!row) return null;
  return { task_id: taskId, status: referenceTaskStatusWord(row.status), polar_status: row.status, results: referenceResults(store, row.task), result_paths: [], group };
}

/** Statuses of sessions that hold a slot somewhere (queued on this server or running on a node). */
const OPEN_SESSION = new Set(['REGISTERED', 'INITIALIZING', 'READY', 'RUNNING', 'POST_RUN', 'BUILDING', 'EVALUATING']);

/**
 * `GET /rollout/status`: `{tasks: {task_id: status}, pipeline: {pending_sessions}, nodes: {nodes: [GatewayNodeInfo]}}`
 * as the reference CLI reads it, plus our `task_counts` and `sessions` (counts by status) and `groups_ready`.
 */
export function referenceRolloutStatus(store: RolloutStore, nodes: NodeView[], heartbeatIntervalSeconds: number): Record<string, unknown> {
  const tasks: Record<string, string> = {};
  const taskCounts: Record<string, number> = {};
  const sessions: Record<string, number> = {};
  let pending = 0;
  for (const t of store.tasks.list()) {
    tasks[t.task.task_id] = referenceTaskStatusWord(t.status);
    // Ours: a task with no usable session counts as failed here (the reference word for it is "completed").
    const word = t.status.toLowerCase();
    taskCounts[word] = (taskCounts[word] ?? 0) + 1;
    for (const s of store.sessions.listByTask(t.task.task_id)) {
      sessions[s.status] = (sessions[s.status] ?? 0) + 1;
      if (OPEN_SESSION.has(s.status)) pending++;
    }
  }
  return {
    tasks,
    pipeline: { pending_sessions: pending },
    nodes: { nodes: nodes.map((n) => referenceNodeInfo(n, heartbeatIntervalSeconds)) },
    task_counts: taskCounts,
    sessions,
    groups_ready: store.groups.listReady().length,
  };
}

/**
 * Cancel tombstones: a `DELETE …?register_if_missing=true` for a task this server does not know yet (its submit is
 * still in flight) is remembered for CANCEL_TOMBSTONE_TTL_MS, and a submit of that id in that time is refused (409).
 * In memory, as in the reference: a restart forgets them.
 */
export class CancelTombstones {
  readonly #until = new Map<string, number>();
  constructor(private readonly now: () => number, private readonly ttlMs = CANCEL_TOMBSTONE_TTL_MS) {}

  add(taskId: string): void {
    this.#prune();
    this.#until.set(taskId, this.now() + this.ttlMs);
  }

  has(taskId: string): boolean {
    this.#prune();
    return this.#until.has(taskId);
  }

  #prune(): void {
    const now = this.now();
    for (const [id, until] of this.#until) if (until <= now) this.#until.delete(id);
  }
}

/** The TaskStatus of a tombstoned task: cancelled, no sessions. */
export function tombstoneStatus(taskId: string): Record<string, unknown> {
  return { task_id: taskId, status: 'cancelled', total_sessions: 0, completed_sessions: 0, results: [], result_paths: [] };
}

/**
 * Publish the reference's event for each of ours on the same hub (`task.created`, `task.updated`, `task.completed`,
 * `session.state_changed`), right after ours. Returns the unsubscribe function.
 */
export function publishReferenceEvents(hub: EventHub, store: RolloutStore): () => void {
  // A count, not the results themselves: this runs for every session event (bench/scale-out.ts found the JSON decode
  // of a task's results per event to be the server's largest cost with thousands of sessions in flight).
  const lookup = (taskId: string) => {
    const row = store.tasks.get(taskId);
    return row ? { task: row.task, completed: store.results.countByTask(taskId) } : null;
  };
  return hub.subscribe((event) => {
    // Nobody but this translator listens (no /events client, no dashboard): nothing to translate for.
    if (event.type.includes('.') || hub.subscriberCount <= 1) return;
    for (const [type, data] of referenceEvents(event.type, event.data, lookup)) hub.publish(type, data);
  });
}
