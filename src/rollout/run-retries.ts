/**
 * `polar run --max-retries N`: sessions that ended in ERROR for an infrastructure reason (INIT, runtime, evaluator or
 * build failures: status ERROR and not cancelled) are run again, up to N more rounds. A policy failure never is: a
 * COMPLETED session with reward 0, a harness that reported failure, or a TIMEOUT (the agent ran out of budget).
 * A retry is a new TaskRequest `<task_id>~retry<k>` with num_samples = the failed sessions and the task's group label
 * (`metadata.group_id`). Its `metadata.retry_of` names the request it re-runs (the task, or the previous round's
 * retry) and `metadata.retry_samples` which of that request's samples its own samples 0, 1, … stand in for.
 * The rollout server knows nothing of retries: it evaluates each request as a group of its own (the task's group
 * without the failed samples, and the retry's of those samples alone) as soon as it finishes, before `polar run`
 * decides to retry. So every output of a run folds retries back into their task when it is read: per-task results
 * with {@link finalAttempts}, GRPO groups and advantages (exports, accepted.jsonl) with {@link finalGroups}.
 */
import { isCancelledError } from '../core/contracts/index.ts';
import type { SessionResult, TaskRequest } from '../core/records.ts';
import { groupFromRow } from './store-port.ts';
import type { Store } from '../store/index.ts';
import { buildGroup, type GroupRecord } from '../trace/groups.ts';

/** True when a stored result failed for an infrastructure reason (the only failures a retry may repeat). */
export function isInfrastructureFailure(result: { status: string; error: string | null }): boolean {
  return result.status === 'ERROR' && !isCancelledError(result.error);
}

/**
 * The retry round `round` (1-based) for `requests` (the previous round's TaskRequests): one request per task that had
 * infrastructure failures, for that many sessions; [] when none failed.
 */
export function retryRequests(store: Store, requests: readonly TaskRequest[], round: number): TaskRequest[] {
  const out: TaskRequest[] = [];
  for (const request of requests) {
    const failed = infrastructureFailures(store, request.task_id);
    if (failed.length === 0) continue;
    const base = request.task_id.replace(/~retry\d+$/, '');
    out.push({
      ...request,
      task_id: `${base}~retry${round}`,
      num_samples: failed.length,
      metadata: { ...request.metadata, group_id: request.metadata?.group_id ?? base, retry_of: request.task_id, retry_samples: failed },
    });
  }
  return out;
}

/**
 * What {@link finalAttempts} reads: a task by id (its request and creation time, Unix ms), a task's sessions, a
 * session's result. A {@link Store} is one; so is a view over the rollout server's store (the dashboard's source).
 */
export interface AttemptSource {
  tasks: { get(taskId: string): AttemptTask | null };
  sessions: { listByTask(taskId: string): readonly { session_id: string; sample_index: number }[] };
  results: { get(sessionId: string): { status: string; error: string | null } | null };
}

/** A stored task as {@link finalAttempts} needs it. */
export interface AttemptTask {
  task: TaskRequest;
  created_at: number;
}

/** Sample indices of `taskId`'s sessions that failed for an infrastructure reason, ascending. */
function infrastructureFailures(store: AttemptSource, taskId: string): number[] {
  return store.sessions.listByTask(taskId)
    .filter((s) => {
      const result = store.results.get(s.session_id);
      return result !== null && isInfrastructureFailure(result);
    })
    .map((s) => s.sample_index)
    .sort((a, b) => a - b);
}

/** One sample of a task as a run reports it: the session of its last attempt stands in for those retries re-ran. */
export interface FinalSample {
  /** The task the sample belongs to: the id the run submitted, never a retry's `<task_id>~retry<k>`. */
  task_id: string;
  /** The sample's index in that task (0..num_samples-1). */
  sample_index: number;
  /** The session of the sample's last attempt. */
  session_id: string;
  /** The task that session ran under: `task_id`, or the retry `<task_id>~retry<k>` that ran it. */
  session_task_id: string;
  /** Sessions of earlier attempts that retries re-ran, oldest first ([] when the sample ran once). */
  replaced: string[];
}

/** A task with one {@link FinalSample} per sample, in sample order. */
export interface FinalTask {
  task_id: string;
  samples: FinalSample[];
}

