/**
 * The live dashboard's data (served as JSON at `GET /dashboard/state` and `GET /dashboard/session/{id}` of the rollout
 * server; the page is ./page.html): tasks with progress and rewards, nodes with their stages and health, the engine's
 * health and busy fraction, reward and pass@1 per policy_version over time, and recent errors with their reasons.
 * Built from the rollout store on each call; pure apart from reading the `DashboardSource`. A task's `polar run
 * --max-retries` retries (`<task_id>~retry<k>`) are folded into it as `polar run`'s summary and `polar trace show
 * --task` fold them (src/rollout/run-retries.ts finalAttempts): one row per task, each sample by its last attempt.
 */
import type { SessionResult, TaskRequest } from '../../core/records.ts';
import { finalAttempts, type AttemptSource } from '../../rollout/run-retries.ts';
import { isUsable, sampledPolicyVersions } from '../../trace/groups.ts';
import { evaluatedReward, meanPassAt1, meanReward, PASS_REWARD, scoreTask } from '../results.ts';

export { PASS_REWARD };
/** Tasks listed in the snapshot (most recent first; a retry folded into its task is not one of them). */
export const MAX_TASKS = 50;
/** Errors listed in the snapshot (most recent first). */
export const MAX_ERRORS = 20;

interface TaskLike { task: TaskRequest; status: string; created_at: number; updated_at: number }
interface SessionLike { session_id: string; task_id: string; sample_index: number; status: string; node_id: string | null; attempt: number; error: string | null; created_at: number; updated_at: number }
interface NodeLike { node_id: string; url: string; healthy: boolean; draining: boolean; stages: Record<string, number>; capacity: Record<string, number>; heartbeat_age_ms?: number; in_flight?: number }

/** What the dashboard reads: the rollout server's store and node registry (src/rollout/server.ts). */
export interface DashboardSource {
  tasks(): TaskLike[];
  sessions(taskId: string): SessionLike[];
  results(taskId: string): SessionResult[];
  result(sessionId: string): SessionResult | null;
  session(sessionId: string): SessionLike | null;
  nodes(): NodeLike[];
  /** Sessions the server holds that no node has yet (REGISTERED: waiting for a free slot or a healthy node). */
  undispatched?(): number;
  /** The server's `/health` extras (e.g. `engine: {ok, error}`). */
  health(): Record<string, unknown>;
  /** A node's own `/health` document (stages, engine health, engine busy fraction), or null when unreachable. */
  nodeHealth?(node: NodeLike): Promise<Record<string, unknown> | null>;
}

export interface DashboardTask {
  task_id: string;
  status: string;
  harness: string;
  num_samples: number;
  /** Samples whose last attempt has a result. */
  finished: number;
  /** Samples by the status of their last attempt (RUNNING, COMPLETED, …). */
  sessions: Record<string, number>;
  /** Rewards of finished samples in sample order (null: not evaluated). */
  rewards: (number | null)[];
  /**
   * One session per sample, in sample order: the sample's last attempt (a retry's session when `polar run
   * --max-retries` re-ran it; `sample_index` is then the task's, not the retry's). `reward` null until evaluated (or
   * when it never was).
   */
  session_list: { session_id: string; sample_index: number; status: string; node_id: string | null; finished: boolean; reward: number | null }[];
  mean_reward: number | null;
  /**
   * Passing samples (reward ≥ PASS_REWARD) over the task's samples less the cancelled ones; null before any result, or
   * when every sample was cancelled.
   */
  pass_at_1: number | null;
  /** The group's policy_version: the one version its usable sessions were sampled at, else the declared one. */
  policy_version: string | null;
  /** Sessions that `polar run --max-retries` retries re-ran (their retries' sessions stand in for them); 0 without. */
  retried: number;
  created_at: number;
  /** The latest update of the task and its retries. */
  updated_at: number;
}

export interface DashboardState {
  at: number;
  tasks: DashboardTask[];
  /** Sessions on the server waiting for a node (REGISTERED), over every task; node queues are in `nodes[].stages`. */
  undispatched: number;
  /** Task counts by status over every task in the store. */
  task_counts: Record<string, number>;
  nodes: (NodeLike & { health: Record<string, unknown> | null })[];
  engine: Record<string, unknown> | null;
  /** Per policy_version, in order of first appearance: finished tasks, mean reward, pass@1, first and last finish time. */
  policies: { policy_version: string; tasks: number; sessions: number; mean_reward: number; pass_at_1: number; first_at: number; last_at: number }[];
  errors: { at: number; task_id: string; session_id: string; sample_index: number; status: string; node_id: string | null; error: string }[];
}

