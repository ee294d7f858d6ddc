/**
 * `polar run --max-retries`: the training data folds a retried sample into the GRPO group of the task it re-ran
 * (src/rollout/run-retries.ts finalGroups). `polar export` of a run where 1 of 4 samples failed for an infrastructure
 * reason (its evaluator could not run, after the agent's model calls) and was retried gives one group of 4: rows with
 * task_id and group_id of the task, sample_index 0..3, the retried sample's traces from the retry, advantages over the
 * 4 final attempts; the failed attempt is not a trainer row. `accepted.jsonl` and `--format messages` say the same.
 * Failures are injected with `mkdir` as an atomic once-only marker outside the session (so the run has no sandbox).
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ExportRow, MessagesRow } from '../../src/rollout/export.ts';
import { finalGroups } from '../../src/rollout/run-retries.ts';
import { openStore } from '../../src/store/index.ts';
import { grpoAdvantages, leaveOneOutAdvantages } from '../../src/trace/advantages.ts';
import { runPolar, SHELL_AGENT_COMMAND } from '../support/polar-cli.ts';

const scratch = mkdtempSync(join(tmpdir(), 'polar-retry-export-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const out = join(scratch, 'out');
const db = join(out, 'results.db');
let run: Awaited<ReturnType<typeof runPolar>>;

/**
 * One task, 4 samples plus one retry, by the order their prepare steps run: the 1st attempt's evaluator cannot run
 * (exit 127: an infrastructure failure, after the agent made its model calls), the 2nd is judged reward 0, every later
 * one (the other two samples, and the retry) reward 1.
 */
beforeAll(async () => {
  const dir = join(scratch, 'tasks');
  const markers = join(scratch, 'markers');
  mkdirSync(markers, { recursive: true });
  mkdirSync(join(dir, 'mixed'), { recursive: true });
  const prepare = `mkdir ${markers}/a 2>/dev/null && { touch broken; exit 0; }; mkdir ${markers}/b 2>/dev/null && exit 0; touch good`;
  writeFileSync(join(dir, 'mixed', 'task.yaml'), [
    'task_id: mixed', 'instruction: Create the file out.txt containing ok.', 'timeout_seconds: 60',
    `runtime: {kind: local, prepare: [{exec: {command: ${JSON.stringify(prepare)}, retries: 0}}]}`,
    `evaluator: {strategy: test_on_output, config: {command: ${JSON.stringify('test -f broken && exit 127; grep -q ok out.txt && test -f good')}}}`,
    'sim_script: sim.yaml', '',
  ].join('\n'));
  writeFileSync(join(dir, 'mixed', 'sim.yaml'), 'variants:\n  solve: {steps: [{shell: "echo ok > out.txt"}, {say: "done"}]}\n');
  run = await runPolar([
    'run', dir, '--harness', 'shell', '--command', SHELL_AGENT_COMMAND, '--samples', '4', '--max-retries', '1', '--no-sandbox', '--quiet',
    '--accept', 'reward>0', '--out', out,
  ], { timeoutMs: 150_000 });
}, 180_000);

/** The run's sessions: the one that failed, its retry, and the reward of every other sample. */
function sessions() {
  const store = openStore(db);
  try {
    const original = store.sessions.listByTask('mixed').map((s) => ({ ...s, result: store.results.get(s.session_id)! }));
    const failed = original.find((s) => s.result.status === 'ERROR')!;
    const [retry] = store.sessions.listByTask('mixed~retry1');
    return { original, failed, retry: retry!, retryResult: store.results.get(retry!.session_id)! };
  } finally {
    store.close();
  }
}

test('the run retried the one sample whose evaluator could not run, after its model calls', () => {
  expect(run.code).toBe(0);
  const { original, failed, retryResult } = sessions();
  expect(original.map((s) => s.result.status).sort()).toEqual(['COMPLETED', 'COMPLETED', 'COMPLETED', 'ERROR']);
  expect(failed.result.error).toContain('evaluation failed');
  expect(failed.result.trajectory.traces.length).toBeGreaterThan(0);
  expect([retryResult.status, retryResult.trajectory.traces[0]?.reward]).toEqual(['COMPLETED', 1]);
}, 30_000);

