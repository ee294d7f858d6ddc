/**
 * Readable results from a store: one row per session (task, sample, status, reward, turns, completions, chains,
 * trainable tokens, re-rendered joins, duration, error) for `polar results`, and session lookup by id prefix or by
 * task and sample (the sample's last attempt) for `polar trace show`. Sessions captured by a standalone proxy (records,
 * no task) are listed too, with status CAPTURED and no reward. A session that `polar run --max-retries` re-ran names the session that did
 * (`retried_by`), and the totals count each sample by its last attempt (src/rollout/run-retries.ts finalAttempts).
 */
import { TERMINAL_SESSION_STATUSES, type SessionResult, type SessionStatus } from '../core/records.ts';
import { finalAttempts } from '../rollout/run-retries.ts';
import type { Store } from '../store/index.ts';

export interface ResultRow {
  task_id: string | null;
  sample_index: number | null;
  session_id: string;
  /** The session's status (COMPLETED, ERROR, TIMEOUT, CANCELLED, RUNNING, …; CAPTURED: records without a task). */
  status: string;
  /** Outcome reward; null when the session was not evaluated (shown as —, never as 0). */
  reward: number | null;
  /** Model calls of the trajectory's attempt. */
  turns: number;
  /** Every stored completion of the session (all attempts). */
  completions: number;
  /** Traces (chains) of the trajectory; null without a result. */
  chains: number | null;
  /** loss_mask 1 tokens over the traces; null without a result. */
  trainable_tokens: number | null;
  /** Joins where the next prompt held a re-rendered version of the sampled answer; null without a result. */
  rerendered_joins: number | null;
  /** Chain breaks by reason (only reasons that occurred); null without a result. */
  breaks: Record<string, number> | null;
  /** End-to-end seconds (dispatch to result); null without a result. */
  duration_s: number | null;
  error: string | null;
  /**
   * The session of the `polar run --max-retries` retry (`<task_id>~retry<k>`) that re-ran this one after an
   * infrastructure failure; null when none did. Such a session does not count in a run's results: its sample counts
   * by its last attempt.
   */
  retried_by: string | null;
}

export interface ResultFilter {
  /** Task id, or a prefix of one. */
  task?: string;
  /** Session status, case-insensitive. */
  status?: string;
  /** Only sessions that did not complete (any status but COMPLETED). */
  failed?: boolean;
}

/** The evaluated outcome reward of a result, or null when it was never evaluated. */
export function evaluatedReward(result: SessionResult): number | null {
  if (result.status === 'CANCELLED') return null;
  const evaluation = result.trajectory?.metadata?.evaluation as { outcome_reward?: unknown; details?: Record<string, unknown> } | null | undefined;
  if (!evaluation || typeof evaluation.outcome_reward !== 'number') return null;
  // A session that was never evaluated carries a 0 with `details.skipped`, and one cancelled in POSTRUN a 0 with
  // `details.cancelled` (src/gateway/postrun.ts): neither is a real 0.
  if (evaluation.details && ('skipped' in evaluation.details || 'cancelled' in evaluation.details)) return null;
  return evaluation.outcome_reward;
}

/** A reward at or above this counts as a pass for pass@1 (binary evaluators give 0 or 1). */
export const PASS_REWARD = 1;

/** One sample of a task as pass@1 and mean reward see it: its last attempt's status and evaluated reward. */
export interface SampleOutcome {
  /** The status of the sample's last attempt (COMPLETED, ERROR, TIMEOUT, CANCELLED, or a non-final one while it runs). */
  status: string;
  /** Its evaluated reward ({@link evaluatedReward}); null when it was not evaluated (error, timeout, cancelled, unfinished). */
  reward: number | null;
}

