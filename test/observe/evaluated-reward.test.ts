/**
 * evaluatedReward (src/observe/results.ts), which `polar results`, `polar run`'s summary, `trace show` and the dashboard
 * share: a session that was never evaluated (skipped, cancelled) has no reward, shown as —, never a 0 in a mean.
 */
import { expect, test } from 'bun:test';
import type { SessionResult } from '../../src/core/records.ts';
import { evaluatedReward, formatResultTable, type ResultRow } from '../../src/observe/results.ts';

const result = (status: SessionResult['status'], evaluation: unknown): SessionResult => ({
  session_id: 's', task_id: 't', status, node_id: 'n', error: null, attempt: 0,
  trajectory: { status: 'COMPLETED', traces: [], metadata: { reconstruction_stats: { completions: 0, chains: 0, merged: 0, breaks: {} }, evaluation, training_filter: { trainable: true, reasons: [] } } },
  timing: { init_ms: 0, ready_queue_ms: 0, run_ms: 0, postrun_ms: 0, build_ms: 0, eval_ms: 0, e2e_ms: 0 },
} as unknown as SessionResult);

test('real rewards count, 0 included; skipped, cancelled in POSTRUN and CANCELLED sessions have none', () => {
  expect(evaluatedReward(result('COMPLETED', { outcome_reward: 1 }))).toBe(1);
  expect(evaluatedReward(result('COMPLETED', { outcome_reward: 0 }))).toBe(0);
  expect(evaluatedReward(result('ERROR', { outcome_reward: 0, details: { skipped: 'harness failed' } }))).toBeNull();
  expect(evaluatedReward(result('ERROR', { outcome_reward: 0, details: { cancelled: true } }))).toBeNull();
  expect(evaluatedReward(result('CANCELLED', { outcome_reward: 1 }))).toBeNull();
  expect(evaluatedReward(result('COMPLETED', null))).toBeNull();
});

test('the results table averages only evaluated sessions', () => {
  const row = (status: string, reward: number | null): ResultRow => ({
    task_id: 't', sample_index: 0, session_id: `s-${status}`, status, error: null, reward, turns: 1, completions: 1, chains: 1, trainable_tokens: 1, rerendered_joins: 0, breaks: {}, duration_s: 1, retried_by: null,
  });
  const table = formatResultTable([row('COMPLETED', 1), row('CANCELLED', evaluatedReward(result('CANCELLED', { outcome_reward: 0 })))]);
  expect(table).toContain('mean reward 1.000 over 1 evaluated');
});
