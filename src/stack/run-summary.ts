/**
 * The summary of a `polar run`: per harness, pass@1, mean turns, completions, traces
 * and trainer tokens under both builders (rebuilt from the stored CompletionRecords), p50 stage times and the engine's
 * busy fraction. Computed from the SQLite results file only, so it can be recomputed for any finished run.
 */
import type { BuilderName, SessionResult, SessionTiming } from '../core/records.ts';
import type { Store } from '../store/index.ts';
import { buildTrajectory, CHAIN_ROLES, type ChainRole } from '../trace/index.ts';
import { rewardOf } from '../trace/groups.ts';

/** A reward at or above this counts as a pass (test_on_output and session_completed give 0 or 1). */
export const PASS_REWARD = 1;

/** Median stage times of the finished sessions, in ms (SessionTiming fields). */
export type StageMedians = Record<'init_ms' | 'ready_queue_ms' | 'run_ms' | 'postrun_ms' | 'e2e_ms', number | null>;

export interface HarnessSummary {
  harness: string;
  tasks: number;
  sessions: number;
  /** Sessions by final status (COMPLETED, ERROR, TIMEOUT, CANCELLED, or a non-final status when unfinished). */
  statuses: Record<string, number>;
  /** Sessions with status COMPLETED (their work is done; the reward may be 0). */
  completed: number;
  /**
   * Sessions whose harness CLI reported a failure in its own result event (e.g. every model call was refused), from
   * `trajectory.metadata.harness_outcome`; the gateway ends such a session as ERROR.
   */
  harness_failures: number;
  /** Up to 3 distinct harness failure reasons, for the report. */
  harness_failure_reasons: string[];
  /**
   * Mean over tasks of the fraction of that task's samples whose reward ≥ PASS_REWARD (the unbiased pass@1 estimate
   * c/n per task); a session that did not complete counts as a failure. 0..1.
   */
  pass_at_1: number;
  /** Mean outcome reward over every session (unfinished = 0). */
  mean_reward: number;
  /** Mean model calls (CompletionRecords) per session. */
  mean_turns: number;
  /** CompletionRecords of these sessions. */
  completions: number;
  /** Traces the builders produce from the records. */
  traces: Record<BuilderName, number>;
  /**
   * Trainer tokens: the tokens a trainer must process, Σ over traces of len(prompt_ids) + len(response_ids).
   * prefix_merging shares one prompt per chain, so it processes fewer than per_request on multi-turn sessions.
   */
  trainer_tokens: Record<BuilderName, number>;
  /**
   * prefix_merging joins where the engine's next prompt held a re-rendered version of the sampled answer (chat mode:
   * reasoning dropped, tool JSON re-serialised): the engine was conditioned on tokens other than the trained ones.
   * 0 in token mode.
   */
  rerender_mismatches: number;
  /**
   * prefix_merging chains by role (src/trace/roles.ts): `main` (the agent conversation; 1 per session when it never
   * split), `side`, `retry`, `compaction`, counted before builder.config drops any.
   */
  chain_roles: Record<ChainRole, number>;
  /** Sessions whose prefix_merging build has exactly one main chain. */
  sessions_with_one_main_chain: number;
  /** Groups (tasks) whose rewards are not all equal: the ones GRPO learns from. */
  groups_with_reward_variance: number;
  p50: StageMedians;
}

export interface RunSummary {
  harnesses: HarnessSummary[];
  /** Engine time with ≥ 1 running sequence / wall time, 0..1 (simulator metrics); null when not measured. */
  engine_busy_fraction: number | null;
  /** Wall time of the run, ms. */
  wall_ms: number;
}

/**
 * Summarise the sessions of `taskIds` in `store`, grouped by `agent.harness` (a raw command counts as `shell`).
 * @param opts.eotIds end-of-turn ids for prefix_merging (default: detected from the records, as the gateway does).
 */
export function summarizeRun(
  store: Store,
  taskIds: readonly string[],
  opts: { engineBusyFraction?: number | null; wallMs?: number; eotIds?: number[] } = {},
): RunSummary {
  const byHarness = new Map<string, { taskIds: string[] }>();
  for (const taskId of taskIds) {
    const row = store.tasks.get(taskId);
    if (!row) continue;
    const harness = row.task.agent.harness ?? 'shell';
    const entry = byHarness.get(harness) ?? { taskIds: [] };
    entry.taskIds.push(taskId);
    byHarness.set(harness, entry);
  }
  const harnesses = [...byHarness.entries()].map(([harness, { taskIds: ids }]) => summarizeHarness(store, harness, ids, opts.eotIds));
  return { harnesses, engine_busy_fraction: opts.engineBusyFraction ?? null, wall_ms: opts.wallMs ?? 0 };
}