/** A task's score over its samples ({@link scoreTask}). */
export interface TaskScore {
  /** Samples with an evaluated reward ≥ {@link PASS_REWARD}. */
  passed: number;
  /** Samples pass@1 is over: those that finished (COMPLETED, ERROR, TIMEOUT), not the cancelled or unfinished ones. */
  judged: number;
  /** Samples whose last attempt was cancelled (task cancel, early stop, run deadline): never judged. */
  cancelled: number;
  /** Samples not finished yet (queued, running, interrupted and queued again, or not created yet): not judged yet. */
  unfinished: number;
  /** passed / judged, 0..1; null when no sample has finished (or every one was cancelled). */
  pass_at_1: number | null;
}

/**
 * pass@1 of one task as c/n, the one rule every view of a run uses (`polar run`'s summary and splits, the dashboard):
 * c = samples with an evaluated reward ≥ PASS_REWARD; n = the samples that finished (COMPLETED, ERROR, TIMEOUT). A
 * sample that ended without a reward (ERROR, TIMEOUT) counts as a failure; a cancelled one was never judged and an
 * unfinished one (an interrupted `polar run`, a task still running) is not judged yet, so both are out of n (shown as
 * counts of their own, never as a 0).
 * @param numSamples the task's num_samples; samples not in `samples` (not created yet) count as unfinished. Default:
 *   `samples.length`.
 */
export function scoreTask(samples: readonly SampleOutcome[], numSamples = samples.length): TaskScore {
  let passed = 0;
  let judged = 0;
  let cancelled = 0;
  for (const s of samples) {
    if (s.status === 'CANCELLED') cancelled++;
    else if (TERMINAL_SESSION_STATUSES.has(s.status as SessionStatus)) {
      judged++;
      if (s.reward !== null && s.reward >= PASS_REWARD) passed++;
    }
  }
  const unfinished = Math.max(numSamples, samples.length) - judged - cancelled;
  return { passed, judged, cancelled, unfinished, pass_at_1: judged > 0 ? passed / judged : null };
}

/**
 * Mean reward over the evaluated samples (non-null rewards), the one rule every view uses: a sample without a reward
 * (error, timeout, cancelled, unfinished) is left out, never counted as 0. Null when none was evaluated.
 */
export function meanReward(rewards: Iterable<number | null>): number | null {
  let sum = 0;
  let n = 0;
  for (const r of rewards) {
    if (r === null) continue;
    sum += r;
    n++;
  }
  return n > 0 ? sum / n : null;
}

/** pass@1 over several tasks: the mean of the tasks' pass@1 ({@link scoreTask}), tasks without one left out; null for none. */
export function meanPassAt1(values: Iterable<number | null>): number | null {
  return meanReward(values);
}

/**
 * A session's status as `polar results` shows it: its SessionResult's, else the session's (a dispatched session with
 * no result yet), else CAPTURED (records from a standalone proxy, no task).
 */
export function sessionStatus(store: Store, sessionId: string): string {
  return store.results.get(sessionId)?.status ?? store.sessions.get(sessionId)?.status ?? 'CAPTURED';
}

function rowOf(store: Store, sessionId: string, base: { task_id: string | null; sample_index: number | null; status: string; error: string | null; retried_by: string | null }): ResultRow {
  const result = store.results.get(sessionId);
  const counts = store.completions.attemptCounts(sessionId);
  const completions = counts.reduce((n, c) => n + c.completions, 0);
  if (!result) return { ...base, session_id: sessionId, reward: null, turns: counts.at(-1)?.completions ?? 0, completions, chains: null, trainable_tokens: null, rerendered_joins: null, breaks: null, duration_s: null };
  const stats = result.trajectory.metadata.reconstruction_stats;
  let trainable = 0;
  for (const t of result.trajectory.traces) for (const m of t.loss_mask) trainable += m;
  const breaks = Object.fromEntries(Object.entries(stats?.breaks ?? {}).filter(([, n]) => n > 0));
  return {
    ...base, session_id: sessionId, status: result.status, reward: evaluatedReward(result), turns: stats?.completions ?? 0, completions,
    chains: result.trajectory.traces.length, trainable_tokens: trainable, rerendered_joins: stats?.rerender_mismatches ?? 0, breaks,
    duration_s: result.timing ? result.timing.e2e_ms / 1000 : null, error: result.error ?? base.error,
  };
}

