/**
 * TaskRequests in the Python Polar's spelling (NVIDIA-NeMo/ProRL-Agent-Server src/polar/rollout/models.py and the
 * models it nests) are accepted with its defaults; ours still are; unknown keys and unsupported values are errors
 * that name their path.
 */
import { expect, test } from 'bun:test';
import { parseWireTaskRequest, REFERENCE_DEFAULTS } from '../../src/core/contracts/index.ts';

const minimal = { task_id: 't1', instruction: 'fix it', agent: { harness: 'pi' } };

test('a minimal reference TaskRequest gets the reference defaults', () => {
  const task = parseWireTaskRequest(minimal);
  expect(task.num_samples).toBe(REFERENCE_DEFAULTS.num_samples);
  expect(task.timeout_seconds).toBe(600);
  expect(task.builder).toEqual({ strategy: 'per_request' });
  expect(task.agent).toEqual({ harness: 'pi', model_name: 'default' });
  expect(task.runtime).toBeUndefined();
});

test('our own spelling passes through unchanged', () => {
  const ours = {
    task_id: 't2', instruction: 'x', num_samples: 3, timeout_seconds: 30,
    agent: { harness: 'shell', command: 'echo {{INSTRUCTION}}', model_name: 'm', settings: { a: 1 }, env: { K: 'v' } },
    builder: { strategy: 'prefix_merging' },
    runtime: { kind: 'local', isolation: 'none', prepare: [{ upload_dir: { src: '/tmp/r', dest: 'repo' } }, { exec: { command: 'true', retries: 2 } }] },
    evaluator: { strategy: 'test_on_output', config: { command: 'true' }, refresh_runtime: true },
    metadata: { group_id: 'g', policy_version: 3, rollout_step: 2 },
  };
  const task = parseWireTaskRequest(ours);
  expect(task.runtime).toEqual({ kind: 'local', isolation: 'none', prepare: ours.runtime.prepare });
  expect(task.agent).toEqual(ours.agent);
  expect(task.metadata).toMatchObject({ group_id: 'g', policy_version: '3', rollout_step: 2 });
});

test('reference runtime: backend/workdir renamed, prepare actions converted, absolute targets made relative', () => {
  const task = parseWireTaskRequest({
    ...minimal,
    runtime: {
      backend: 'apptainer', image: ' img.sif ', workdir: '/polar/session/workspace', network: 'host',
      prepare: [
        { type: 'exec', command: 'make', cwd: '/w d', env: { A: "it's" }, max_attempts: 3, retry_backoff_seconds: 0.5 },
        { type: 'upload_file', source: '/host/t.py', target: '/polar/session/workspace/sub/t.py' },
        { type: 'upload_dir', source: '/host/repo', target: 'repo' },
      ],
      gpus: 0, allow_internet: true, internet_volumes: [], kwargs: {}, import_path: null, env: {}, cpus: null,
    },
  });
  // network "host" is the reference RuntimeSpec's default: the node's own network here (no network key).
  expect(task.runtime).toEqual({
    kind: 'apptainer', image: 'img.sif', work_dir: '/polar/session/workspace',
    prepare: [
      { exec: { command: "cd '/w d' && export A='it'\\''s'; make", retries: 2, backoff_ms: 500 } },
      { upload_file: { src: '/host/t.py', dest: 'sub/t.py' } },
      { upload_dir: { src: '/host/repo', dest: 'repo' } },
    ],
  });
});

test("a pydantic model_dump() of the reference RuntimeSpec (network \"host\" and every default) is accepted and runs on the node's network", () => {
  const dumped = {
    backend: 'docker', image: 'python:3.11', prepare: [], eval_prepare: null, env: {}, network: 'host', workdir: null, direct_exec_init_command: null,
    cpus: null, memory_mb: null, storage_mb: null, gpus: 0, allow_internet: true, internet_volumes: [], import_path: null, kwargs: {},
  };
  expect(parseWireTaskRequest({ ...minimal, runtime: dumped }).runtime).toEqual({ kind: 'docker', image: 'python:3.11', prepare: [] });
  // Our spelling (a runtime that names its kind) keeps an explicit host network; the node decides whether it may.
  expect(parseWireTaskRequest({ ...minimal, runtime: { kind: 'podman', image: 'i', network: 'host' } }).runtime).toMatchObject({ network: 'host' });
  expect(parseWireTaskRequest({ ...minimal, runtime: { ...dumped, network: 'none' } }).runtime).toMatchObject({ network: 'none' });
});

