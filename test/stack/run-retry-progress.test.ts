/**
 * `polar run --max-retries`: the live progress counts samples, each by its last attempt (src/rollout/run-retries.ts
 * finalAttempts), as the summary does: a retried sample is not done again until its retry ends, `done` never passes
 * `total` (the run's samples, not its attempts), and the final rewards are the summary's.
 * The live mean reward, like the final one, is over evaluated samples: a session that ended in ERROR has no reward.
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadTaskDir } from '../../src/rollout/task-file.ts';
import { describeSnapshot, type RunSnapshot } from '../../src/stack/run-progress.ts';
import { runTasks } from '../../src/stack/run-tasks.ts';
import { openStore } from '../../src/store/index.ts';
import { SHELL_AGENT_COMMAND } from '../support/polar-cli.ts';

const scratch = mkdtempSync(join(tmpdir(), 'polar-retry-progress-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

test('runTasks --max-retries 1: progress totals 2 samples, not 3 attempts, and ends at 2/2 with the retry\'s reward', async () => {
  const dir = join(scratch, 'tasks');
  const markers = join(scratch, 'markers');
  mkdirSync(markers, { recursive: true });
  mkdirSync(join(dir, 'flaky'), { recursive: true });
  // The first prepare to take the marker fails (an infrastructure failure); the other sample and the retry succeed.
  const prepare = `mkdir ${markers}/first 2>/dev/null && exit 1; exit 0`;
  writeFileSync(join(dir, 'flaky', 'task.yaml'), [
    'task_id: flaky', 'instruction: Create the file out.txt containing ok.', 'timeout_seconds: 60',
    `runtime: {kind: local, prepare: [{exec: {command: ${JSON.stringify(prepare)}, retries: 0}}]}`,
    'evaluator: {strategy: test_on_output, config: {command: "grep -q ok out.txt"}}', 'sim_script: sim.yaml', '',
  ].join('\n'));
  writeFileSync(join(dir, 'flaky', 'sim.yaml'), 'variants:\n  solve: {steps: [{shell: "echo ok > out.txt"}, {say: "done"}]}\n');
  const store = openStore(join(scratch, 'r.db'));
  const snapshots: RunSnapshot[] = [];
  try {
    const report = await runTasks({
      tasks: loadTaskDir(dir), harness: 'shell', command: SHELL_AGENT_COMMAND, runtime: { isolation: 'none' }, samples: 2, modelName: 'polar-sim', builder: 'prefix_merging',
      store, concurrency: 2, workRoot: join(scratch, 'work'), progressIntervalMs: 20, maxRetries: 1, onProgress: (s) => snapshots.push(s),
    });
    expect(report.retriedSessions).toBe(1);
    expect(snapshots.length).toBeGreaterThan(0);
    expect(snapshots.every((s) => s.total === 2 && s.done <= s.total)).toBe(true);
    const final = report.final;
    expect([final.total, final.done, final.completed, final.rewardCount, final.rewardSum]).toEqual([2, 2, 2, 2, 2]);
    expect(snapshots.at(-1)).toEqual(final);
  } finally {
    store.close();
  }
}, 120_000);

test('runTasks: the live mean reward leaves out a session that ended in ERROR (no reward), as the final count does', async () => {
  const dir = join(scratch, 'mixed');
  // `broken` fails in prepare at once (ERROR, never evaluated); `slow` passes a while later, so progress lines are
  // written from the live count while only the ERROR has arrived.
  mkdirSync(join(dir, 'broken'), { recursive: true });
  writeFileSync(join(dir, 'broken', 'task.yaml'), [
    'task_id: broken', 'instruction: Create the file out.txt containing ok.', 'timeout_seconds: 60',
    'runtime: {kind: local, prepare: [{exec: {command: "exit 1", retries: 0}}]}',
    'evaluator: {strategy: test_on_output, config: {command: "grep -q ok out.txt"}}', 'sim_script: sim.yaml', '',
  ].join('\n'));
  writeFileSync(join(dir, 'broken', 'sim.yaml'), 'variants:\n  solve: {steps: [{shell: "echo ok > out.txt"}, {say: "done"}]}\n');
  mkdirSync(join(dir, 'slow'), { recursive: true });
  writeFileSync(join(dir, 'slow', 'task.yaml'), [
    'task_id: slow', 'instruction: Create the file out.txt containing ok.', 'timeout_seconds: 60',
    'evaluator: {strategy: test_on_output, config: {command: "grep -q ok out.txt"}}', 'sim_script: sim.yaml', '',
  ].join('\n'));
  writeFileSync(join(dir, 'slow', 'sim.yaml'), 'variants:\n  solve: {steps: [{shell: "sleep 1.5; echo ok > out.txt"}, {say: "done"}]}\n');
  const store = openStore(join(scratch, 'mixed.db'));
  const snapshots: RunSnapshot[] = [];
  try {
    const report = await runTasks({
      tasks: loadTaskDir(dir), harness: 'shell', command: SHELL_AGENT_COMMAND, runtime: { isolation: 'none' }, samples: 1, modelName: 'polar-sim', builder: 'prefix_merging',
      store, concurrency: 2, workRoot: join(scratch, 'work-mixed'), progressIntervalMs: 20, onProgress: (s) => snapshots.push(s),
    });
    expect([report.final.total, report.final.done, report.final.completed, report.final.rewardCount, report.final.rewardSum]).toEqual([2, 2, 1, 1, 1]);
    // The live count saw the ERROR alone for a while: done 1, nothing completed, and no reward to average yet.
    const errorOnly = snapshots.filter((s) => s.done === 1 && s.completed === 0);
    expect(errorOnly.length).toBeGreaterThan(0);
    expect(errorOnly.every((s) => s.rewardCount === 0 && s.rewardSum === 0)).toBe(true);
    expect(describeSnapshot(errorOnly.at(-1)!)).toEndWith('mean reward -');
    expect(snapshots.every((s) => s.rewardCount <= s.completed)).toBe(true);
  } finally {
    store.close();
  }
}, 120_000);
