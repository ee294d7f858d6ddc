/**
 * The summary of a `polar run`: per harness, pass@1, mean turns, completions, traces
 * and trainer tokens under both builders (rebuilt from the stored CompletionRecords), p50 stage times and the engine's
 * busy fraction. Computed from the SQLite results file only, so it can be recomputed for any finished run.
 * A sample that `--max-retries` re-ran counts once, by its last attempt (src/rollout/run-retries.ts finalAttempts).
 */
import type { BuilderName, SessionResult, SessionTiming } from '../core/records.ts';
import type { Store } from '../store/index.ts';
import { buildTrajectory, CHAIN_ROLES, type ChainRole } from '../trace/index.ts';
import { rewardOf } from '../trace/groups.ts';
import { evaluatedReward, meanPassAt1, meanReward, PASS_REWARD, scoreTask, type SampleOutcome } from '../observe/results.ts';
import { finalAttempts, type FinalTask } from '../rollout/run-retries.ts';

export { PASS_REWARD };

/** Median stage times of the finished sessions, in ms (SessionTiming fields). */
export type StageMedians = Record<'init_ms' | 'ready_queue_ms' | 'run_ms' | 'postrun_ms' | 'e2e_ms', number | null>;

/**
 * Per harness. A "session" here is a sample as the run reports it: the session of its last attempt, which stands in
 * for the sessions `--max-retries` re-ran (those count only in `retried_sessions`).
 */
export interface HarnessSummary {
  harness: string;
  tasks: number;
  /** Samples: num_samples per task, whether or not they were re-run. */
  sessions: number;
  /** Samples by the status of their last attempt (COMPLETED, ERROR, TIMEOUT, CANCELLED, or a non-final status when unfinished). */
  statuses: Record<string, number>;
  /** Sessions with status COMPLETED (their work is done; the reward may be 0). */
  completed: number;
  /**
   * Sessions whose harness CLI reported a failure in its own result event (e.g. every model call was refused), from
   * `trajectory.metadata.harness_outcome`; the gateway ends such a session as ERROR.
   */
  harness_failures: number;
  /** Finished sessions (a result that is not CANCELLED) whose harness reported no failure. */
  harness_ok: number;
  /** Up to 3 distinct harness failure reasons, for the report. */
  harness_failure_reasons: string[];
  /**
   * Mean over tasks of the fraction of that task's judged samples whose evaluated reward ≥ PASS_REWARD (the unbiased
   * pass@1 estimate c/n per task, src/observe/results.ts scoreTask, as the dashboard computes it): a sample that ended
   * without a reward counts as a failure, a cancelled or unfinished one is not judged (out of n). 0..1; null when no
   * sample of any task finished uncancelled.
   */
  pass_at_1: number | null;
  /** Mean evaluated reward over the samples that have one (src/observe/results.ts meanReward); null when none has. */
  mean_reward: number | null;
  /** Samples whose last attempt was cancelled (task cancel, early stop, run deadline): left out of pass@1 and mean reward. */
  cancelled: number;
  /**
   * Samples not finished (an interrupted `polar run` queues its running ones again; the same `--out` resumes them):
   * not judged yet, so left out of pass@1 and mean reward.
   */
  unfinished: number;
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
  /** Tokens with loss_mask 1 over the prefix_merging traces: what a trainer learns from. */
  trainable_tokens: number;
  /** prefix_merging chain breaks by reason (only reasons that occurred). */
  chain_breaks: Record<string, number>;
  /** Sessions whose prefix_merging trajectory has more than one chain. */
  split_sessions: number;
  /** Sessions `--max-retries` re-ran after an infrastructure failure (a sample re-run twice counts 2); not in `sessions`. */
  retried_sessions: number;
}

