/**
 * What `polar run` writes beyond results.db and summary.json: `--accept EXPR` (the traces of accepted sessions as
 * JSONL, in `polar export`'s row shape, for offline generation / rejection sampling) and the summary per dataset split
 * (`metadata.split` of each task, src/rollout/datasets.ts).
 */
import type { ExportRow } from '../rollout/export.ts';
import { exportTraces, writeJsonl } from '../rollout/export.ts';
import type { Store } from '../store/index.ts';
import { meanPassAt1, meanReward } from '../observe/results.ts';
import { summarizeRun } from './run-summary.ts';

const OPS = ['>=', '<=', '==', '!=', '>', '<'] as const;
type Op = (typeof OPS)[number];

/** A predicate on a session's reward. */
export type AcceptFilter = (reward: number) => boolean;

/**
 * Parse `--accept`: comparisons of `reward` with a number joined by `&&`, e.g. `reward>0`, `reward >= 0.5 && reward < 1`.
 * @throws Error naming the part that is not such a comparison.
 */
export function parseAccept(expr: string): AcceptFilter {
  const parts = expr.split('&&').map((p) => p.trim());
  const tests = parts.map((part) => {
    const m = /^reward\s*(>=|<=|==|!=|>|<)\s*(-?\d+(?:\.\d+)?)$/.exec(part);
    if (!m) throw new Error(`--accept: ${JSON.stringify(part)} is not "reward OP NUMBER" (OP one of ${OPS.join(' ')}); join comparisons with &&`);
    const op = m[1] as Op;
    const value = Number(m[2]);
    return (r: number) => (op === '>=' ? r >= value : op === '<=' ? r <= value : op === '==' ? r === value : op === '!=' ? r !== value : op === '>' ? r > value : r < value);
  });
  return (reward) => tests.every((t) => t(reward));
}

/**
 * The traces of the sessions of `taskIds` that completed with a reward the filter accepts, written as JSONL to `path`.
 * @returns the number of traces and of sessions written.
 */
export function writeAccepted(store: Store, taskIds: readonly string[], accept: AcceptFilter, path: string): { traces: number; sessions: number } {
  const ours = new Set(taskIds);
  const rows: ExportRow[] = exportTraces(store, { onlyEvaluated: true }).rows.filter((row) =>
    ours.has(String(row.metadata.task_id)) && row.metadata.status === 'COMPLETED' && row.reward !== null && accept(row.reward));
  writeJsonl(rows, path);
  return { traces: rows.length, sessions: new Set(rows.map((r) => String(r.metadata.session_id))).size };
}

/**
 * Per split: tasks, sessions, completed sessions, mean reward and pass@1 over the split's tasks by the rules the run
 * summary uses (src/observe/results.ts meanReward and scoreTask: mean over evaluated samples; pass@1 the mean of the
 * tasks' c/n, cancelled and unfinished samples left out), a sample `--max-retries` re-ran counted once by its last attempt.
 */
export interface SplitSummary {
  tasks: number;
  sessions: number;
  completed: number;
  /** Samples whose last attempt was cancelled: left out of mean_reward and pass_at_1. */
  cancelled: number;
  /** Samples not finished (an interrupted run): not judged yet, left out of mean_reward and pass_at_1. */
  unfinished: number;
  /** Null when no sample of the split was evaluated. */
  mean_reward: number | null;
  /** Null when every sample of the split was cancelled. */
  pass_at_1: number | null;
}

/** The summary per `metadata.split` of the tasks run; {} when no task names a split. */
export function summarizeSplits(store: Store, taskIds: readonly string[]): Record<string, SplitSummary> {
  const bySplit = new Map<string, string[]>();
  for (const id of taskIds) {
    const split = store.tasks.get(id)?.task.metadata?.split;
    if (typeof split !== 'string') continue;
    bySplit.set(split, [...(bySplit.get(split) ?? []), id]);
  }
  const out: Record<string, SplitSummary> = {};
  for (const [split, ids] of [...bySplit].sort(([a], [b]) => a.localeCompare(b))) {
    const { harnesses, tasks } = summarizeRun(store, ids);
    out[split] = {
      tasks: tasks.length, sessions: harnesses.reduce((n, h) => n + h.sessions, 0),
      completed: harnesses.reduce((n, h) => n + h.completed, 0), cancelled: harnesses.reduce((n, h) => n + h.cancelled, 0),
      unfinished: harnesses.reduce((n, h) => n + h.unfinished, 0),
      mean_reward: meanReward(tasks.flatMap((t) => t.rewards)), pass_at_1: meanPassAt1(tasks.map((t) => t.pass_at_1)),
    };
  }
  return out;
}

/** One line per split for the terminal. */
export function formatSplits(splits: Record<string, SplitSummary>): string[] {
  return Object.entries(splits).map(([split, s]) =>
    `split ${split}: ${s.tasks} task(s), ${s.sessions} session(s), ${s.completed} completed${s.cancelled > 0 ? `, ${s.cancelled} cancelled` : ''}${s.unfinished > 0 ? `, ${s.unfinished} unfinished` : ''}, ` +
    `mean reward ${s.mean_reward === null ? '-' : s.mean_reward.toFixed(3)}, pass@1 ${s.pass_at_1 === null ? '-' : s.pass_at_1.toFixed(3)}`);
}
