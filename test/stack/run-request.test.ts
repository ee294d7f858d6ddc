/**
 * What `polar run` checks before anything starts (src/stack/run-tasks.ts): every task as the rollout server's submit
 * would check it (a bad task file is exit 2 naming the file, and no task of the run is submitted), a container
 * runtime without an image, and tasks the database already holds under another request; a task file's own
 * num_samples and builder apply when the flags leave them out.
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadTaskDir } from '../../src/rollout/task-file.ts';
import { RunRequestError, runRequests, runTasks } from '../../src/stack/run-tasks.ts';
import { openStore } from '../../src/store/index.ts';
import { runPolar, SHELL_AGENT_COMMAND, SHELL_AGENT_PATHS, writeSimTask } from '../support/polar-cli.ts';

const scratch = mkdtempSync(join(tmpdir(), 'polar-run-request-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function writeTask(dir: string, id: string, lines: string[]): void {
  mkdirSync(join(dir, id), { recursive: true });
  writeFileSync(join(dir, id, 'task.yaml'), [`task_id: ${id}`, 'instruction: create got.txt', 'timeout_seconds: 60', ...lines, ''].join('\n'));
}

test('a task file the server would refuse stops the run before anything is submitted, naming the file', async () => {
  const dir = join(scratch, 'typo');
  writeTask(dir, 'a-ok', ['evaluator: {strategy: test_on_output, config: {command: "test -f got.txt", expect_exit_code: 0}}']);
  writeTask(dir, 'b-typo', ['evaluator: {strategy: test_on_output, config: {command: "test -f got.txt", expect_exit_cod: 0}}']);
  const store = openStore(join(scratch, 'typo.db'));
  try {
    const run = runTasks({ tasks: loadTaskDir(dir), harness: 'shell', command: 'true', modelName: 'm', store, concurrency: 1, workRoot: join(scratch, 'typo-work') });
    await expect(run).rejects.toThrow(RunRequestError);
    await expect(run).rejects.toThrow(/b-typo\/task\.yaml: evaluator\.config\.expect_exit_cod: unknown key/);
    expect(store.tasks.get('a-ok')).toBeNull();
  } finally {
    store.close();
  }
  const cli = await runPolar(['run', dir, '--harness', 'shell', '--command', 'true', '--out', join(scratch, 'typo-out'), '--quiet']);
  expect(cli.code).toBe(2);
  expect(cli.stderr).toContain('b-typo/task.yaml: evaluator.config.expect_exit_cod: unknown key');
});

test('--runtime docker without --image: tasks without an image of their own are refused, naming runtime.image', async () => {
  const dir = join(scratch, 'noimage');
  writeTask(dir, 'plain', []);
  const cli = await runPolar(['run', dir, '--harness', 'shell', '--command', 'true', '--runtime', 'docker', '--out', join(scratch, 'noimage-out'), '--quiet']);
  expect(cli.code).toBe(2);
  expect(cli.stderr).toContain('runtime.image: the docker runtime needs an image');
  expect(cli.stderr).not.toContain('needs --image');
});

test('a task file\'s num_samples and builder apply unless --samples / --builder say otherwise', async () => {
  const dir = join(scratch, 'own');
  writeTask(dir, 'own', ['num_samples: 3', 'builder: {strategy: per_request}']);
  const store = openStore(join(scratch, 'own.db'));
  try {
    const report = await runTasks({ tasks: loadTaskDir(dir), harness: 'shell', command: 'true', modelName: 'm', store, concurrency: 3, workRoot: join(scratch, 'own-work'), progressIntervalMs: 100 });
    expect(store.tasks.get('own')?.task).toMatchObject({ num_samples: 3, builder: { strategy: 'per_request' } });
    expect(store.sessions.listByTask('own')).toHaveLength(3);
    expect(report.final.total).toBe(3);
    // The flags win, and a different request for a stored task is a conflict, not a silent reuse.
    const flagged = runTasks({ tasks: loadTaskDir(dir), harness: 'shell', command: 'true', samples: 1, builder: 'prefix_merging', modelName: 'm', store, concurrency: 1, workRoot: join(scratch, 'own-work2') });
    await expect(flagged).rejects.toThrow('own: num_samples 3 there, 1 now, builder "per_request" there, "prefix_merging" now');
  } finally {
    store.close();
  }
}, 60_000);

test('a database that holds a task under another request is not reported as this run (exit 2 unless --fresh)', async () => {
  const dir = join(scratch, 'shared');
  writeTask(dir, 'shared', []);
  const db = join(scratch, 'shared.db');
  const store = openStore(db);
  store.tasks.upsert({ task_id: 'shared', instruction: 'create got.txt', timeout_seconds: 60, num_samples: 1, agent: { harness: 'shell', command: 'true', model_name: 'polar-sim' }, builder: { strategy: 'prefix_merging' } }, 'COMPLETED');
  store.close();
  const cli = await runPolar(['run', dir, '--samples', '3', '--harness', 'shell', '--command', 'exit 1', '--db', db, '--out', join(scratch, 'shared-out'), '--quiet']);
  expect(cli.code).toBe(2);
  expect(cli.stderr).toContain('shared: num_samples 1 there, 3 now, command "true" there, "exit 1" now');
});

test("a task's sampling_params reach the engine for every call, and the custom harness never sees them", async () => {
  const dir = join(scratch, 'sampled');
  writeSimTask(dir, 'sampled', 'variants:\n  solve: {steps: [{shell: "echo ok > out.txt"}, {say: "done"}]}\n');
  const store = openStore(join(scratch, 'sampled.db'));
  try {
    const report = await runTasks({
      tasks: loadTaskDir(dir), harness: 'custom', command: SHELL_AGENT_COMMAND, modelName: 'polar-sim', store, concurrency: 1,
      settings: { base_url_env: { OPENAI_BASE_URL: '/v1' }, api_key_env: ['OPENAI_API_KEY'], model_env: ['OPENAI_MODEL'], sampling_params: { temperature: 0.55, top_p: 0.9, max_new_tokens: 300 } },
      runtime: { read_only_paths: SHELL_AGENT_PATHS }, workRoot: join(scratch, 'sampled-work'), progressIntervalMs: 100,
    });
    expect(report.allCompleted).toBe(true);
    const [session] = store.sessions.listByTask('sampled');
    const records = store.completions.listBySession(session!.session_id);
    expect(records.length).toBeGreaterThanOrEqual(2);
    for (const record of records) expect(record.ir_request.sampling).toMatchObject({ temperature: 0.55, topP: 0.9, maxTokens: 300 });
  } finally {
    store.close();
  }
}, 60_000);

test('an --out made by an older version (run.json with samples and builder) is resumed; another harness there is exit 2', async () => {
  const dir = join(scratch, 'older');
  writeTask(dir, 'older', []);
  const out = join(scratch, 'older-out');
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'run.json'), JSON.stringify({ harness: 'shell', command: 'true', samples: 1, builder: 'prefix_merging', model: 'polar-sim', tasks: ['older'] }));
  const resumed = await runPolar(['run', dir, '--harness', 'shell', '--command', 'true', '--out', out, '--quiet', '--no-sandbox']);
  expect({ code: resumed.code, stderr: resumed.stderr }).toEqual({ code: 0, stderr: '' });
  const other = await runPolar(['run', dir, '--harness', 'pi', '--out', out, '--quiet', '--no-sandbox']);
  expect(other.code).toBe(2);
  expect(other.stderr).toContain('holds a different run (harness: "shell" there, "pi" now;');
}, 60_000);

test('without --harness, --model, --command and --agent-settings apply to each task file\'s own agent', () => {
  const dir = join(scratch, 'own-agent');
  writeTask(dir, 'own-agent', ['agent: {harness: shell, command: "true", model_name: file-model, env: {A: "1"}, settings: {sampling_params: {temperature: 0.5}}}']);
  const tasks = loadTaskDir(dir);
  const [asWritten] = runRequests({ tasks });
  expect(asWritten!.agent).toMatchObject({ harness: 'shell', command: 'true', model_name: 'file-model', env: { A: '1' } });
  const [flagged] = runRequests({ tasks, modelName: 'flag-model', command: 'exit 0', settings: { sampling_params: { temperature: 0.25 } } });
  expect(flagged!.agent).toMatchObject({
    harness: 'shell', command: 'exit 0', model_name: 'flag-model', env: { A: '1' }, settings: { sampling_params: { temperature: 0.25 } },
  });
  // With --harness the flags replace the file's harness and model (the default model name is polar-sim).
  const [harnessed] = runRequests({ tasks, harness: 'shell' });
  expect(harnessed!.agent).toMatchObject({ harness: 'shell', command: 'true', model_name: 'polar-sim', env: { A: '1' } });
});

test('without --harness, --command on a task whose agent is not shell or custom is refused, naming the file', () => {
  const dir = join(scratch, 'pi-agent');
  writeTask(dir, 'pi-agent', ['agent: {harness: pi, model_name: m}']);
  expect(() => runRequests({ tasks: loadTaskDir(dir), command: 'true' })).toThrow(/pi-agent\/task\.yaml: --command applies to the shell and custom harnesses; this task's agent runs pi/);
});