/** One task of the run, for the per-task table. */
export interface TaskSummary {
  task_id: string;
  harness: string;
  /** Reward per sample in sample order; null for a sample that was not evaluated (shown as —). */
  rewards: (number | null)[];
  /** c/n over the task's judged samples (cancelled and unfinished ones left out); null when none is judged. */
  pass_at_1: number | null;
  /** Samples whose last attempt was cancelled: not judged, so out of pass@1. */
  cancelled: number;
  /** Samples not finished (interrupted and queued again, or still running): not judged yet, so out of pass@1. */
  unfinished: number;
  mean_turns: number;
  /** prefix_merging chains over the task's sessions. */
  chains: number;
  trainable_tokens: number;
  /** Samples whose last attempt finished without completing (ERROR, TIMEOUT); not the cancelled or unfinished ones. */
  failed: number;
  /** Sessions of this task that `--max-retries` re-ran (the last attempt of each sample stands in for them). */
  retried: number;
}

export interface RunSummary {
  harnesses: HarnessSummary[];
  tasks: TaskSummary[];
  /** Engine time with ≥ 1 running sequence / wall time, 0..1 (simulator metrics); null when not measured. */
  engine_busy_fraction: number | null;
  /** Wall time of the run, ms. */
  wall_ms: number;
}

/**
 * Summarise the sessions of `taskIds` in `store`, grouped by `agent.harness` (a raw command counts as `shell`). Retry
 * rounds among `taskIds` (`<task_id>~retry<k>`) are folded into their task: one row per task, each sample counted by
 * the session of its last attempt.
 * @param opts.eotIds end-of-turn ids for prefix_merging (default: detected from the records, as the gateway does).
 */
export function summarizeRun(
  store: Store,
  taskIds: readonly string[],
  opts: { engineBusyFraction?: number | null; wallMs?: number; eotIds?: number[] } = {},
): RunSummary {
  const byHarness = new Map<string, FinalTask[]>();
  for (const task of finalAttempts(store, taskIds)) {
    const harness = store.tasks.get(task.task_id)?.task.agent.harness ?? 'shell';
    const list = byHarness.get(harness);
    if (list) list.push(task);
    else byHarness.set(harness, [task]);
  }
  const tasks: TaskSummary[] = [];
  const harnesses = [...byHarness.entries()].map(([harness, folded]) => summarizeHarness(store, harness, folded, opts.eotIds, tasks));
  return { harnesses, tasks, engine_busy_fraction: opts.engineBusyFraction ?? null, wall_ms: opts.wallMs ?? 0 };
}