function summarizeHarness(store: Store, harness: string, taskIds: string[], eotIds: number[] | undefined): HarnessSummary {
  const statuses: Record<string, number> = {};
  const traces: Record<BuilderName, number> = { per_request: 0, prefix_merging: 0 };
  const trainerTokens: Record<BuilderName, number> = { per_request: 0, prefix_merging: 0 };
  const timings: SessionTiming[] = [];
  let sessions = 0;
  let completions = 0;
  let rewardSum = 0;
  let passRateSum = 0;
  let variance = 0;
  let harnessFailures = 0;
  let rerenderMismatches = 0;
  const chainRoles: Record<ChainRole, number> = { main: 0, side: 0, retry: 0, compaction: 0 };
  let oneMain = 0;
  const failureReasons = new Set<string>();
  for (const taskId of taskIds) {
    const rows = store.sessions.listByTask(taskId);
    const results = new Map(store.results.listByTask(taskId).map((r) => [r.session_id, r]));
    let passes = 0;
    const rewards: number[] = [];
    for (const s of rows) {
      sessions++;
      const result = results.get(s.session_id) ?? null;
      const status = result?.status ?? s.status;
      statuses[status] = (statuses[status] ?? 0) + 1;
      const reward = result && result.status === 'COMPLETED' ? rewardOf(result) : 0;
      rewards.push(reward);
      rewardSum += reward;
      if (reward >= PASS_REWARD) passes++;
      if (result) timings.push(result.timing);
      const outcome = result?.trajectory.metadata.harness_outcome as { success?: unknown; reason?: unknown } | null | undefined;
      if (outcome && outcome.success === false) {
        harnessFailures++;
        if (failureReasons.size < 3) failureReasons.add(String(outcome.reason ?? 'unknown').slice(0, 200));
      }
      const records = store.completions.listBySession(s.session_id);
      completions += records.length;
      for (const strategy of ['per_request', 'prefix_merging'] as const) {
        const built = buildTrajectory(records, {
          strategy, eotIds, session_id: s.session_id, task_id: taskId, harness, status: trajectoryStatus(result),
        });
        traces[strategy] += built.traces.length;
        if (strategy === 'prefix_merging') {
          const stats = built.metadata.reconstruction_stats;
          rerenderMismatches += stats.rerender_mismatches ?? 0;
          for (const role of CHAIN_ROLES) chainRoles[role] += stats.chain_roles?.[role] ?? 0;
          if (stats.chain_roles?.main === 1) oneMain++;
        }
        for (const t of built.traces) trainerTokens[strategy] += t.prompt_ids.length + t.response_ids.length;
      }
    }
    if (rows.length > 0) passRateSum += passes / rows.length;
    if (rewards.some((r) => r !== rewards[0])) variance++;
  }
  const median = (key: keyof SessionTiming) => p50(timings.map((t) => t[key]));
  return {
    harness,
    tasks: taskIds.length,
    sessions,
    statuses,
    completed: statuses.COMPLETED ?? 0,
    harness_failures: harnessFailures,
    harness_failure_reasons: [...failureReasons],
    pass_at_1: taskIds.length > 0 ? passRateSum / taskIds.length : 0,
    mean_reward: sessions > 0 ? rewardSum / sessions : 0,
    mean_turns: sessions > 0 ? completions / sessions : 0,
    completions,
    traces,
    trainer_tokens: trainerTokens,
    rerender_mismatches: rerenderMismatches,
    chain_roles: chainRoles,
    sessions_with_one_main_chain: oneMain,
    groups_with_reward_variance: variance,
    p50: { init_ms: median('init_ms'), ready_queue_ms: median('ready_queue_ms'), run_ms: median('run_ms'), postrun_ms: median('postrun_ms'), e2e_ms: median('e2e_ms') },
  };
}

function trajectoryStatus(result: SessionResult | null): 'COMPLETED' | 'TIMEOUT' | 'ERROR' {
  return result === null || result.status === 'CANCELLED' ? 'ERROR' : result.status;
}

/** The median (mean of the middle two for an even count); null for no values. */
export function p50(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The summary as a fixed-width text table (one row per harness) plus the engine line. */
export function formatSummaryTable(summary: RunSummary): string {
  const header = ['harness', 'sessions', 'completed', 'harness ok', 'pass@1', 'mean turns', 'completions', 'traces per_req', 'traces prefix', 'tokens per_req', 'tokens prefix', 'main chains', 'side/retry/compact', 're-rendered', 'p50 init', 'p50 run', 'p50 postrun', 'p50 e2e'];
  const ms = (v: number | null) => (v === null ? '-' : v >= 10_000 ? `${(v / 1000).toFixed(0)}s` : v >= 1000 ? `${(v / 1000).toFixed(1)}s` : `${Math.round(v)}ms`);
  const rows = summary.harnesses.map((h) => [
    h.harness,
    String(h.sessions),
    String(h.completed),
    String(h.sessions - h.harness_failures),
    h.pass_at_1.toFixed(3),
    h.mean_turns.toFixed(2),
    String(h.completions),
    String(h.traces.per_request),
    String(h.traces.prefix_merging),
    String(h.trainer_tokens.per_request),
    String(h.trainer_tokens.prefix_merging),
    `${h.chain_roles.main} (${h.sessions_with_one_main_chain}/${h.sessions} one)`,
    `${h.chain_roles.side}/${h.chain_roles.retry}/${h.chain_roles.compaction}`,
    String(h.rerender_mismatches),
    ms(h.p50.init_ms),
    ms(h.p50.run_ms),
    ms(h.p50.postrun_ms),
    ms(h.p50.e2e_ms),
  ]);
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const out = [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)];
  const busy = summary.engine_busy_fraction === null ? 'not measured (external engine)' : `${(summary.engine_busy_fraction * 100).toFixed(1)}%`;
  for (const h of summary.harnesses) for (const reason of h.harness_failure_reasons) out.push(`${h.harness}: harness failure: ${reason}`);
  out.push('', `engine busy fraction: ${busy}; wall time ${ms(summary.wall_ms)}`);
  out.push('trainer tokens = Σ over traces of len(prompt_ids) + len(response_ids): what a trainer processes per builder');
  out.push('main chains = prefix_merging chains of the agent conversation (one per session when it never split); side/retry/compact = other chains by role');
  out.push('re-rendered = prefix_merging joins whose next prompt held a re-rendered version of the sampled answer (chat mode only)');
  return out.join('\n');
}
