/**
 * `polar run --max-retries` re-runs only sessions that failed for infrastructure reasons (a prepare step that fails
 * once), in the same group; a policy failure (reward 0) is never re-run. `--accept` writes only accepted sessions'
 * traces; the summary is given per dataset split.
 */
import { afterAll, expect, test } from 'bun:test';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { loadTaskDir } from '../../src/rollout/task-file.ts';
import { isInfrastructureFailure } from '../../src/rollout/run-retries.ts';
import { parseAccept } from '../../src/stack/run-outputs.ts';
import { runTasks } from '../../src/stack/run-tasks.ts';
import { openStore } from '../../src/store/index.ts';
import { rewardOf } from '../../src/trace/groups.ts';
import { runPolar, SHELL_AGENT_COMMAND, SHELL_AGENT_RUN_FLAGS } from '../support/polar-cli.ts';

const scratch = mkdtempSync(join(tmpdir(), 'polar-retries-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Task `flaky`: its prepare step fails the first time it runs on this host (an infrastructure failure); `gives-up`: reward 0. */
function writeTasks(dir: string): void {
  const marker = join(dir, 'prepared-once');
  const write = (id: string, prepare: string, script: string) => {
    mkdirSync(join(dir, id), { recursive: true });
    writeFileSync(join(dir, id, 'task.yaml'), [
      `task_id: ${id}`, 'instruction: Create the file out.txt containing ok.', 'timeout_seconds: 60',
      `runtime: {kind: local, prepare: [{exec: {command: ${JSON.stringify(prepare)}, retries: 0}}]}`,
      'evaluator: {strategy: test_on_output, config: {command: "grep -q ok out.txt"}}', 'sim_script: sim.yaml', '',
    ].join('\n'));
    writeFileSync(join(dir, id, 'sim.yaml'), script);
  };
  write('flaky', `if [ -f ${marker} ]; then exit 0; fi; touch ${marker}; exit 1`, 'variants:\n  solve: {steps: [{shell: "echo ok > out.txt"}, {say: "done"}]}\n');
  write('gives-up', 'true', 'variants:\n  give_up: {steps: [{say: "I will not."}]}\n');
}

for (const maxRetries of [0, 1]) {
  test(`runTasks --max-retries ${maxRetries}: the infrastructure failure is ${maxRetries ? 're-run in the same group' : 'left as ERROR'}; the policy failure never is`, async () => {
    const dir = join(scratch, `tasks-${maxRetries}`);
    writeTasks(dir);
    const store = openStore(join(scratch, `r${maxRetries}.db`));
    try {
      const report = await runTasks({
        // No sandbox: the prepare step's marker lives outside the session (so only the first attempt fails).
        tasks: loadTaskDir(dir), harness: 'shell', command: SHELL_AGENT_COMMAND, runtime: { isolation: 'none' }, samples: 1, modelName: 'polar-sim', builder: 'prefix_merging',
        store, concurrency: 2, workRoot: join(scratch, `work-${maxRetries}`), progressIntervalMs: 100, maxRetries,
      });
      const [flaky] = store.sessions.listByTask('flaky');
      const first = store.results.get(flaky!.session_id)!;
      expect(first.status).toBe('ERROR');
      expect(isInfrastructureFailure(first)).toBe(true);
      const [gaveUp] = store.sessions.listByTask('gives-up');
      expect(rewardOf(store.results.get(gaveUp!.session_id)!)).toBe(0);
      expect(store.tasks.get('gives-up~retry1')).toBeNull();
      if (maxRetries === 0) {
        expect([report.retriedSessions, report.allCompleted, report.taskIds]).toEqual([0, false, ['flaky', 'gives-up']]);
        expect(store.tasks.get('flaky~retry1')).toBeNull();
      } else {
        expect([report.retriedSessions, report.allCompleted, report.taskIds]).toEqual([1, true, ['flaky', 'gives-up', 'flaky~retry1']]);
        const retry = store.tasks.get('flaky~retry1')!;
        expect(retry.task.metadata).toMatchObject({ group_id: 'flaky', retry_of: 'flaky' });
        const [again] = store.sessions.listByTask('flaky~retry1');
        expect(rewardOf(store.results.get(again!.session_id)!)).toBe(1);
        // Each sample counts by its last attempt: the retry stands in for the session it re-ran.
        expect(report.statuses).toEqual({ COMPLETED: 2 });
        expect(report.summary.tasks.map((t) => [t.task_id, t.rewards, t.retried])).toEqual([['flaky', [1], 1], ['gives-up', [0], 0]]);
      }
    } finally {
      store.close();
    }
  }, 90_000);
}

test('parseAccept: comparisons joined by &&; anything else is an error', () => {
  const f = parseAccept('reward >= 0.5 && reward<1');
  expect([0.4, 0.5, 0.99, 1].map(f)).toEqual([false, true, true, false]);
  expect([0, 0.1].map(parseAccept('reward>0'))).toEqual([false, true]);
  expect(() => parseAccept('score>0')).toThrow(/"score>0" is not "reward OP NUMBER"/);
});

test('polar run on a dataset: --accept writes only accepted traces; the summary per split; a bad --accept is exit 2', async () => {
  const out = join(scratch, 'cli');
  const r = await runPolar([
    'run', resolve(import.meta.dir, '../../examples/swe/data.jsonl'), '--dataset-format', 'swebench', '--harness', 'shell', '--command', SHELL_AGENT_COMMAND,
    '--samples', '4', '--out', out, '--quiet', '--accept', 'reward>0', ...SHELL_AGENT_RUN_FLAGS,
  ], { timeoutMs: 120_000 });
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(/split test: 1 task\(s\), 4 session\(s\), 4 completed, mean reward \d\.\d{3}/);
  expect(r.stdout).toMatch(/split train: 1 task\(s\), 4 session\(s\)/);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as { splits: Record<string, { sessions: number; mean_reward: number }>; accepted: { sessions: number } };
  expect(Object.keys(summary.splits)).toEqual(['test', 'train']);
  const store = openStore(join(out, 'results.db'));
  try {
    const rewarded = store.results.listAll().filter((x) => rewardOf(x) > 0);
    expect(summary.accepted.sessions).toBe(rewarded.length);
    const rows = readFileSync(join(out, 'accepted.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { reward: number; metadata: { session_id: string } });
    expect(rows.every((row) => row.reward > 0)).toBe(true);
    expect(new Set(rows.map((row) => row.metadata.session_id))).toEqual(new Set(rewarded.map((x) => x.session_id)));
    const trainMean = store.results.listAll().filter((x) => x.task_id === 'calc__add-1').reduce((n, x) => n + rewardOf(x), 0) / 4;
    expect(summary.splits.train!.mean_reward).toBeCloseTo(trainMean, 10);
  } finally {
    store.close();
  }
  const bad = await runPolar(['run', join(scratch, 'tasks-0'), '--harness', 'pi', '--accept', 'reward>>0', '--out', join(scratch, 'bad')], { timeoutMs: 30_000 });
  expect([bad.code, bad.stderr.includes('--accept')]).toEqual([2, true]);
  expect(existsSync(join(scratch, 'bad', 'results.db'))).toBe(false);
}, 150_000);

test('runTasks --max-retries 1: a harness that crashed once and succeeded on its retry leaves the run all completed', async () => {
  const dir = join(scratch, 'crashy');
  const marker = join(dir, 'crashed-once');
  mkdirSync(join(dir, 'crashy'), { recursive: true });
  writeFileSync(join(dir, 'crashy', 'task.yaml'), [
    'task_id: crashy', 'instruction: Create the file out.txt containing ok.', 'timeout_seconds: 60',
    'evaluator: {strategy: test_on_output, config: {command: "grep -q ok out.txt"}}', 'sim_script: sim.yaml', '',
  ].join('\n'));
  writeFileSync(join(dir, 'crashy', 'sim.yaml'), 'variants:\n  solve: {steps: [{shell: "echo ok > out.txt"}, {say: "done"}]}\n');
  const store = openStore(join(scratch, 'crashy.db'));
  try {
    const report = await runTasks({
      tasks: loadTaskDir(dir), harness: 'shell', command: `if [ -f ${marker} ]; then ${SHELL_AGENT_COMMAND}; else touch ${marker}; exit 3; fi`,
      runtime: { isolation: 'none' }, modelName: 'polar-sim', store, concurrency: 1, workRoot: join(scratch, 'crashy-work'), progressIntervalMs: 100, maxRetries: 1,
    });
    const [first] = store.sessions.listByTask('crashy');
    expect(store.results.get(first!.session_id)!.trajectory.metadata.harness_outcome).toMatchObject({ success: false });
    expect([report.retriedSessions, report.harnessFailures, report.allCompleted]).toEqual([1, 0, true]);
    // The summary's "harness ok" (sessions − harness_failures) says what the exit code says: the retry made it good.
    const [h] = report.summary.harnesses;
    expect([h!.sessions, h!.harness_failures, h!.retried_sessions]).toEqual([1, 0, 1]);
  } finally {
    store.close();
  }
}, 90_000);