/**
 * The tasks among `taskIds` with every retry among them folded into the task it re-ran: one entry per task, in the
 * order of `taskIds`, with `num_samples` samples each; a retry's session k replaces sample `metadata.retry_samples[k]`
 * of `metadata.retry_of` (stores written before retry_samples existed: that request's k-th infrastructure failure, the
 * order retryRequests used). A retry whose parent is not among `taskIds`, or whose sessions do not each replace an
 * infrastructure failure of its parent, or that was stored before its parent (a retry of an earlier run of the id
 * that is not among `taskIds`), is listed as a task of its own. Archived runs fold too: a run that `polar run --fresh`
 * (or a trainer reusing ids) moved aside as `<task_id>@run<n>` keeps its retries, which still name `<task_id>` in
 * `retry_of`, when those are among `taskIds` (the parent is the run of that id created last before the retry).
 * Ids the store does not hold are skipped.
 */
export function finalAttempts(store: AttemptSource, taskIds: readonly string[]): FinalTask[] {
  const ids = [...new Set(taskIds)];
  const rows = ids.map((id) => store.tasks.get(id)).filter((row): row is AttemptTask => row !== null);
  const byId = new Map(rows.map((row) => [row.task.task_id, row]));
  /** Per task id (a retry's too): its sample index → the FinalSample that sample now stands for. */
  const slots = new Map<string, Map<number, FinalSample>>();
  const out: FinalTask[] = [];
  const addTask = (row: AttemptTask) => {
    const taskId = row.task.task_id;
    const samples = [...store.sessions.listByTask(taskId)].sort((a, b) => a.sample_index - b.sample_index)
      .map((s): FinalSample => ({ task_id: taskId, sample_index: s.sample_index, session_id: s.session_id, session_task_id: taskId, replaced: [] }));
    slots.set(taskId, new Map(samples.map((s) => [s.sample_index, s])));
    out.push({ task_id: taskId, samples });
  };
  /** Runs of each id among the rows: the id itself and its archived runs `<id>@run<n>` (store/tasks.ts archiveRun). */
  const runs = new Map<string, AttemptTask[]>();
  for (const row of rows) {
    const base = row.task.task_id.replace(/@run\d+$/, '');
    runs.set(base, [...(runs.get(base) ?? []), row]);
  }
  let pending: { row: AttemptTask; parent: string }[] = [];
  for (const row of rows) {
    const parent = retryParent(row, runs);
    if (parent !== null) pending.push({ row, parent });
    else addTask(row);
  }
  // Round k+1 folds into round k's slots, so a retry waits until its parent is placed.
  for (let placed = true; pending.length > 0 && placed;) {
    placed = false;
    const waiting: typeof pending = [];
    for (const entry of pending) {
      const parentSlots = slots.get(entry.parent);
      if (!parentSlots) {
        waiting.push(entry);
        continue;
      }
      placed = true;
      if (!foldRetry(store, entry.row.task, entry.parent, parentSlots, slots)) addTask(entry.row);
    }
    pending = waiting;
  }
  for (const { row } of pending) addTask(row);
  return out;
}

/**
 * The id of the stored run a retry re-ran, or null (not a retry, or its parent is not among the rows). `metadata.retry_of`
 * names the id as it was when the retry was submitted; a later run of that id (`polar run --fresh`, a trainer reusing
 * ids) archived that run as `<retry_of>@run<n>` and the retry may have been archived too. So the parent is the run of
 * `retry_of` (the id itself or an archived `@run<n>`) created last no later than the retry; a retry stored before every
 * run of its parent re-ran one that is not among the rows.
 */
function retryParent(row: AttemptTask, runs: Map<string, AttemptTask[]>): string | null {
  const parent = retryOf(row.task);
  if (parent === null || parent === row.task.task_id) return null;
  let best: AttemptTask | null = null;
  for (const candidate of runs.get(parent.replace(/@run\d+$/, '')) ?? []) {
    const id = candidate.task.task_id;
    if (id !== parent && !id.startsWith(`${parent}@run`)) continue;
    if (id === row.task.task_id || candidate.created_at > row.created_at) continue;
    if (best === null || candidate.created_at > best.created_at) best = candidate;
  }
  return best?.task.task_id ?? null;
}