/** A finished session's reward; null when it was never evaluated (skipped, cancelled): shown as —, not a 0. */
const rewardOf = evaluatedReward;


/** The snapshot the page renders. `now` in Unix ms. */
export async function dashboardState(src: DashboardSource, now: number): Promise<DashboardState> {
  const all = src.tasks().sort((a, b) => b.created_at - a.created_at);
  const task_counts: Record<string, number> = {};
  for (const t of all) task_counts[t.status] = (task_counts[t.status] ?? 0) + 1;
  const tasks: DashboardTask[] = [];
  const errors: DashboardState['errors'] = [];
  const byPolicy = new Map<string, { tasks: number; rewards: number[]; passes: number[]; first_at: number; last_at: number }>();
  for (const folded of foldRetries(src, all)) {
    const row = folded.row;
    const taskId = row.task.task_id;
    const results = new Map(folded.members.flatMap((id) => src.results(id)).map((r) => [r.session_id, r]));
    const sessionById = new Map(folded.members.flatMap((id) => folded.sessions(id)).map((s) => [s.session_id, s]));
    // Every attempt's error is listed (a re-run attempt's infrastructure error happened), under its own task and sample.
    for (const s of sessionById.values()) {
      const error = s.error ?? results.get(s.session_id)?.error ?? null;
      if (error !== null) errors.push({ at: s.updated_at, task_id: s.task_id, session_id: s.session_id, sample_index: s.sample_index, status: s.status, node_id: s.node_id, error });
    }
    const samples = folded.samples.flatMap((f) => {
      const s = sessionById.get(f.session_id);
      return s ? [{ ...s, sample_index: f.sample_index }] : [];
    });
    const counts: Record<string, number> = {};
    for (const s of samples) counts[s.status] = (counts[s.status] ?? 0) + 1;
    const rewards: (number | null)[] = [];
    const finals: SessionResult[] = [];
    const session_list: DashboardTask['session_list'] = [];
    for (const s of samples) {
      const r = results.get(s.session_id);
      if (r) {
        rewards.push(rewardOf(r));
        finals.push(r);
      }
      session_list.push({ session_id: s.session_id, sample_index: s.sample_index, status: s.status, node_id: s.node_id, finished: r !== undefined, reward: r ? rewardOf(r) : null });
    }
    const scored = rewards.filter((x): x is number => x !== null);
    // pass@1 by the rule `polar run`'s summary uses (scoreTask): c/n over the finished samples, one that ended without
    // a reward (ERROR, TIMEOUT) a failure; a cancelled one (task cancel, early stop, run deadline) and one still
    // queued or running are out of n.
    const outcomes = samples.map((s) => {
      const r = results.get(s.session_id);
      return { status: s.status === 'CANCELLED' || r?.status === 'CANCELLED' ? 'CANCELLED' : (r?.status ?? s.status), reward: r ? rewardOf(r) : null };
    });
    const passAt1 = finals.length === 0 ? null : scoreTask(outcomes, Math.max(row.task.num_samples, finals.length)).pass_at_1;
    // The group's rule (src/trace/groups.ts buildGroup): the one version its usable sessions were sampled at, else the
    // task's declared one; so tasks sampled after a weight sync chart under the version set by that sync.
    const sampled = sampledPolicyVersions(finals.filter(isUsable));
    const policy = sampled.length === 1 ? sampled[0]! : (row.task.metadata?.policy_version ?? null);
    const status = folded.status(finals);
    tasks.push({
      task_id: taskId, status, harness: row.task.agent.harness ?? 'shell', num_samples: row.task.num_samples,
      finished: finals.length, sessions: counts, rewards, session_list, mean_reward: meanReward(scored), pass_at_1: passAt1,
      policy_version: policy === null ? null : String(policy), retried: folded.samples.reduce((n, f) => n + f.replaced.length, 0),
      created_at: row.created_at, updated_at: folded.updated_at,
    });
    // Finished tasks: COMPLETED, or FAILED when no session was usable (src/rollout/task-results.ts); both count here.
    if ((status === 'COMPLETED' || status === 'FAILED') && passAt1 !== null) {
      const key = policy === null ? 'none' : String(policy);
      const p = byPolicy.get(key) ?? { tasks: 0, rewards: [], passes: [], first_at: folded.updated_at, last_at: folded.updated_at };
      p.tasks++;
      p.rewards.push(...scored);
      p.passes.push(passAt1);
      p.first_at = Math.min(p.first_at, folded.updated_at);
      p.last_at = Math.max(p.last_at, folded.updated_at);
      byPolicy.set(key, p);
    }
  }
  const policies = [...byPolicy.entries()]
    .map(([policy_version, p]) => ({ policy_version, tasks: p.tasks, sessions: p.rewards.length, mean_reward: meanReward(p.rewards) ?? 0, pass_at_1: meanPassAt1(p.passes) ?? 0, first_at: p.first_at, last_at: p.last_at }))
    .sort((a, b) => a.first_at - b.first_at);
  const nodes = await Promise.all(src.nodes().map(async (n) => ({ ...n, health: src.nodeHealth ? await src.nodeHealth(n).catch(() => null) : null })));
  const extras = src.health();
  const engine = (extras.engine as Record<string, unknown> | undefined) ?? (nodes.find((n) => n.health?.engine)?.health?.engine as Record<string, unknown> | undefined) ?? null;
  errors.sort((a, b) => b.at - a.at);
  return { at: now, tasks, task_counts, undispatched: src.undispatched?.() ?? 0, nodes, engine, policies, errors: errors.slice(0, MAX_ERRORS) };
}