test('an upload target equal to the workdir (with or without a trailing slash) is the work directory itself', () => {
  for (const target of ['/app', '/app/', '/app//']) {
    const task = parseWireTaskRequest({ ...minimal, runtime: { image: 'i', workdir: '/app', prepare: [{ type: 'upload_dir', source: '/host/repo', target }] } });
    expect(task.runtime?.prepare).toEqual([{ upload_dir: { src: '/host/repo', dest: '.' } }]);
  }
  const sub = parseWireTaskRequest({ ...minimal, runtime: { image: 'i', workdir: '/app/', prepare: [{ type: 'upload_dir', source: '/h', target: '/app/src/' }] } });
  expect(sub.runtime?.prepare).toEqual([{ upload_dir: { src: '/h', dest: 'src' } }]);
  expect(() => parseWireTaskRequest({ ...minimal, runtime: { image: 'i', workdir: '/app', prepare: [{ type: 'upload_dir', source: '/h', target: '/application' }] } })).toThrow('runtime.prepare[0].target: absolute upload target');
});

test("the reference's harbor config becomes ours: verifier_timeout → timeout_s, Harbor's layout defaults accepted", () => {
  const clawbench = { tests_dir: '/data/task/tests', tests_target: '/tests/', verifier_dir: '/logs/verifier', test_command: 'bash /tests/test.sh', verifier_timeout: 180, upload_attempts: 3, upload_retry_backoff_seconds: 0.1 };
  const task = parseWireTaskRequest({ ...minimal, evaluator: { strategy: 'harbor', config: clawbench, env: {}, refresh_runtime: false } });
  expect(task.evaluator).toEqual({ strategy: 'harbor', config: { tests_dir: '/data/task/tests', timeout_s: 180 }, refresh_runtime: false });
  let message = '';
  try {
    parseWireTaskRequest({ ...minimal, evaluator: { strategy: 'harbor', config: { tests_dir: '/t', tests_target: '/verifier', test_command: 'pytest', verifier_timeout: 5, timeout_s: 5 } } });
  } catch (error) {
    message = (error as Error).message;
  }
  for (const path of ['evaluator.config.tests_target: only the reference default "/tests"', 'evaluator.config.test_command', 'evaluator.config.verifier_timeout: conflicts']) expect(message).toContain(path);
});

test('a reference runtime that names no backend is docker, as in the reference', () => {
  expect(parseWireTaskRequest({ ...minimal, runtime: { image: 'python:3.12' } }).runtime).toMatchObject({ kind: 'docker', image: 'python:3.12' });
});

test('custom_shell becomes the shell harness command; integer group_id becomes its label string', () => {
  const task = parseWireTaskRequest({
    ...minimal, agent: { harness: 'shell', custom_shell: { command: 'run {{INSTRUCTION}}', cwd: '/x', env: { B: '1' } }, import_path: null, mcp_servers: [], skills_path: null },
    metadata: { group_id: 7, policy_version: 2, rollout_step: 5 },
  });
  expect(task.agent.command).toBe("cd '/x' && run {{INSTRUCTION}}");
  expect(task.agent.env).toEqual({ B: '1' });
  expect(task.metadata?.group_id).toBe('7');
});