test('polar export: one group of 4, sample_index 0..3, the retried sample from the retry, advantages over the 4', async () => {
  const { original, failed, retry } = sessions();
  const path = join(scratch, 'export.jsonl');
  const r = await runPolar(['export', '--db', db, '--format', 'jsonl', '--out', path], { timeoutMs: 30_000 });
  expect(r.code).toBe(0);
  const rows = readFileSync(path, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as ExportRow);
  // One row per session (each has one trace): no row of the failed attempt, none under the retry's own task id.
  expect(rows.map((row) => row.metadata.session_id)).not.toContain(failed.session_id);
  expect(new Set(rows.map((row) => row.metadata.task_id))).toEqual(new Set(['mixed']));
  expect(new Set(rows.map((row) => row.metadata.group_id))).toEqual(new Set(['mixed']));
  const bySample = new Map(rows.map((row) => [row.sample_index, row]));
  expect([...bySample.keys()].sort()).toEqual([0, 1, 2, 3]);
  const retried = bySample.get(failed.sample_index)!;
  expect(retried.metadata).toMatchObject({ session_id: retry.session_id, session_task_id: 'mixed~retry1', replaced_sessions: [failed.session_id], status: 'COMPLETED' });
  for (const s of original.filter((o) => o.session_id !== failed.session_id)) {
    expect(bySample.get(s.sample_index)!.metadata).toMatchObject({ session_id: s.session_id, session_task_id: 'mixed', replaced_sessions: [] });
  }
  // Rewards 0, 1, 1 and the retry's 1: GRPO and leave-one-out over those 4, in sample order.
  const ordered = [0, 1, 2, 3].map((i) => bySample.get(i)!);
  const rewards = ordered.map((row) => row.reward!);
  expect([...rewards].sort()).toEqual([0, 1, 1, 1]);
  const grpo = grpoAdvantages(rewards);
  const loo = leaveOneOutAdvantages(rewards);
  ordered.forEach((row, i) => {
    expect(row.advantage!).toBeCloseTo(grpo[i]!, 9);
    expect(row.metadata.loo_advantage as number).toBeCloseTo(loo[i]!, 9);
  });
  expect(retried.advantage!).toBeCloseTo(0.25 / Math.sqrt(0.1875), 5);
  expect(r.stderr).toContain('1 session(s) re-run by a retry left out');
}, 60_000);

test('finalGroups: the folded group is a GroupRecord of the task over its 4 last attempts; the stored groups stay per request', () => {
  const { failed, retry } = sessions();
  const store = openStore(db);
  try {
    const [folded, ...others] = finalGroups(store, ['mixed', 'mixed~retry1']);
    expect(others).toEqual([]);
    expect(folded!.task_id).toBe('mixed');
    const group = folded!.group!;
    expect([group.task_id, group.group_id, group.sessions.map((s) => s.sample_index)]).toEqual(['mixed', 'mixed', [0, 1, 2, 3]]);
    expect(group.sessions.find((s) => s.sample_index === failed.sample_index)!.session_id).toBe(retry.session_id);
    expect(group.grpo_advantages).toEqual(grpoAdvantages(group.rewards));
    // What the rollout server stored while the run went on: the task's 3 usable sessions, and the retry's one.
    expect(store.groups.get('mixed')!.data.rewards).toHaveLength(3);
    expect(store.groups.get('mixed~retry1')!.data.rewards).toEqual([1]);
  } finally {
    store.close();
  }
}, 30_000);

test('accepted.jsonl and --format messages name the task the retry re-ran, with its sample_index', async () => {
  const { failed, retry } = sessions();
  const accepted = readFileSync(join(out, 'accepted.jsonl'), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as ExportRow);
  expect(accepted).toHaveLength(3);
  expect(accepted.find((row) => row.metadata.session_id === retry.session_id)).toMatchObject({ sample_index: failed.sample_index, metadata: { task_id: 'mixed' } });
  const path = join(scratch, 'messages.jsonl');
  const r = await runPolar(['export', '--db', db, '--format', 'messages', '--out', path], { timeoutMs: 30_000 });
  expect(r.code).toBe(0);
  const messages = readFileSync(path, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as MessagesRow);
  expect(messages.map((m) => m.metadata.task_id)).toEqual(['mixed', 'mixed', 'mixed']);
  expect(messages.find((m) => m.metadata.session_id === retry.session_id)!.metadata).toMatchObject({ sample_index: failed.sample_index });
}, 60_000);
