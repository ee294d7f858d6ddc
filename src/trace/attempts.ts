/**
 * Dispatch attempts of a session. A resumed `polar run` or a rollout server's re-dispatch after a node loss runs the
 * same session id again with attempt + 1; the killed attempt's completions stay stored (a captured completion is never
 * dropped) but must never enter the new attempt's trajectory, or the dead attempt's chains would be trained with the
 * new attempt's reward. These helpers pick one attempt's records; the builders and `verifyTraces` use them.
 */
import type { CompletionRecord, Trajectory } from '../core/records.ts';

/** The record's 0-based dispatch attempt (records stored before attempts existed are attempt 0). */
export function attemptOf(rec: Pick<CompletionRecord, 'attempt'>): number {
  return rec.attempt ?? 0;
}

/** The highest attempt among `records`; 0 when there are none. */
export function latestAttempt(records: readonly Pick<CompletionRecord, 'attempt'>[]): number {
  let latest = 0;
  for (const rec of records) latest = Math.max(latest, attemptOf(rec));
  return latest;
}

/**
 * The attempt a stored trajectory was built from (`metadata.attempt`), or undefined when it does not say (results
 * stored before attempts existed, whose records are all attempt 0).
 */
export function trajectoryAttempt(trajectory: Pick<Trajectory, 'metadata'> | null | undefined): number | undefined {
  const value = trajectory?.metadata?.attempt;
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined;
}

/** One attempt's records and how many of the session's other attempts were left out. */
export interface AttemptSelection {
  /** The selected 0-based attempt. */
  attempt: number;
  /** Records of that attempt, in the input order. */
  records: CompletionRecord[];
  /** Records of every other attempt, in the input order (stored, never part of this attempt's trajectory). */
  others: CompletionRecord[];
}

/**
 * Split a session's records by dispatch attempt.
 * @param records CompletionRecords of one session (any order, any attempts)
 * @param attempt the attempt to keep (0-based); default: the latest attempt among `records`
 * @throws Error when `attempt` is not a non-negative integer
 */
export function selectAttempt(records: readonly CompletionRecord[], attempt?: number): AttemptSelection {
  if (attempt !== undefined && !(Number.isInteger(attempt) && attempt >= 0)) {
    throw new Error(`attempt must be a non-negative integer, got ${JSON.stringify(attempt)}`);
  }
  const selected = attempt ?? latestAttempt(records);
  const kept: CompletionRecord[] = [];
  const others: CompletionRecord[] = [];
  for (const rec of records) (attemptOf(rec) === selected ? kept : others).push(rec);
  return { attempt: selected, records: kept, others };
}