function summarizeHarness(store: Store, harness: string, folded: FinalTask[], eotIds: number[] | undefined, taskRows: TaskSummary[]): HarnessSummary {
  const statuses: Record<string, number> = {};
  const traces: Record<BuilderName, number> = { per_request: 0, prefix_merging: 0 };
  const trainerTokens: Record<BuilderName, number> = { per_request: 0, prefix_merging: 0 };
  const timings: SessionTiming[] = [];
  let sessions = 0;
  let completions = 0;
  const evaluated: (number | null)[] = [];
  const passRates: (number | null)[] = [];
  let cancelled = 0;
  let unfinished = 0;
  let variance = 0;
  let harnessFailures = 0;
  let harnessOk = 0;
  let rerenderMismatches = 0;
  let trainable = 0;
  let splitSessions = 0;
  const chainBreaks: Record<string, number> = {};
  const chainRoles: Record<ChainRole, number> = { main: 0, side: 0, retry: 0, compaction: 0 };
  let oneMain = 0;
  let retried = 0;
  const failureReasons = new Set<string>();
  for (const { task_id: taskId, samples } of folded) {
    const rewards: number[] = [];
    const outcomes: SampleOutcome[] = [];
    const task: TaskSummary = { task_id: taskId, harness, rewards: [], pass_at_1: null, cancelled: 0, unfinished: 0, mean_turns: 0, chains: 0, trainable_tokens: 0, failed: 0, retried: 0 };
    let taskTurns = 0;
    for (const s of samples) {
      sessions++;
      task.retried += s.replaced.length;
      const result = store.results.get(s.session_id);
      const status = result?.status ?? store.sessions.get(s.session_id)?.status ?? 'REGISTERED';
      statuses[status] = (statuses[status] ?? 0) + 1;
      // pass@1 and mean reward take the evaluated reward (none for a cancelled, failed or unfinished sample), as the
      // dashboard and `polar results` do; the reward-variance count keeps 0 for those, as a GRPO group would.
      const scored = result ? evaluatedReward(result) : null;
      task.rewards.push(scored);
      outcomes.push({ status, reward: scored });
      evaluated.push(scored);
      if (status === 'ERROR' || status === 'TIMEOUT') task.failed++;
      rewards.push(result && result.status === 'COMPLETED' ? rewardOf(result) : 0);
      if (result) timings.push(result.timing);
      const outcome = result?.trajectory.metadata.harness_outcome as { success?: unknown; reason?: unknown } | null | undefined;
      if (outcome && outcome.success === false) {
        harnessFailures++;
        if (failureReasons.size < 3) failureReasons.add(String(outcome.reason ?? 'unknown').slice(0, 200));
      } else if (result && result.status !== 'CANCELLED') harnessOk++;
      const records = store.completions.listBySession(s.session_id);
      completions += records.length;
      taskTurns += records.length;
      for (const strategy of ['per_request', 'prefix_merging'] as const) {
        const built = buildTrajectory(records, {
          strategy, eotIds, session_id: s.session_id, task_id: s.session_task_id, harness, status: trajectoryStatus(result),
        });
        traces[strategy] += built.traces.length;
        if (strategy === 'prefix_merging') {
          const stats = built.metadata.reconstruction_stats;
          rerenderMismatches += stats.rerender_mismatches ?? 0;
          for (const [reason, n] of Object.entries(stats.breaks)) if (n > 0) chainBreaks[reason] = (chainBreaks[reason] ?? 0) + n;
          if (built.traces.length > 1) splitSessions++;
          task.chains += built.traces.length;
          for (const t of built.traces) for (const m of t.loss_mask) task.trainable_tokens += m;
          for (const role of CHAIN_ROLES) chainRoles[role] += stats.chain_roles?.[role] ?? 0;
          if (stats.chain_roles?.main === 1) oneMain++;
        }
        for (const t of built.traces) trainerTokens[strategy] += t.prompt_ids.length + t.response_ids.length;
      }
    }
    const score = scoreTask(outcomes);
    task.pass_at_1 = score.pass_at_1;
    task.cancelled = score.cancelled;
    task.unfinished = score.unfinished;
    cancelled += score.cancelled;
    unfinished += score.unfinished;
    passRates.push(score.pass_at_1);
    task.mean_turns = samples.length > 0 ? taskTurns / samples.length : 0;
    trainable += task.trainable_tokens;
    retried += task.retried;
    taskRows.push(task);
    if (rewards.some((r) => r !== rewards[0])) variance++;
  }
  const median = (key: Exclude<keyof SessionTiming, 'init_queue_ms'>) => p50(timings.map((t) => t[key]));
  return {
    harness,
    tasks: folded.length,
    sessions,
    statuses,
    completed: statuses.COMPLETED ?? 0,
    harness_failures: harnessFailures,
    harness_ok: harnessOk,
    harness_failure_reasons: [...failureReasons],
    pass_at_1: meanPassAt1(passRates),
    mean_reward: meanReward(evaluated),
    cancelled,
    unfinished,
    mean_turns: sessions > 0 ? completions / sessions : 0,
    completions,
    traces,
    trainer_tokens: trainerTokens,
    rerender_mismatches: rerenderMismatches,
    chain_roles: chainRoles,
    sessions_with_one_main_chain: oneMain,
    groups_with_reward_variance: variance,
    trainable_tokens: trainable,
    chain_breaks: chainBreaks,
    split_sessions: splitSessions,
    retried_sessions: retried,
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

/** Longest line of the summary: it fits a 100-column terminal. */
export const SUMMARY_WIDTH = 100;

const cut = (s: string, n: number) => (s.length <= n ? s : `${s.slice(0, n - 1)}…`);

/** Fixed-width columns: the first left-aligned, the rest right-aligned, two spaces apart. */
function columns(header: string[], rows: string[][]): string[] {
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ').trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)];
}

/** Words of `text` wrapped to `width` columns, continuation lines indented by `indent` spaces. */
function wrap(text: string, width = SUMMARY_WIDTH, indent = 2): string[] {
  const out: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line.trim() !== '' && line.length + 1 + word.length > width) {
      out.push(line);
      line = ' '.repeat(indent) + word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') out.push(line);
  return out.map((l) => l.trimEnd());
}

/**
 * The warning printed when sessions split into several chains or joins were re-rendered, with the likely cause and
 * the option that fixes it; null when neither happened.
 */
export function chainWarning(summary: RunSummary): string | null {
  const sessions = summary.harnesses.reduce((n, h) => n + h.sessions, 0);
  const split = summary.harnesses.reduce((n, h) => n + h.split_sessions, 0);
  const rerendered = summary.harnesses.reduce((n, h) => n + h.rerender_mismatches, 0);
  if (split === 0 && rerendered === 0) return null;
  const breaks: Record<string, number> = {};
  for (const h of summary.harnesses) for (const [k, v] of Object.entries(h.chain_breaks)) breaks[k] = (breaks[k] ?? 0) + v;
  const parts: string[] = [];
  if (split > 0) parts.push(`${split} of ${sessions} session(s) split into more than one chain (${Object.entries(breaks).map(([k, v]) => `${k} ${v}`).join(', ')})`);
  if (rerendered > 0) parts.push(`${rerendered} join(s) re-rendered (the next prompt did not hold the sampled tokens)`);
  const cause = breaks.dropped_message && !breaks.prefix_break
    ? 'cause: the harness ends each request with a user message that its next request drops (OpenClaw\'s runtime context: ' +
      'the openclaw adapter denies the process and sessions_spawn tools by default, which removes it; agent.settings.tools_deny)'
    : breaks.history_changed && !breaks.prefix_break
    ? 'cause: the harness changed assistant turns it had received (edited or added to them); token mode starts a new chain there ' +
      'instead of training on a context the engine never saw'
    : breaks.prefix_break
    ? 'likely cause: the chat template moves mid-conversation system messages (Claude Code sends them) or rewrites earlier turns; ' +
      'fix: --system-messages in-place (config engine.system_messages: in_place) when the template renders them where they are, or --mode token'
    : 'likely cause: the chat template re-renders earlier answers (reasoning dropped, tool JSON re-serialised); fix: --mode token, where the proxy keeps the sampled tokens';
  return `warning: ${parts.join('; ')}. ${cause}`;
}

/**
 * The summary as text of at most {@link SUMMARY_WIDTH} columns: one row per harness, per-harness builder and stage
 * lines, one row per task (rewards per sample; — for a sample that was not evaluated), a line on sessions
 * `--max-retries` re-ran when there were any, lines on cancelled and on unfinished samples (left out of pass@1) when there were any, the chain warning when chains broke or joins were re-rendered, and the
 * engine line.
 */
export function formatSummaryTable(summary: RunSummary): string {
  const ms = (v: number | null) => (v === null ? '-' : v >= 10_000 ? `${(v / 1000).toFixed(0)}s` : v >= 1000 ? `${(v / 1000).toFixed(1)}s` : `${Math.round(v)}ms`);
  const out = columns(
    ['harness', 'sessions', 'completed', 'harness ok', 'pass@1', 'turns', 'chains/s', 'trainable', 're-rend', 'p50 e2e'],
    summary.harnesses.map((h) => [
      cut(h.harness, 14), String(h.sessions), String(h.completed), String(h.harness_ok), h.pass_at_1 === null ? '-' : h.pass_at_1.toFixed(3),
      h.mean_turns.toFixed(2), (h.sessions > 0 ? h.traces.prefix_merging / h.sessions : 0).toFixed(2), String(h.trainable_tokens),
      String(h.rerender_mismatches), ms(h.p50.e2e_ms),
    ]),
  );
  for (const h of summary.harnesses) {
    out.push(...wrap(`${h.harness}: traces per_request ${h.traces.per_request} / prefix_merging ${h.traces.prefix_merging}; trainer tokens ${h.trainer_tokens.per_request} / ${h.trainer_tokens.prefix_merging}; main chains ${h.chain_roles.main} (${h.sessions_with_one_main_chain}/${h.sessions} one), side/retry/compact ${h.chain_roles.side}/${h.chain_roles.retry}/${h.chain_roles.compaction}; p50 init ${ms(h.p50.init_ms)}, run ${ms(h.p50.run_ms)}, postrun ${ms(h.p50.postrun_ms)}`));
  }
  for (const h of summary.harnesses) for (const reason of h.harness_failure_reasons) out.push(...wrap(`${h.harness}: harness failure: ${reason.replace(/\s+/g, ' ')}`));
  if (summary.tasks.length > 0) {
    out.push('');
    const reward = (r: number | null) => (r === null ? '—' : String(Math.round(r * 100) / 100));
    out.push(...columns(
      ['task', 'rewards', 'pass@1', 'turns', 'chains', 'trainable', 'failed'],
      summary.tasks.map((t) => [cut(t.task_id, 28), cut(t.rewards.map(reward).join(' '), 30), t.pass_at_1 === null ? '-' : t.pass_at_1.toFixed(2), t.mean_turns.toFixed(1), String(t.chains), String(t.trainable_tokens), String(t.failed)]),
    ));
  }
  // "task-a 2, task-b 1" for the tasks with a nonzero count, at most five named.
  const perTask = (count: (t: TaskSummary) => number) => {
    const tasks = summary.tasks.filter((t) => count(t) > 0).map((t) => `${t.task_id} ${count(t)}`);
    return tasks.length > 5 ? `${tasks.slice(0, 5).join(', ')}, … ${tasks.length} tasks` : tasks.join(', ');
  };
  const retried = summary.harnesses.reduce((n, h) => n + h.retried_sessions, 0);
  if (retried > 0) {
    out.push('', ...wrap(`retried: ${retried} session(s) re-run after infrastructure failures; each sample counts by its last attempt (${perTask((t) => t.retried)})`));
  }
  const cancelled = summary.harnesses.reduce((n, h) => n + h.cancelled, 0);
  if (cancelled > 0) {
    out.push('', ...wrap(`cancelled: ${cancelled} sample(s) cancelled (task cancel, early stop or run deadline) were not judged: left out of pass@1 and mean reward (${perTask((t) => t.cancelled)})`));
  }
  const unfinished = summary.harnesses.reduce((n, h) => n + h.unfinished, 0);
  if (unfinished > 0) {
    out.push('', ...wrap(`unfinished: ${unfinished} sample(s) did not finish (an interrupted run queues them again; the same --out resumes them): not judged yet, left out of pass@1 and mean reward (${perTask((t) => t.unfinished)})`));
  }
  const warning = chainWarning(summary);
  if (warning) out.push('', ...wrap(warning));
  const busy = summary.engine_busy_fraction === null ? 'not measured (external engine)' : `${(summary.engine_busy_fraction * 100).toFixed(1)}%`;
  out.push('', `engine busy fraction: ${busy}; wall time ${ms(summary.wall_ms)}`);
  out.push(`pass@1: fraction of a task's finished, uncancelled samples with reward ≥ ${PASS_REWARD} (per harness: mean)`);
  out.push('trainable: loss_mask 1 tokens; trainer tokens: prompt + response tokens (per_request / prefix)');
  out.push('chains/s: prefix_merging chains per session (1: no break); re-rend: re-rendered joins');
  out.push('main chains: the agent conversation (one per session when unsplit); side/retry/compact by role');
  return out.join('\n');
}
