/**
 * `polar run --max-retries`: every output that lists per-task results counts a retried sample once, by its last
 * attempt (src/rollout/run-retries.ts finalAttempts): one summary row per task with num_samples rewards, pass@1 from the
 * retry, "harness ok" and statuses that agree with the exit code, split summaries, and `polar results`' totals.
 * The prepare step of each task fails for chosen attempts (an infrastructure failure), using `mkdir` as an atomic
 * once-only marker outside the session (so the run has no sandbox).
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ResultRow } from '../../src/observe/results.ts';
import { loadTaskDir } from '../../src/rollout/task-file.ts';
import { finalAttempts } from '../../src/rollout/run-retries.ts';
import { runTasks } from '../../src/stack/run-tasks.ts';
import type { RunSummary } from '../../src/stack/run-summary.ts';
import { openStore } from '../../src/store/index.ts';
import { runPolar, SHELL_AGENT_COMMAND } from '../support/polar-cli.ts';

const scratch = mkdtempSync(join(tmpdir(), 'polar-retry-summary-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/**
 * A task directory `dir/<id>` whose prepare step runs `prepare` (`$M` is a marker directory next to the task) and
 * whose agent solves the task (reward 1) whenever it runs.
 */
function writeTask(dir: string, id: string, prepare: string): void {
  const markers = join(dir, `${id}-markers`);
  mkdirSync(markers, { recursive: true });
  mkdirSync(join(dir, id), { recursive: true });
  writeFileSync(join(dir, id, 'task.yaml'), [
    `task_id: ${id}`, 'instruction: Create the file out.txt containing ok.', 'timeout_seconds: 60',
    `runtime: {kind: local, prepare: [{exec: {command: ${JSON.stringify(prepare.replaceAll('$M', markers))}, retries: 0}}]}`,
    'evaluator: {strategy: test_on_output, config: {command: "grep -q ok out.txt"}}', 'sim_script: sim.yaml', '',
  ].join('\n'));
  writeFileSync(join(dir, id, 'sim.yaml'), 'variants:\n  solve: {steps: [{shell: "echo ok > out.txt"}, {say: "done"}]}\n');
}

type SummaryJson = RunSummary & { statuses: Record<string, number>; all_completed: boolean; harness_failures: number; retried_sessions: number; splits: Record<string, { tasks: number; sessions: number }> };

const runArgs = (dir: string, out: string) => [
  'run', dir, '--harness', 'shell', '--command', SHELL_AGENT_COMMAND, '--samples', '2', '--max-retries', '1', '--no-sandbox', '--quiet', '--out', out,
];

test('polar run: one of two samples fails for an infrastructure reason and its retry succeeds: one row, 2 samples, exit 0', async () => {
  const dir = join(scratch, 'recovers');
  // The first prepare to get the marker fails; every later one (the other sample, the retry) succeeds.
  writeTask(dir, 'flaky', 'mkdir $M/first 2>/dev/null && exit 1; exit 0');
  const out = join(scratch, 'recovers-out');
  const r = await runPolar(runArgs(dir, out), { timeoutMs: 120_000 });
  expect(r.code).toBe(0);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as SummaryJson;
  expect(summary.tasks).toEqual([expect.objectContaining({ task_id: 'flaky', rewards: [1, 1], pass_at_1: 1, failed: 0, retried: 1 })]);
  const [h] = summary.harnesses;
  expect([summary.harnesses.length, h!.tasks, h!.sessions, h!.completed, h!.harness_failures, h!.pass_at_1, h!.mean_reward, h!.retried_sessions]).toEqual([1, 1, 2, 2, 0, 1, 1, 1]);
  expect(h!.statuses).toEqual({ COMPLETED: 2 });
  expect([summary.statuses, summary.all_completed, summary.harness_failures, summary.retried_sessions]).toEqual([{ COMPLETED: 2 }, true, 0, 1]);
  // The table: the task once (no `~retry` row), harness ok = sessions, as the exit code says; and a note on retries.
  expect(r.stdout).not.toContain('~retry');
  expect(r.stdout).toMatch(/^shell\s+2\s+2\s+2\s+1\.000\s/m);
  expect(r.stdout).toMatch(/^flaky\s+1 1\s+1\.00\s/m);
  expect(r.stdout).toContain('retried: 1 session(s) re-run after infrastructure failures; each sample counts by its last attempt');

  // `polar results` lists all three sessions, marks the one the retry re-ran, and totals by last attempt.
  const db = join(out, 'results.db');
  const listed = await runPolar(['results', '--db', db, '--json'], { timeoutMs: 30_000 });
  const rows = JSON.parse(listed.stdout) as ResultRow[];
  expect(rows.map((row) => row.status).sort()).toEqual(['COMPLETED', 'COMPLETED', 'ERROR']);
  const store = openStore(db);
  try {
    const [retry] = store.sessions.listByTask('flaky~retry1');
    expect(rows.map((row) => [row.status, row.retried_by])).toContainEqual(['ERROR', retry!.session_id]);
    expect(rows.filter((row) => row.retried_by !== null)).toHaveLength(1);
  } finally {
    store.close();
  }
  const table = await runPolar(['results', '--db', db], { timeoutMs: 30_000 });
  expect(table.stdout).toContain('3 session(s), 1 re-run by a retry (counted by its last attempt): 2 completed, 0 error, 0 timeout; mean reward 1.000 over 2 evaluated');
  expect(table.stdout).toMatch(/^flaky\s+\d\s+\S+\s+ERROR\s.*\sretried(:|$)/m);
}, 150_000);

