/**
 * Harbor task directories as Polar tasks (src/rollout/harbor-task.ts): task.toml timeouts and metadata, the instruction,
 * the harbor evaluator's config, Dockerfile WORKDIR/COPY as uploads with the skipped steps listed, container runtimes
 * needing docker_image, bad files named, and `polar run`/`polar submit` accepting the directories.
 */
import { afterAll, expect, test } from 'bun:test';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { loadHarborTask, readDockerfile } from '../../src/rollout/harbor-task.ts';
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
  expect(request.instruction).toStartWith('The function `fizzbuzz(n)`');
  expect(request.timeout_seconds).toBe(120 + 60 + 120);
  expect(request.metadata).toMatchObject({ agent_timeout: 120, harbor: { difficulty: 'easy', tags: ['python', 'bugfix'] } });
  expect(request.evaluator).toEqual({ strategy: 'harbor', config: { tests_dir: join(examples, 'fix-fizzbuzz', 'tests'), timeout_s: 60, workdir: '/app' } });
  expect(request.runtime).toEqual({ kind: 'local', prepare: [{ upload_file: { src: join(examples, 'fix-fizzbuzz', 'environment', 'fizzbuzz.py'), dest: 'fizzbuzz.py' } }] });
  expect(request.metadata?.sim_script).toBeDefined();
  expect(loaded.notes).toEqual(['Dockerfile base image not used locally (host tools instead): python:3.12-slim']);
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

test('loadTaskDir and polar submit take one Harbor directory or a directory of them', () => {
  expect(loadTaskDir(join(examples, 'write-greeting')).map((t) => t.task.task_id)).toEqual(['write-greeting']);
  const requests = taskRequestsFromPath(examples, { harness: 'pi', model: 'm' });
  expect(requests.map((r) => [r.task_id, r.evaluator?.strategy])).toEqual([['fix-fizzbuzz', 'harbor'], ['write-greeting', 'harbor']]);
  expect(() => taskRequestsFromPath(examples, { harness: 'pi', model: 'm', taskRuntime: 'podman' })).toThrow(/needs an image/);
  expect(() => taskRequestsFromPath(examples, { harness: 'pi', model: 'm', taskRuntime: 'vm' })).toThrow(/--task-runtime must be one of/);
});

test('polar run --runtime podman without --image: a Harbor task without docker_image is a usage error (exit 2)', async () => {
  const r = await runPolar(['run', examples, '--harness', 'pi', '--runtime', 'podman', '--out', join(scratch, 'out')], { timeoutMs: 30_000 });
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(/image/);
});