/** `metadata.retry_of` of a retry request; null for any other. */
function retryOf(task: TaskRequest): string | null {
  const parent = task.metadata?.retry_of;
  return typeof parent === 'string' && parent !== '' ? parent : null;
}

/**
 * Put the sessions of `retry` in the slots of the samples of `parent` (the stored id of the run it re-ran) they re-ran;
 * false (nothing changed) when they do not map one-to-one onto samples of the parent whose own session failed for an
 * infrastructure reason.
 */
function foldRetry(store: AttemptSource, retry: TaskRequest, parent: string, parentSlots: Map<number, FinalSample>, slots: Map<string, Map<number, FinalSample>>): boolean {
  const sessions = [...store.sessions.listByTask(retry.task_id)].sort((a, b) => a.sample_index - b.sample_index);
  const recorded = retry.metadata?.retry_samples;
  const targets = Array.isArray(recorded) && recorded.every((n) => Number.isSafeInteger(n)) ? (recorded as number[]) : infrastructureFailures(store, parent);
  if (targets.length !== sessions.length || new Set(targets).size !== targets.length) return false;
  const moves = sessions.map((s, k) => ({ session: s, slot: parentSlots.get(targets[k]!) }));
  const replaceable = moves.every(({ slot }) => {
    if (!slot || slot.session_task_id !== parent) return false;
    const result = store.results.get(slot.session_id);
    return result !== null && isInfrastructureFailure(result);
  });
  if (!replaceable) return false;
  const own = new Map<number, FinalSample>();
  for (const { session, slot } of moves) {
    slot!.replaced.push(slot!.session_id);
    slot!.session_id = session.session_id;
    slot!.session_task_id = retry.task_id;
    own.set(session.sample_index, slot!);
  }
  slots.set(retry.task_id, own);
  return true;
}

/** A task's GRPO group as a run's outputs deliver it: its samples by their last attempts ({@link finalAttempts}). */
export interface FinalGroup {
  /** The task: the id the run submitted, never a retry's. */
  task_id: string;
  /** One per sample of the task, in sample order. */
  samples: FinalSample[];
  /** True when a retry's session stands in for at least one sample. */
  folded: boolean;
  /**
   * The evaluated group over the samples' last attempts: the group the rollout server stored for the task when nothing
   * was folded; when something was, one built as the server builds groups (buildGroup: GRPO and leave-one-out
   * advantages over the usable last attempts, in sample order, the task's `sample_index`, `task_id` and `group_id`),
   * once every last attempt has a result. Null before then (a task or a retry still running).
   */
  group: GroupRecord | null;
}

/**
 * The GRPO groups of the tasks among `taskIds`, retries folded in ({@link finalAttempts}: one entry per task, in
 * order, a retry whose sessions replace no infrastructure failure of its parent listed as a task of its own).
 * A folded group keeps the task's `early_stopped` and takes the `created_at` of the latest stored group among the
 * task and its retries.
 * @returns one FinalGroup per task.
 */
export function finalGroups(store: Store, taskIds: readonly string[]): FinalGroup[] {
  return finalAttempts(store, taskIds).map((task): FinalGroup => {
    const stored = store.groups.get(task.task_id);
    const folded = task.samples.some((s) => s.replaced.length > 0);
    if (!folded) return { task_id: task.task_id, samples: task.samples, folded, group: stored ? groupFromRow(stored) : null };
    const request = store.tasks.get(task.task_id)!.task;
    const results = task.samples.map((s) => store.results.get(s.session_id));
    if (results.some((r) => r === null)) return { task_id: task.task_id, samples: task.samples, folded, group: null };
    const created = [task.task_id, ...new Set(task.samples.map((s) => s.session_task_id))]
      .map((id) => store.groups.get(id)?.created_at ?? null).filter((t): t is number => t !== null);
    const earlyStopped = stored ? groupFromRow(stored).early_stopped === true : false;
    const group = buildGroup(request, task.samples, results as SessionResult[], earlyStopped, created.length > 0 ? Math.max(...created) : Date.now());
    return { task_id: task.task_id, samples: task.samples, folded, group };
  });
}