test('polar run: a retry that fails again is one failed sample of one task, and the exit code is 1', async () => {
  const dir = join(scratch, 'fails-again');
  // The first prepare fails, the second (the other sample) succeeds, the third (the retry) fails again.
  writeTask(dir, 'broken', 'mkdir $M/a 2>/dev/null && exit 1; mkdir $M/b 2>/dev/null && exit 0; exit 1');
  const out = join(scratch, 'fails-again-out');
  const r = await runPolar(runArgs(dir, out), { timeoutMs: 120_000 });
  expect(r.code).toBe(1);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as SummaryJson;
  expect(summary.tasks).toHaveLength(1);
  const [task] = summary.tasks;
  expect([task!.task_id, task!.rewards.length, task!.pass_at_1, task!.failed, task!.retried]).toEqual(['broken', 2, 0.5, 1, 1]);
  expect(task!.rewards.filter((x) => x === 1)).toHaveLength(1);
  const [h] = summary.harnesses;
  // The failed sample has no reward: a failure in pass@1, out of the mean reward (src/observe/results.ts meanReward).
  expect([h!.sessions, h!.completed, h!.pass_at_1, h!.mean_reward, h!.cancelled]).toEqual([2, 1, 0.5, 1, 0]);
  expect([summary.statuses, summary.all_completed]).toEqual([{ COMPLETED: 1, ERROR: 1 }, false]);
  expect(r.stdout).not.toContain('~retry');
  expect(r.stderr).toMatch(/not every session completed its work: (COMPLETED 1, ERROR 1|ERROR 1, COMPLETED 1)\n/);
}, 150_000);

test('runTasks --max-retries 2: a sample re-run twice folds through both rounds into its task, by its last attempt', async () => {
  const dir = join(scratch, 'twice');
  // The first prepare fails, the second (other sample) succeeds, the third (retry 1) fails, the fourth (retry 2) succeeds.
  writeTask(dir, 'stubborn', 'mkdir $M/a 2>/dev/null && exit 1; mkdir $M/b 2>/dev/null && exit 0; mkdir $M/c 2>/dev/null && exit 1; exit 0');
  const store = openStore(join(scratch, 'twice.db'));
  try {
    const report = await runTasks({
      tasks: loadTaskDir(dir), harness: 'shell', command: SHELL_AGENT_COMMAND, runtime: { isolation: 'none' }, samples: 2, modelName: 'polar-sim',
      store, concurrency: 2, workRoot: join(scratch, 'twice-work'), progressIntervalMs: 100, maxRetries: 2,
    });
    expect(report.taskIds).toEqual(['stubborn', 'stubborn~retry1', 'stubborn~retry2']);
    expect(store.tasks.get('stubborn~retry2')!.task.metadata).toMatchObject({ retry_of: 'stubborn~retry1', retry_samples: [0] });
    const [folded] = finalAttempts(store, report.taskIds);
    const failed = store.sessions.listByTask('stubborn').find((s) => store.results.get(s.session_id)!.status === 'ERROR')!;
    const sample = folded!.samples.find((s) => s.sample_index === failed.sample_index)!;
    const [first] = store.sessions.listByTask('stubborn~retry1');
    const [second] = store.sessions.listByTask('stubborn~retry2');
    expect(sample).toEqual({ task_id: 'stubborn', sample_index: failed.sample_index, session_id: second!.session_id, session_task_id: 'stubborn~retry2', replaced: [failed.session_id, first!.session_id] });
    expect(folded!.samples).toHaveLength(2);
    expect([report.summary.tasks.map((t) => [t.task_id, t.rewards, t.retried]), report.statuses, report.retriedSessions, report.allCompleted])
      .toEqual([[['stubborn', [1, 1], 2]], { COMPLETED: 2 }, 2, true]);
  } finally {
    store.close();
  }
}, 120_000);