/** Every session of the store as a row: tasks in creation order, samples in order, then task-less captures. */
export function resultRows(store: Store, filter: ResultFilter = {}): ResultRow[] {
  const rows: ResultRow[] = [];
  const known = new Set<string>();
  const tasks = store.tasks.list().sort((a, b) => a.created_at - b.created_at);
  const retriedBy = new Map<string, string>();
  for (const task of finalAttempts(store, tasks.map((t) => t.task.task_id))) {
    for (const s of task.samples) [...s.replaced, s.session_id].forEach((id, i, chain) => i > 0 && retriedBy.set(chain[i - 1]!, id));
  }
  for (const task of tasks) {
    const taskId = task.task.task_id;
    for (const s of store.sessions.listByTask(taskId).sort((a, b) => a.sample_index - b.sample_index)) {
      known.add(s.session_id);
      rows.push(rowOf(store, s.session_id, { task_id: taskId, sample_index: s.sample_index, status: s.status, error: s.error, retried_by: retriedBy.get(s.session_id) ?? null }));
    }
  }
  for (const id of store.completions.listSessionIds()) {
    if (known.has(id)) continue;
    const result = store.results.get(id);
    rows.push(rowOf(store, id, { task_id: result?.task_id ?? null, sample_index: null, status: result?.status ?? 'CAPTURED', error: null, retried_by: null }));
  }
  return rows.filter((r) =>
    (filter.task === undefined || (r.task_id ?? '').startsWith(filter.task)) &&
    (filter.status === undefined || r.status.toUpperCase() === filter.status.toUpperCase()) &&
    (!filter.failed || r.status !== 'COMPLETED'));
}

/**
 * The session meant by `--session ID|PREFIX` or `--task T --sample N`: for a task, the session of the sample's last
 * attempt (a `polar run --max-retries` retry's when one re-ran it; src/rollout/run-retries.ts finalAttempts).
 * @throws Error naming the candidates when a prefix is ambiguous, or saying what is missing.
 */
export function resolveSession(store: Store, q: { session?: string; task?: string; sample?: number }): string {
  if (q.session !== undefined) {
    if (store.sessions.get(q.session) || store.results.get(q.session) || store.completions.attemptCounts(q.session).length > 0) return q.session;
    const ids = new Set<string>(store.completions.listSessionIds());
    for (const t of store.tasks.list()) for (const s of store.sessions.listByTask(t.task.task_id)) ids.add(s.session_id);
    const matches = [...ids].filter((id) => id.startsWith(q.session!));
    if (matches.length === 1) return matches[0]!;
    if (matches.length === 0) throw new Error(`no session id starts with ${JSON.stringify(q.session)} (polar results --db FILE lists them)`);
    throw new Error(`session prefix ${JSON.stringify(q.session)} is ambiguous: ${matches.slice(0, 5).join(', ')}${matches.length > 5 ? `, … (${matches.length})` : ''}`);
  }
  if (q.task === undefined) throw new Error('give --session ID (or a prefix of one) or --task T --sample N');
  if (!store.tasks.get(q.task)) throw new Error(`unknown task ${JSON.stringify(q.task)} (polar results --db FILE lists them)`);
  // A sample that `polar run --max-retries` re-ran is shown by its last attempt, as the run's summary counts it; a
  // retry's own id (`<task_id>~retry<k>`) still names its sessions directly.
  // Only the rows that can fold into it are read: the task, its archived runs and the retries (any other task is not).
  const candidates = store.tasks.list().map((t) => t.task).filter((t) => t.task_id === q.task || t.task_id.startsWith(`${q.task}@run`) || typeof t.metadata?.retry_of === 'string');
  const final = finalAttempts(store, candidates.map((t) => t.task_id)).find((t) => t.task_id === q.task);
  const sessions = final ? final.samples : store.sessions.listByTask(q.task);
  const sample = q.sample ?? (sessions.length === 1 ? sessions[0]!.sample_index : undefined);
  if (sample === undefined) throw new Error(`task ${q.task} has ${sessions.length} samples: add --sample N (0..${sessions.length - 1})`);
  const hit = sessions.find((s) => s.sample_index === sample);
  if (!hit) throw new Error(`task ${q.task} has no sample ${sample} (samples: ${sessions.map((s) => s.sample_index).join(', ')})`);
  return hit.session_id;
}