test.each([
  [{ ...minimal, agent: { harness: null, import_path: 'my.mod:Agent' } }, 'agent.import_path: not supported'],
  [{ ...minimal, agent: { harness: 'pi', mcp_servers: [{ name: 'x', transport: 'sse', url: 'http://x' }] } }, 'agent.mcp_servers: not supported'],
  [{ ...minimal, runtime: { image: 'i', gpus: 1 } }, 'runtime.gpus: not supported'],
  [{ ...minimal, runtime: { image: 'i', env: { A: 'b' } } }, 'runtime.env: not supported'],
  [{ ...minimal, runtime: { image: 'i', allow_internet: false } }, 'runtime.allow_internet: not supported'],
  [{ ...minimal, evaluator: { strategy: 'test_on_output', env: { KEY: 'x' } } }, 'evaluator.env: not supported'],
  [{ ...minimal, metadata: { eval_sampling_seed_base: 10 } }, 'metadata.eval_sampling_seed_base: not supported'],
  [{ ...minimal, frobnicate: 1 }, 'frobnicate: unknown key'],
  [{ ...minimal, agent: { harness: 'pi', colour: 'red' } }, 'agent.colour: unknown key'],
  [{ ...minimal, runtime: { image: 'i', prepare: [{ type: 'exec', command: 'x', bogus: 1 }] } }, 'runtime.prepare[0].bogus: unknown key'],
  [{ ...minimal, runtime: { image: 'i', prepare: [{ type: 'upload_file', source: '/a', target: '/etc/passwd' }] } }, 'runtime.prepare[0].target: absolute upload target'],
  [{ ...minimal, runtime: { image: 'i', prepare: [{ type: 'exec' }] } }, 'runtime.prepare[0].command: exec requires command'],
  [{ ...minimal, runtime: { kind: 'docker', backend: 'apptainer', image: 'i' } }, 'runtime.backend: conflicts'],
  [{ ...minimal, runtime: { backend: 'docker', image: null } }, 'runtime.image: required with runtime.backend "docker"'],
  [{ ...minimal, agent: { harness: 'pi', custom_shell: { command: 'x' } } }, "agent.custom_shell: only valid when agent.harness is 'shell'"],
  [{ ...minimal, num_samples: 2, early_stop_min_usable_sessions: 3 }, 'early_stop_min_usable_sessions: cannot exceed num_samples'],
  [{ ...minimal, builder: { strategy: 'router_policy' } }, 'builder.strategy'],
  [{ ...minimal, dispatch_priority: 101 }, 'dispatch_priority'],
  [{ ...minimal, dispatch_priority: -5 }, 'dispatch_priority'],
])('rejected with the path named: %#', (input, message) => {
  expect(() => parseWireTaskRequest(input)).toThrow(message);
});

test('every problem is reported at once', () => {
  let message = '';
  try {
    parseWireTaskRequest({ ...minimal, agent: { harness: 'pi', import_path: 'a:b', skills_path: '/s' }, runtime: { image: 'i', cpus: 4 } });
  } catch (error) {
    message = (error as Error).message;
  }
  for (const path of ['agent.import_path', 'agent.skills_path', 'runtime.cpus']) expect(message).toContain(path);
});

test("the reference's test_on_output config becomes ours: test_command, test_timeout, expected_output_json lines", () => {
  const task = parseWireTaskRequest({
    ...minimal,
    evaluator: { strategy: 'test_on_output', config: { test_command: 'python3 t.py && echo "PASSED a.b"', test_timeout: 60, expected_output_json: { 'a.b': 'PASSED', c: 'FAILED' }, repo_dir: '/w' }, refresh_runtime: true },
  });
  const config = task.evaluator!.config as Record<string, unknown>;
  expect(config).toMatchObject({ command: 'python3 t.py && echo "PASSED a.b"', timeout_s: 60, repo_dir: '/w' });
  const regex = new RegExp(config.expect_output_regex as string, 'm');
  expect(regex.test('noise\nPASSED a.b\nFAILED c\n')).toBe(true);
  expect(regex.test('FAILED c\nPASSED a.b')).toBe(true);
  expect(regex.test('PASSED a.b\nPASSED c\n')).toBe(false);
  expect(regex.test('PASSED aXb\nFAILED c\n')).toBe(false);
  // Our own config is left alone.
  const ours = parseWireTaskRequest({ ...minimal, evaluator: { strategy: 'test_on_output', config: { command: 'true', test_command: 'x' } } });
  expect(ours.evaluator!.config).toEqual({ command: 'true', test_command: 'x' });
});
