/**
 * `polar run` with the `shell` harness (no real CLI): a tiny agent (test/support/run-shell-agent.ts) calls the gateway's proxy
 * with its session key and really runs the simulator's shell steps. In-process `runTasks` is checked against the
 * scripted variants and the store; the CLI is checked for its exit codes (0 all completed, 1 a session timed out,
 * 2 bad usage), its results file and `polar export` on it.
 */
import { afterAll, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createProgressView, describeSnapshot, type RunSnapshot } from '../../src/stack/run-progress.ts';
import { formatSummaryTable, p50 } from '../../src/stack/run-summary.ts';
import { runTasks } from '../../src/stack/run-tasks.ts';
import { rewardOf } from '../../src/trace/groups.ts';
import { loadTaskDir } from '../../src/rollout/task-file.ts';
import { chooseVariant, parseBehaviourScript } from '../../src/sim/script.ts';
import { openStore } from '../../src/store/index.ts';
import { runPolar, SHELL_AGENT_COMMAND as agent, SHELL_AGENT_PATHS, SHELL_AGENT_RUN_FLAGS, writeSimTask } from '../support/polar-cli.ts';

const scratch = mkdtempSync(join(tmpdir(), 'polar-run-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A task directory: the solve variant writes the file the evaluator looks for (2 model calls), give_up answers at once (1). */
function writeTasks(dir: string, opts: { timeoutSeconds?: number } = {}): string {
  const script = [
    'variants:',
    '  solve: {weight: 0.5, steps: [{shell: "echo ok > out.txt"}, {say: "Created out.txt."}]}',
    '  give_up: {weight: 0.5, steps: [{say: "I will not do that."}]}',
    '',
  ].join('\n');
  for (const id of ['touch-a', 'touch-b']) writeSimTask(dir, id, script, opts);
  return dir;
}

/** `polar ...args`, SIGKILLed past `timeoutMs`. */
const polar = (args: string[], timeoutMs = 60_000) => runPolar(args, { timeoutMs });

test('runTasks: every task × sample runs through rollout server + gateway + proxy + simulator; rewards and summary follow the scripts', async () => {
  const tasks = loadTaskDir(writeTasks(join(scratch, 'inproc-tasks')));
  const store = openStore(join(scratch, 'inproc.db'));
  const snapshots: RunSnapshot[] = [];
  try {
    const report = await runTasks({
      tasks, harness: 'shell', command: agent, samples: 3, modelName: 'polar-sim', builder: 'prefix_merging', store,
      concurrency: 4, workRoot: join(scratch, 'inproc-work'), runtime: { read_only_paths: SHELL_AGENT_PATHS }, progressIntervalMs: 100, onProgress: (s) => snapshots.push(s),
    });
    expect(report.allCompleted).toBe(true);
    expect(report.statuses).toEqual({ COMPLETED: 6 });
    expect(report.harnessFailures).toBe(0);
    let expectedCompletions = 0;
    let expectedPasses = 0;
    const perTaskRate: number[] = [];
    for (const t of tasks) {
      const script = parseBehaviourScript(t.simScript);
      const rows = store.sessions.listByTask(t.task.task_id);
      expect(rows).toHaveLength(3);
      let passes = 0;
      for (const s of rows) {
        const variant = chooseVariant(script, s.session_id);
        const result = store.results.get(s.session_id)!;
        expect(result.status).toBe('COMPLETED');
        expect(rewardOf(result)).toBe(variant === 'solve' ? 1 : 0);
        const records = store.completions.listBySession(s.session_id);
        expect(records).toHaveLength(variant === 'solve' ? 2 : 1);
        expect(records.every((r) => r.engine_id.startsWith('sim@'))).toBe(true);
        expectedCompletions += records.length;
        if (variant === 'solve') passes++;
      }
      expectedPasses += passes;
      perTaskRate.push(passes / 3);
    }
    const [shell] = report.summary.harnesses;
    expect(report.summary.harnesses).toHaveLength(1);
    expect(shell!.harness).toBe('shell');
    expect(shell!.sessions).toBe(6);
    expect(shell!.completed).toBe(6);
    expect(shell!.completions).toBe(expectedCompletions);
    expect(shell!.mean_turns).toBeCloseTo(expectedCompletions / 6, 10);
    expect(shell!.pass_at_1).toBeCloseTo((perTaskRate[0]! + perTaskRate[1]!) / 2, 10);
    expect(shell!.mean_reward).toBeCloseTo(expectedPasses / 6, 10);
    expect(shell!.traces.per_request).toBe(expectedCompletions);
    // Each session is one chain: one merged trace, sharing the prompt of its first call.
    expect(shell!.traces.prefix_merging).toBe(6);
    expect(shell!.chain_roles).toEqual({ main: 6, side: 0, retry: 0, compaction: 0 });
    expect(shell!.sessions_with_one_main_chain).toBe(6);
    if (expectedPasses > 0) expect(shell!.trainer_tokens.prefix_merging).toBeLessThan(shell!.trainer_tokens.per_request);
    const recordTokens = store.completions.listSessionIds().flatMap((id) => store.completions.listBySession(id)).reduce((n, r) => n + r.prompt_ids.length + r.response_ids.length, 0);
    expect(shell!.trainer_tokens.per_request).toBe(recordTokens);
    expect(shell!.p50.run_ms).toBeGreaterThan(0);
    expect(report.summary.engine_busy_fraction).toBeGreaterThan(0);
    expect(report.summary.engine_busy_fraction).toBeLessThanOrEqual(1);
    // Progress: the last snapshot is the finished run, with the proxy's record counters.
    const last = snapshots.at(-1)!;
    expect(last).toMatchObject({ total: 6, done: 6, completed: 6, completions: expectedCompletions, tokens: recordTokens });
    expect(last.rewardSum).toBe(expectedPasses);
    expect(formatSummaryTable(report.summary)).toContain('shell');

    // The same run again on the same database runs nothing, and says so instead of passing stored results off as new.
    const lines: string[] = [];
    const again = await runTasks({
      tasks, harness: 'shell', command: agent, samples: 3, modelName: 'polar-sim', builder: 'prefix_merging', store,
      concurrency: 4, workRoot: join(scratch, 'inproc-work'), runtime: { read_only_paths: SHELL_AGENT_PATHS }, log: (line) => lines.push(line),
    });
    expect(lines).toContain('all 2 task(s) already finished in this database: nothing was run, their stored results follow (--fresh runs them again)');
    expect(again.statuses).toEqual({ COMPLETED: 6 });
    expect(tasks.flatMap((t) => store.sessions.listByTask(t.task.task_id))).toHaveLength(6);
  } finally {
    store.close();
  }
}, 60_000);

test('polar run CLI: exit 0, results file, summary.json, export; a timed-out session or a failed harness CLI exits 1; bad usage exits 2', async () => {
  const tasksDir = writeTasks(join(scratch, 'cli-tasks'));
  const out = join(scratch, 'cli-out');
  const ok = await polar(['run', tasksDir, '--harness', 'shell', '--command', agent, '--samples', '2', '--out', out, ...SHELL_AGENT_RUN_FLAGS]);
  if (ok.code !== 0) console.error(ok.stdout, ok.stderr);
  expect(ok.code).toBe(0);
  const db = join(out, 'results.db');
  expect(ok.stdout).toContain(`results: ${db}`);
  expect(ok.stdout).toMatch(/^progress: 4\/4 sessions done \(4 completed\)/m);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as { all_completed: boolean; harnesses: { sessions: number }[] };
  expect(summary.all_completed).toBe(true);
  expect(summary.harnesses[0]!.sessions).toBe(4);
  const jsonl = join(out, 'traces.jsonl');
  const exported = await polar(['export', '--db', db, '--format', 'jsonl', '--out', jsonl]);
  expect(exported.code).toBe(0);
  expect(readFileSync(jsonl, 'utf8').trim().split('\n')).toHaveLength(4);

  const slowTasks = writeTasks(join(scratch, 'slow-tasks'), { timeoutSeconds: 1 });
  const slow = await polar(['run', slowTasks, '--harness', 'shell', '--command', 'sleep 20', '--samples', '1', '--out', join(scratch, 'slow-out'), '--quiet']);
  expect(slow.code).toBe(1);
  expect(slow.stderr).toContain('TIMEOUT 2');

  // The gateway ends a session whose CLI failed as ERROR; its work is not done, so the job fails.
  const failing = await polar(['run', tasksDir, '--harness', 'shell', '--command', 'exit 3', '--samples', '1', '--out', join(scratch, 'failing-out'), '--quiet']);
  expect(failing.code).toBe(1);
  expect(failing.stderr).toContain('harness CLI failures: 2');
  expect(failing.stdout).toContain('shell: harness failure: exit 3');

  const unknown = await polar(['run', tasksDir, '--harness', 'nope', '--out', join(scratch, 'bad')]);
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toContain('unknown harness');
  const noAgent = await polar(['run', tasksDir, '--out', join(scratch, 'bad')]);
  expect(noAgent.code).toBe(2);
  expect(noAgent.stderr).toContain('pass --harness NAME');
  const missing = await polar(['run', join(scratch, 'missing'), '--harness', 'pi']);
  expect(missing.code).toBe(2);
  expect(missing.stderr).toContain('no such task');
  const badSettings = await polar(['run', tasksDir, '--harness', 'custom', '--command', 'true', '--agent-settings', '[1]', '--out', join(scratch, 'bad')]);
  expect(badSettings.code).toBe(2);
  expect(badSettings.stderr).toContain('--agent-settings must be a JSON object');
  const noCommand = await polar(['run', tasksDir, '--harness', 'custom', '--agent-settings', '{"api_key_env": ["K"]}', '--out', join(scratch, 'bad')]);
  expect(noCommand.code).toBe(2);
  expect(noCommand.stderr).toContain('--harness custom needs --command');
  expect(existsSync(join(scratch, 'bad'))).toBe(false);
}, 60_000);

test("polar run: a harness's misspelt or mistyped agent.settings is exit 2 naming the path, before anything is installed or written", async () => {
  const tasksDir = writeTasks(join(scratch, 'settings-tasks'));
  // A misspelt or mistyped setting of any harness is refused before anything starts (no install, no output directory).
  const misspelt = await polar(['run', tasksDir, '--harness', 'pi', '--agent-settings', '{"contex_window": 65536}', '--out', join(scratch, 'bad-settings')]);
  expect(misspelt.code).toBe(2);
  expect(misspelt.stderr).toContain('agent.settings.contex_window: unknown key');
  const badApi = await polar(['run', tasksDir, '--harness', 'pi', '--pi-api', 'openai', '--out', join(scratch, 'bad-settings')]);
  expect(badApi.code).toBe(2);
  expect(badApi.stderr).toMatch(/task\.yaml: agent\.settings\.api: .*anthropic-messages/);
  // The same for a task file's own agent block, named by its file.
  const ownBad = writeTasks(join(scratch, 'own-bad-settings'));
  const ownFile = join(ownBad, 'touch-a', 'task.yaml');
  writeFileSync(ownFile, `${readFileSync(ownFile, 'utf8')}agent: {harness: kilo, model_name: m, settings: {retry_limit: "2"}}\n`);
  const own = await polar(['run', join(ownBad, 'touch-a'), '--out', join(scratch, 'bad-settings')]);
  expect(own.code).toBe(2);
  expect(own.stderr).toContain(`${ownFile}: agent.settings.retry_limit: `);
  expect(existsSync(join(scratch, 'bad-settings'))).toBe(false);
}, 60_000);

test("runTasks without a harness runs each task file's agent block; with one, the file's agent.env and settings are kept", async () => {
  const dir = writeTasks(join(scratch, 'agent-block-tasks'));
  // The file's agent: a raw command whose result depends on the file's env (the evaluator greps for "ok").
  for (const id of ['touch-a', 'touch-b']) {
    const file = join(dir, id, 'task.yaml');
    writeFileSync(file, `${readFileSync(file, 'utf8')}agent: {harness: shell, model_name: file-model, command: 'echo $MARK > out.txt', env: {MARK: ok}, settings: {sampling_params: {temperature: 0.5}}}\n`);
  }
  const tasks = loadTaskDir(dir);
  const store = openStore(join(scratch, 'agent-block.db'));
  try {
    const own = await runTasks({ tasks: [tasks[0]!], samples: 1, builder: 'prefix_merging', store, concurrency: 2, workRoot: join(scratch, 'agent-block-work') });
    expect(own.statuses).toEqual({ COMPLETED: 1 });
    const ownTask = store.tasks.get('touch-a')!.task;
    expect(ownTask.agent).toEqual({ harness: 'shell', model_name: 'file-model', command: 'echo $MARK > out.txt', env: { MARK: 'ok' }, settings: { sampling_params: { temperature: 0.5 } } });
    expect(rewardOf(store.results.get(store.sessions.listByTask('touch-a')[0]!.session_id)!)).toBe(1);
    // --harness shell --command …: the flag's harness, command and model; the file's env and settings stay.
    const flagged = await runTasks({
      tasks: [tasks[1]!], harness: 'shell', command: 'echo $MARK > out.txt', samples: 1, modelName: 'flag-model', settings: { command: 'unused: agent.command wins' },
      builder: 'prefix_merging', store, concurrency: 2, workRoot: join(scratch, 'agent-block-work-2'),
    });
    expect(flagged.statuses).toEqual({ COMPLETED: 1 });
    expect(store.tasks.get('touch-b')!.task.agent).toEqual({ harness: 'shell', model_name: 'flag-model', command: 'echo $MARK > out.txt', env: { MARK: 'ok' }, settings: { sampling_params: { temperature: 0.5 }, command: 'unused: agent.command wins' } });
    expect(rewardOf(store.results.get(store.sessions.listByTask('touch-b')[0]!.session_id)!)).toBe(1);
  } finally {
    store.close();
  }
}, 60_000);

test('progress view: plain lines only when changed and at most once per interval; p50', () => {
  const lines: string[] = [];
  let now = 0;
  const view = createProgressView({ stream: { write: (s: string) => (lines.push(s), true) } as unknown as NodeJS.WritableStream, tty: false, intervalMs: 1000, now: () => now });
  const snap: RunSnapshot = { total: 2, stages: { queued: 0, init: 1, ready: 0, running: 1, postrun: 0 }, done: 0, completed: 0, completions: 3, tokens: 90, rewardSum: 0, rewardCount: 0 };
  view.update(snap);
  view.update(snap);
  now = 500;
  view.update({ ...snap, completions: 4 });
  now = 1500;
  view.update({ ...snap, completions: 4 });
  view.stop({ ...snap, done: 2, completed: 2, rewardSum: 1, rewardCount: 2 });
  expect(lines).toEqual([
    `progress: ${describeSnapshot(snap)}\n`,
    `progress: ${describeSnapshot({ ...snap, completions: 4 })}\n`,
    `progress: ${describeSnapshot({ ...snap, done: 2, completed: 2, rewardSum: 1, rewardCount: 2 })}\n`,
  ]);
  expect(lines[2]).toContain('2/2 sessions done (2 completed)');
  expect(lines[2]).toContain('mean reward 0.50');
  expect(p50([])).toBeNull();
  expect(p50([5, 1, 3])).toBe(3);
  expect(p50([4, 1, 3, 2])).toBe(2.5);
});