const cut = (s: string, n: number) => (s.length <= n ? s : `${s.slice(0, n - 1)}…`);

/** The filter as the `polar results` flags that give it (`--task T --status S --failed`); '' for none. */
function filterFlags(filter: ResultFilter): string {
  return [
    filter.task !== undefined ? `--task ${filter.task}` : '',
    filter.status !== undefined ? `--status ${filter.status}` : '',
    filter.failed ? '--failed' : '',
  ].filter(Boolean).join(' ');
}

/**
 * The rows as a fixed-width table of at most `width` columns (default 100). A session a retry re-ran says so in its
 * error column (`retried: <its error>`; the row of the `~retry<k>` task that re-ran it follows) and is left out of the totals line, which counts each sample once.
 * @param filtered the filter the rows were selected with and how many sessions the store holds in all: when no row
 *   matched, the line says the filter matched nothing rather than that the store is empty
 */
export function formatResultTable(rows: readonly ResultRow[], width = 100, filtered?: { filter: ResultFilter; total: number }): string {
  if (rows.length === 0) {
    const flags = filtered ? filterFlags(filtered.filter) : '';
    return flags && filtered!.total > 0 ? `no sessions matched ${flags} (${filtered!.total} session(s) in this store)` : 'no sessions in this store';
  }
  const head = ['task', '#', 'session', 'status', 'reward', 'turns', 'compl', 'chains', 'train tok', 'rerend', 'time'];
  const cells = rows.map((r) => [
    cut(r.task_id ?? '—', 18), r.sample_index === null ? '—' : String(r.sample_index), r.session_id.slice(0, 10), cut(r.status, 10),
    r.reward === null ? '—' : String(Math.round(r.reward * 1000) / 1000), String(r.turns), String(r.completions),
    r.chains === null ? '—' : String(r.chains), r.trainable_tokens === null ? '—' : String(r.trainable_tokens),
    r.rerendered_joins === null ? '—' : String(r.rerendered_joins), r.duration_s === null ? '—' : `${r.duration_s.toFixed(1)}s`,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const right = new Set([1, 4, 5, 6, 7, 8, 9, 10]);
  const line = (c: string[]) => c.map((x, i) => (right.has(i) ? x.padStart(widths[i]!) : x.padEnd(widths[i]!))).join('  ');
  const used = widths.reduce((a, b) => a + b, 0) + 2 * (widths.length - 1);
  const errWidth = Math.max(12, width - used - 2);
  const out = [`${line(head)}  error`];
  rows.forEach((r, i) => {
    const note = [r.retried_by !== null ? 'retried' : '', r.error ? r.error.replace(/\s+/g, ' ') : ''].filter(Boolean).join(': ');
    out.push(`${line(cells[i]!)}  ${cut(note, errWidth)}`.trimEnd());
  });
  const counted = rows.filter((r) => r.retried_by === null);
  const n = (s: string) => counted.filter((r) => r.status === s).length;
  const evaluated = counted.filter((r) => r.reward !== null).length;
  const mean = meanReward(counted.map((r) => r.reward));
  const rerun = rows.length - counted.length;
  out.push(`${rows.length} session(s)${rerun > 0 ? `, ${rerun} re-run by a retry (counted by its last attempt)` : ''}: ${n('COMPLETED')} completed, ${n('ERROR')} error, ${n('TIMEOUT')} timeout` +
    (mean !== null ? `; mean reward ${mean.toFixed(3)} over ${evaluated} evaluated` : '; none evaluated'));
  return out.join('\n');
}