/** A listed task with its retries folded in ({@link foldRetries}). */
interface FoldedTask {
  /** The task's row (a retry that folded into no task is a task of its own). */
  row: TaskLike;
  /** The task and the retries whose sessions stand in for some of its samples. */
  members: string[];
  /** Per sample, in order, the session of its last attempt and the sessions that attempt replaced. */
  samples: { sample_index: number; session_id: string; replaced: string[] }[];
  /** The sessions of a member. */
  sessions(taskId: string): SessionLike[];
  /** The latest updated_at over the members. */
  updated_at: number;
  /**
   * The status the row shows: RUNNING while a member runs; once all have ended, a task that finished (COMPLETED or
   * FAILED) is COMPLETED when a last attempt is usable (src/trace/groups.ts isUsable, as the rollout server decides it)
   * and FAILED otherwise; any other status (e.g. CANCELLED) is the task's own.
   */
  status(finals: readonly SessionResult[]): string;
}

/**
 * The MAX_TASKS most recent tasks of `all` (newest first) with their `polar run --max-retries` retries folded in, as
 * finalAttempts folds them. Only retries created no earlier than the oldest task listed are read (a retry is created
 * after the task it re-runs); one that folds into no listed task is listed as a task of its own.
 */
function foldRetries(src: DashboardSource, all: readonly TaskLike[]): FoldedTask[] {
  const isRetry = (t: TaskLike) => typeof t.task.metadata?.retry_of === 'string';
  const heads = all.filter((t) => !isRetry(t)).slice(0, MAX_TASKS);
  const oldest = heads.length === MAX_TASKS ? heads.at(-1)!.created_at : -Infinity;
  const retries = all.filter((t) => isRetry(t) && t.created_at >= oldest);
  const byId = new Map(all.map((t) => [t.task.task_id, t]));
  const cache = new Map<string, SessionLike[]>();
  const sessions = (taskId: string) => {
    let list = cache.get(taskId);
    if (!list) cache.set(taskId, (list = src.sessions(taskId)));
    return list;
  };
  const attempts: AttemptSource = {
    tasks: { get: (id) => byId.get(id) ?? null },
    sessions: { listByTask: sessions },
    results: { get: (id) => src.result(id) },
  };
  return finalAttempts(attempts, [...heads, ...retries].map((t) => t.task.task_id))
    .map((final): FoldedTask => {
      const row = byId.get(final.task_id)!;
      const members = [final.task_id, ...new Set(final.samples.map((s) => s.session_task_id).filter((id) => id !== final.task_id))];
      const rows = members.map((id) => byId.get(id)!);
      return {
        row, members, sessions,
        samples: final.samples.map((s) => ({ sample_index: s.sample_index, session_id: s.session_id, replaced: s.replaced })),
        updated_at: Math.max(...rows.map((r) => r.updated_at)),
        status: (finals) => {
          if (members.length === 1 || row.status === 'RUNNING') return row.status;
          if (rows.some((r) => r.status === 'RUNNING')) return 'RUNNING';
          if (row.status !== 'COMPLETED' && row.status !== 'FAILED') return row.status;
          return finals.some(isUsable) ? 'COMPLETED' : 'FAILED';
        },
      };
    })
    .sort((a, b) => b.row.created_at - a.row.created_at)
    .slice(0, MAX_TASKS);
}

/** One session for the session page: its row, result (trajectory with traces) and the token view of each trace. */
export function sessionView(src: DashboardSource, sessionId: string) {
  const result = src.result(sessionId);
  const row = src.session(sessionId);
  if (!row && !result) return null;
  return { session: row, result, reward: result ? rewardOf(result) : null };
}
