/**
 * Harbor task directories as Polar tasks (src/rollout/harbor-task.ts): task.toml timeouts and metadata, the instruction,
 * the harbor evaluator's config, Dockerfile WORKDIR/COPY as uploads with the skipped steps listed, container runtimes
 * needing docker_image, bad files named, and `polar run`/`polar submit` accepting the directories.
 */
import { afterAll, expect, test } from 'bun:test';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { loadHarborTask, readDockerfile, relativeToWorkdir } from '../../src/rollout/harbor-task.ts';
import { loadTaskDir, toTaskRequest } from '../../src/rollout/task-file.ts';
import { taskRequestsFromPath } from '../../src/cli/submit.ts';
import { runPolar } from '../support/polar-cli.ts';

const examples = resolve(import.meta.dir, '../../examples/harbor');
const scratch = mkdtempSync(join(tmpdir(), 'polar-harbor-task-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

test('a Harbor directory maps onto a TaskRequest: instruction, timeouts, harbor evaluator, uploads from the Dockerfile', () => {
  const loaded = loadHarborTask(join(examples, 'fix-fizzbuzz'));
  const request = toTaskRequest(loaded, { agent: { harness: 'pi', model_name: 'm' }, num_samples: 2 });
  expect(request.task_id).toBe('fix-fizzbuzz');
  // On the local runtime the session directory stands in for WORKDIR: /app/fizzbuzz.py is given as fizzbuzz.py.
  expect(request.instruction).toStartWith('The function `fizzbuzz(n)` in `fizzbuzz.py` returns');
  expect(request.timeout_seconds).toBe(120 + 60 + 120);
  expect(request.metadata).toMatchObject({ agent_timeout: 120, harbor: { difficulty: 'easy', tags: ['python', 'bugfix'] } });
  expect(request.evaluator).toEqual({ strategy: 'harbor', config: { tests_dir: join(examples, 'fix-fizzbuzz', 'tests'), timeout_s: 60, workdir: '/app' } });
  expect(request.runtime).toEqual({ kind: 'local', prepare: [{ upload_file: { src: join(examples, 'fix-fizzbuzz', 'environment', 'fizzbuzz.py'), dest: 'fizzbuzz.py' } }] });
  expect(request.metadata?.sim_script).toBeDefined();
  expect(loaded.notes).toEqual(['Dockerfile base image not used locally (host tools instead): python:3.12-slim', 'instruction.md: paths under /app (the image\'s WORKDIR) given relative to the session directory']);
});

test('relativeToWorkdir: whole-path mentions of WORKDIR only', () => {
  expect(relativeToWorkdir('edit /app/src/x.py, then cd /app && ls /app/; save it in /app.', '/app')).toBe('edit src/x.py, then cd ./ && ls ./; save it in ./.');
  expect(relativeToWorkdir('not /application, /x/app/y or ~/app', '/app/')).toBe('not /application, /x/app/y or ~/app');
});

test('readDockerfile: RUN and copies outside WORKDIR are listed as skipped; directories and trailing slashes', () => {
  const env = join(scratch, 'env');
  cpSync(join(examples, 'fix-fizzbuzz', 'environment'), env, { recursive: true });
  const read = readDockerfile([
    'FROM ubuntu:24.04', 'RUN apt-get update && \\', '    apt-get install -y python3', 'WORKDIR /app', 'COPY fizzbuzz.py /app/src/',
    'COPY . .', 'COPY fizzbuzz.py /etc/fb.py', 'ENV X=1',
  ].join('\n'), env);
  expect(read.workdir).toBe('/app');
  expect(read.prepare).toEqual([{ upload_file: { src: join(env, 'fizzbuzz.py'), dest: 'src/fizzbuzz.py' } }, { upload_dir: { src: env, dest: '.' } }]);
  expect(read.notes).toEqual([
    'Dockerfile base image not used locally (host tools instead): ubuntu:24.04',
    'Dockerfile line 2 not run locally: RUN apt-get update && apt-get install -y python3',
    'Dockerfile line 8 not run locally: ENV X=1',
    'Dockerfile line 7 not copied locally: COPY fizzbuzz.py /etc/fb.py (outside WORKDIR)',
  ]);
});

test('container runtimes need [environment].docker_image; with it the image and WORKDIR travel', () => {
  const dir = join(scratch, 'img-task');
  cpSync(join(examples, 'fix-fizzbuzz'), dir, { recursive: true });
  expect(() => loadHarborTask(dir, { runtime: 'podman' })).toThrow(/podman runtime needs an image.*docker_image/);
  writeFileSync(join(dir, 'task.toml'), '[environment]\ndocker_image = "example/fizzbuzz:1"\n[agent]\ntimeout_sec = 30\n');
  const loaded = loadHarborTask(dir, { runtime: 'docker' });
  expect(loaded.task.runtime).toEqual({ kind: 'docker', image: 'example/fizzbuzz:1', work_dir: '/app' });
  expect(loaded.task.timeout_seconds).toBe(30 + 600 + 120);
});

test('bad Harbor files are errors naming the file and field', () => {
  const dir = join(scratch, 'bad-task');
  cpSync(join(examples, 'write-greeting'), dir, { recursive: true });
  writeFileSync(join(dir, 'task.toml'), '[agent]\ntimeout_sec = "soon"\n');
  expect(() => loadHarborTask(dir)).toThrow(/task.toml: agent.timeout_sec must be a positive number/);
  writeFileSync(join(dir, 'task.toml'), '[agent\n');
  expect(() => loadHarborTask(dir)).toThrow(/task.toml: cannot parse/);
  writeFileSync(join(dir, 'task.toml'), '');
  rmSync(join(dir, 'tests'), { recursive: true });
  expect(() => loadHarborTask(dir)).toThrow(/has no tests\/test.sh/);
});

test('loadTaskDir and polar submit take one Harbor directory or a directory of them', async () => {
  expect(loadTaskDir(join(examples, 'write-greeting')).map((t) => t.task.task_id)).toEqual(['write-greeting']);
  const requests = await taskRequestsFromPath(examples, { harness: 'pi', model: 'm' });
  expect(requests.map((r) => [r.task_id, r.evaluator?.strategy])).toEqual([['fix-fizzbuzz', 'harbor'], ['write-greeting', 'harbor']]);
  await expect(taskRequestsFromPath(examples, { harness: 'pi', model: 'm', taskRuntime: 'podman' })).rejects.toThrow(/needs an image/);
  await expect(taskRequestsFromPath(examples, { harness: 'pi', model: 'm', taskRuntime: 'vm' })).rejects.toThrow(/--task-runtime must be one of/);
});

test('polar submit: a task.yaml with its own agent block is a task file (relative uploads resolve); datasets as polar run reads them', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'polar-submit-paths-'));
  try {
    mkdirSync(join(dir, 't', 'repo'), { recursive: true });
    writeFileSync(join(dir, 't', 'task.yaml'), ['task_id: t', 'instruction: x', 'timeout_seconds: 30', 'agent: {harness: shell, model_name: m, command: "true"}', 'runtime: {kind: local, prepare: [{upload_dir: {src: repo, dest: repo}}]}', ''].join('\n'));
    const [fromFile] = await taskRequestsFromPath(join(dir, 't', 'task.yaml'), { model: 'm' });
    expect(fromFile!.runtime?.prepare).toEqual([{ upload_dir: { src: join(dir, 't', 'repo'), dest: 'repo' } }]);
    writeFileSync(join(dir, 'rows.jsonl'), `${JSON.stringify({ task_id: 'r1', instruction: 'x', timeout_seconds: 30 })}\n`);
    await expect(taskRequestsFromPath(join(dir, 'rows.jsonl'), { harness: 'shell', command: 'true', model: 'm' })).rejects.toThrow(/is a dataset: pass --dataset-format/);
    const rows = await taskRequestsFromPath(join(dir, 'rows.jsonl'), { harness: 'shell', command: 'true', model: 'm', datasetFormat: 'tasks' });
    await expect(taskRequestsFromPath(join(dir, 't'), { harness: 'shell', command: 'true', model: 'm', limit: 1 })).rejects.toThrow('--limit applies to datasets: pass --dataset-format too');
    expect(rows.map((r) => [r.task_id, r.agent.harness])).toEqual([['r1', 'shell']]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('polar run --runtime podman without --image: a Harbor task without docker_image is a usage error (exit 2)', async () => {
  const r = await runPolar(['run', examples, '--harness', 'pi', '--runtime', 'podman', '--out', join(scratch, 'out')], { timeoutMs: 30_000 });
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(/image/);
});

test('a directory of Harbor tasks: one with task.toml but no instruction.md is an error naming the file, not skipped', () => {
  const root = join(scratch, 'many');
  cpSync(join(examples, 'write-greeting'), join(root, 'a-ok'), { recursive: true });
  cpSync(join(examples, 'write-greeting'), join(root, 'b-no-instruction'), { recursive: true });
  rmSync(join(root, 'b-no-instruction', 'instruction.md'));
  expect(() => loadTaskDir(root)).toThrow(/b-no-instruction: Harbor task has no instruction.md/);
  expect(() => loadHarborTask(join(root, 'b-no-instruction'))).toThrow(/b-no-instruction: Harbor task has no instruction.md/);
  expect(() => loadHarborTask(join(root, 'missing'))).toThrow(/Harbor task directory not found: .*many\/missing/);
  rmSync(join(root, 'b-no-instruction', 'task.toml'));
  expect(() => loadHarborTask(join(root, 'b-no-instruction'))).toThrow(/b-no-instruction: Harbor task has no task.toml/);
  // A folder with neither file is not a task: it is still passed over.
  expect(loadTaskDir(root).map((t) => t.task.task_id)).toEqual(['a-ok']);
});

test('task.toml: unknown keys are notes naming their path (Harbor ignores them); a bad table or [[steps]] is an error; the keys Harbor documents load', () => {
  const dir = join(scratch, 'keys-task');
  cpSync(join(examples, 'write-greeting'), dir, { recursive: true });
  const unknown: Array<[string, string]> = [
    ['[verifier]\ntimeout = 5\n', 'task.toml: verifier.timeout: not a Harbor key, ignored'],
    ['[agent]\ntimeout_secs = 1\n', 'task.toml: agent.timeout_secs: not a Harbor key, ignored'],
    ['[enviroment]\ndocker_image = "x"\n', 'task.toml: enviroment: not a Harbor key, ignored'],
    ['[environment]\nmemroy_mb = 1\n', 'task.toml: environment.memroy_mb: not a Harbor key, ignored'],
    ['[task]\nname = "org/x"\ntitle = "x"\n', 'task.toml: task.title: not a Harbor key, ignored'],
    ['timeout_sec = 5\n', 'task.toml: timeout_sec: not a Harbor key, ignored'],
  ];
  for (const [text, note] of unknown) {
    writeFileSync(join(dir, 'task.toml'), text);
    expect(loadHarborTask(dir).notes.some((n) => n.startsWith(note))).toBe(true);
  }
  const bad: Array<[string, RegExp]> = [
    ['verifier = 3\n', /task.toml: verifier must be a table/],
    ['[[steps]]\nname = "one"\n', /task.toml: steps: multi-step Harbor tasks are not supported/],
  ];
  for (const [text, error] of bad) {
    writeFileSync(join(dir, 'task.toml'), text);
    expect(() => loadHarborTask(dir)).toThrow(error);
  }
  // Every section and key of Harbor's task.toml (schema 1.0 through the current docs), [metadata] free-form.
  writeFileSync(join(dir, 'task.toml'), [
    'schema_version = "1.1"', 'source = "some-dataset"',
    '[task]', 'name = "org/greeting"', 'description = "d"', 'authors = [{ name = "A", email = "a@example.com" }]', 'keywords = ["k"]',
    '[metadata]', 'author_name = "A"', 'anything = { nested = [1, 2] }',
    '[verifier]', 'timeout_sec = 30.0', 'env = { API_KEY = "x" }', 'user = "root"', 'network_mode = "public"', 'allowed_hosts = []',
    '[agent]', 'timeout_sec = 40.0', 'setup_timeout_sec = 100.0', 'user = "agent"', 'network_mode = "allowlist"', 'allowed_hosts = ["pypi.org"]',
    '[solution]', 'env = { API_KEY = "x" }',
    '[environment]', 'build_timeout_sec = 600.0', 'docker_image = "org/img:1"', 'os = "linux"', 'cpus = 1', 'memory_mb = 2048',
    'storage_mb = 10240', 'gpus = 0', 'gpu_types = ["H100"]', 'allow_internet = true', 'network_mode = "public"', 'allowed_hosts = []',
    'env = { X = "${X:-1}" }', 'skills_dir = "/skills"', 'memory = "2G"', 'storage = "10G"',
    'mcp_servers = [{ name = "m", transport = "stdio", command = "srv" }]',
    '[environment.healthcheck]', 'command = "true"',
    '[environment.tpu]', 'type = "v6e"', 'topology = "2x4"',
  ].join('\n'));
  const loaded = loadHarborTask(dir);
  expect(loaded.task.timeout_seconds).toBe(40 + 30 + 120);
  expect(loaded.task.metadata).toMatchObject({ harbor: { author_name: 'A', anything: { nested: [1, 2] } } });
  writeFileSync(join(dir, 'task.toml'), 'version = "1.0"\n');
  expect(loadHarborTask(dir).task.task_id).toBe('keys-task');
});

test('readDockerfile: exec-form (JSON array) COPY and ADD', () => {
  const env = join(scratch, 'env-exec');
  cpSync(join(examples, 'fix-fizzbuzz', 'environment'), env, { recursive: true });
  writeFileSync(join(env, 'app.py'), 'print(1)\n');
  writeFileSync(join(env, 'my file.txt'), 'x\n');
  const read = readDockerfile([
    'FROM python:3.12-slim', 'WORKDIR /app', 'COPY ["app.py", "/app/app.py"]', 'COPY --chown=1000:1000 ["fizzbuzz.py", "my file.txt", "/app/lib/"]',
    'ADD [ "app.py", \\', '  "copy.py" ]', 'COPY ["app.py", "/etc/app.py"]', 'COPY ["app.py" "/app/x.py"]',
    'COPY --from=build /out /app/out', 'COPY /app.py /app/abs.py', 'COPY ../secret /app/',
  ].join('\n'), env);
  expect(read.prepare).toEqual([
    { upload_file: { src: join(env, 'app.py'), dest: 'app.py' } },
    { upload_file: { src: join(env, 'fizzbuzz.py'), dest: 'lib/fizzbuzz.py' } },
    { upload_file: { src: join(env, 'my file.txt'), dest: 'lib/my file.txt' } },
    { upload_file: { src: join(env, 'app.py'), dest: 'copy.py' } },
    // An absolute source is a path in the build context, never on the host.
    { upload_file: { src: join(env, 'app.py'), dest: 'abs.py' } },
  ]);
  expect(read.notes).toEqual([
    'Dockerfile base image not used locally (host tools instead): python:3.12-slim',
    'Dockerfile line 8 not copied locally: COPY ["app.py" "/app/x.py"] (not a JSON array of strings)',
    'Dockerfile line 9 not copied locally: COPY --from=build /out /app/out (copies from another build stage or image)',
    'Dockerfile line 7 not copied locally: COPY app.py /etc/app.py (outside WORKDIR)',
    'Dockerfile line 11 not copied locally: COPY ../secret /app (source outside the build context)',
  ]);
});
