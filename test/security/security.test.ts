/**
 * The service path's security rules: prepare-action `dest` paths stay inside the session work directory (every
 * runtime; the local runtime also against symlinks), and `polar serve` / `polar rollout` / `polar gateway` refuse to
 * listen on a non-loopback address without a control-plane token unless told `--insecure-no-token` (which warns).
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { checkListenSecurity, isLoopbackHost } from '../../src/cli/common.ts';
import { UsageError } from '../../src/cli/common.ts';
import { runPrepare } from '../../src/gateway/prepare.ts';
import { ContainerRuntime } from '../../src/gateway/runtimes/container.ts';
import { confineDest, parseRuntimeSpec } from '../../src/gateway/runtimes/index.ts';
import { LocalRuntime } from '../../src/gateway/runtimes/local.ts';
import type { CommandRunner } from '../../src/gateway/runtimes/types.ts';
import { loadTaskFile } from '../../src/rollout/task-file.ts';
import { uploadSourceProblems } from '../../src/core/upload-roots.ts';
import { GatewayNode } from '../../src/gateway/node.ts';
import { RolloutServer } from '../../src/rollout/server.ts';
import { openStore } from '../../src/store/index.ts';
import { taskRequest } from '../support/tasks.ts';

const repo = resolve(import.meta.dir, '..', '..');
const bun = process.execPath;
const scratch = mkdtempSync(join(tmpdir(), 'polar-security-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const payload = join(scratch, 'payload.txt');
writeFileSync(payload, 'pwned\n');
const payloadDir = join(scratch, 'payload-dir');
mkdirSync(join(payloadDir, 'sub'), { recursive: true });
writeFileSync(join(payloadDir, 'sub', 'x.txt'), 'pwned\n');

test('confineDest: relative paths that stay inside are normalised; absolute paths and .. escapes are errors', () => {
  expect(confineDest('.')).toBe('.');
  expect(confineDest('./')).toBe('.');
  expect(confineDest('src/app.py')).toBe('src/app.py');
  expect(confineDest('a/../b/')).toBe('b');
  expect(confineDest('a/./b//c')).toBe('a/b/c');
  expect(() => confineDest('/etc/x')).toThrow(/absolute/);
  expect(() => confineDest('../../../escaped')).toThrow(/leaves the session work directory/);
  expect(() => confineDest('a/../../x')).toThrow(/leaves/);
  expect(() => confineDest('..')).toThrow(/leaves/);
  expect(() => confineDest('a\\..\\..\\x')).toThrow(/leaves/);
  expect(() => confineDest('')).toThrow(/empty/);
});

test('a runtime spec or task file with an escaping dest is rejected before anything runs, naming the field', () => {
  expect(() => parseRuntimeSpec({ kind: 'local', prepare: [{ upload_file: { src: payload, dest: '../../../escaped' } }] }))
    .toThrow(/prepare\[0\]\.upload_file\.dest/);
  expect(() => parseRuntimeSpec({ kind: 'docker', image: 'x', prepare: [{ upload_dir: { src: payloadDir, dest: '/etc' } }] }))
    .toThrow(/absolute/);
  const taskDir = join(scratch, 'bad-task');
  mkdirSync(taskDir, { recursive: true });
  writeFileSync(join(taskDir, 'task.yaml'), [
    'task_id: bad', 'instruction: x', 'timeout_seconds: 10',
    `runtime: {kind: local, prepare: [{upload_file: {src: ${payload}, dest: ../../escaped}}]}`, '',
  ].join('\n'));
  expect(() => loadTaskFile(join(taskDir, 'task.yaml'))).toThrow(/task\.yaml: invalid task file: .*leaves the session work directory/);
});

test('local runtime: prepare uploads cannot write outside the session work directory', async () => {
  const workRoot = join(scratch, 'work-root');
  const rt = new LocalRuntime({ sessionId: 'escape', workRoot, isolation: 'none' });
  await rt.start();
  const outside = join(rt.root, '..', '..', 'escaped');
  await expect(runPrepare(rt, [{ upload_file: { src: payload, dest: '../../escaped' } }])).rejects.toThrow(/prepare action 0: .*leaves/);
  expect(existsSync(outside)).toBe(false);
  await expect(runPrepare(rt, [{ upload_file: { src: payload, dest: join(scratch, 'abs-escaped') } }])).rejects.toThrow(/absolute/);
  expect(existsSync(join(scratch, 'abs-escaped'))).toBe(false);
  // Inside is fine, including `..` that stays inside.
  await runPrepare(rt, [{ upload_file: { src: payload, dest: 'a/../inside.txt' } }, { upload_dir: { src: payloadDir, dest: '.' } }]);
  expect(readFileSync(join(rt.workDir, 'inside.txt'), 'utf8')).toBe('pwned\n');
  expect(readFileSync(join(rt.workDir, 'sub', 'x.txt'), 'utf8')).toBe('pwned\n');
  await rt.stop();
});

test('local runtime: a symlink left by a prepare command does not lead an upload or a file write out of the session', async () => {
  const target = join(scratch, 'symlink-target');
  mkdirSync(target, { recursive: true });
  const rt = new LocalRuntime({ sessionId: 'symlink', workRoot: join(scratch, 'work-root'), isolation: 'none' });
  await rt.start();
  await expect(runPrepare(rt, [
    { exec: { command: `ln -s ${target} link && mkdir real && ln -s ${target} real/sub` } },
    { upload_file: { src: payload, dest: 'link/x.txt' } },
  ])).rejects.toThrow(/resolves outside the session directory/);
  expect(existsSync(join(target, 'x.txt'))).toBe(false);
  // A directory copy whose tree meets the link (real/sub → outside) is refused too.
  await expect(runPrepare(rt, [{ upload_dir: { src: payloadDir, dest: 'real' } }])).rejects.toThrow(/resolves outside/);
  expect(existsSync(join(target, 'x.txt'))).toBe(false);
  await expect(rt.writeFile(join(scratch, 'written-outside.txt'), 'x')).rejects.toThrow(/outside the session directory/);
  expect(existsSync(join(scratch, 'written-outside.txt'))).toBe(false);
  await expect(rt.writeFile('link/y.txt', 'x')).rejects.toThrow(/resolves outside/);
  expect(existsSync(join(target, 'y.txt'))).toBe(false);
  // The session HOME (absolute, inside the session directory) stays writable: harness configs go there.
  await rt.writeFile(join(rt.homeDir, '.config', 'settings.json'), '{}');
  expect(readFileSync(join(rt.homeDir, '.config', 'settings.json'), 'utf8')).toBe('{}');
  await rt.stop();
});

test('container runtime: the same rule relative to the container work dir; nothing reaches the CLI for a bad dest', async () => {
  const calls: string[][] = [];
  const runner: CommandRunner = async (argv) => {
    calls.push(argv);
    return { exitCode: 0, stdout: '', stderr: '', timedOut: false };
  };
  const rt = new ContainerRuntime({ engine: 'docker', sessionId: 'c1', image: 'img', workDir: '/workspace', runner });
  await expect(runPrepare(rt, [{ upload_file: { src: payload, dest: '../etc/passwd' } }])).rejects.toThrow(/leaves/);
  await expect(runPrepare(rt, [{ upload_file: { src: payload, dest: '/etc/passwd' } }])).rejects.toThrow(/absolute/);
  expect(calls).toEqual([]);
  await runPrepare(rt, [{ upload_file: { src: payload, dest: 'src/../conf/app.txt' } }]);
  expect(calls.at(-1)).toEqual(['docker', 'cp', payload, `${rt.name}:/workspace/conf/app.txt`]);
});

test('isLoopbackHost: 127/8, ::1 and localhost only', () => {
  for (const h of ['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]', 'LOCALHOST']) expect(isLoopbackHost(h)).toBe(true);
  for (const h of ['0.0.0.0', '::', '10.0.0.11', '192.168.1.5', 'box.example.com', '127.example.com']) expect(isLoopbackHost(h)).toBe(false);
});

test('checkListenSecurity: refuses exposed listeners without a token, allows them with one, warns loudly when insecure', () => {
  const exposed = [{ key: 'rollout.host', host: '0.0.0.0' }, { key: 'gateway.nodes[0].host', host: '127.0.0.1' }];
  let error: unknown;
  try {
    checkListenSecurity('polar serve', exposed, { token: null, insecure: false });
  } catch (thrown) {
    error = thrown;
  }
  expect(error).toBeInstanceOf(UsageError);
  expect((error as Error).message).toContain('rollout.host = 0.0.0.0');
  expect((error as Error).message).not.toContain('gateway.nodes[0].host');
  expect((error as Error).message).toContain('POLAR_CONTROL_TOKEN');
  expect((error as Error).message).toContain('--insecure-no-token');

  const lines: string[] = [];
  checkListenSecurity('polar serve', exposed, { token: 'secret', insecure: false, warn: (l) => lines.push(l) });
  expect(lines).toEqual([]);
  checkListenSecurity('polar serve', [{ key: 'rollout.host', host: '127.0.0.1' }], { token: null, insecure: false, warn: (l) => lines.push(l) });
  expect(lines).toEqual([]);
  checkListenSecurity('polar serve', exposed, { token: null, insecure: true, warn: (l) => lines.push(l) });
  expect(lines.join('\n')).toMatch(/WARNING polar serve: listening on rollout\.host = 0\.0\.0\.0 WITHOUT/);

  // The simulator has no token check: a token does not make an exposed one safe.
  expect(() => checkListenSecurity('polar serve', [{ key: 'sim.host', host: '0.0.0.0', unguarded: true }], { token: 'secret', insecure: false }))
    .toThrow(/sim\.host = 0\.0\.0\.0/);
});

function polar(args: string[], env: Record<string, string> = {}) {
  const clean = { ...process.env, ...env };
  if (!('POLAR_CONTROL_TOKEN' in env)) delete clean.POLAR_CONTROL_TOKEN;
  return Bun.spawnSync([bun, 'src/main.ts', ...args], { cwd: repo, env: clean, timeout: 30_000 });
}

test('polar serve / rollout / gateway exit 2 on a non-loopback address without a token, naming the fix', () => {
  const config = join(scratch, 'exposed.yaml');
  writeFileSync(config, [
    'rollout: {host: 0.0.0.0, port: 0}',
    `gateway: {nodes: [{node_id: gw-1, host: 0.0.0.0, port: 0, work_root: ${join(scratch, 'w')}}]}`,
    `store: {path: ${join(scratch, 'exposed.db')}}`, '',
  ].join('\n'));
  for (const args of [['serve', '--config', config, '--with-sim'], ['rollout', '--config', config], ['gateway', '--config', config, '--node-id', 'gw-1']]) {
    const run = polar(args);
    const stderr = run.stderr.toString();
    expect(run.exitCode).toBe(2);
    expect(stderr).toContain('refusing to listen on a non-loopback address');
    expect(stderr).toContain('0.0.0.0');
    expect(stderr).toContain('rollout.control_plane_token');
    expect(stderr).toContain('--insecure-no-token');
  }
  // The shipped single-box example listens on loopback only.
  const checked = polar(['config', 'check', 'examples/config/single-box.yaml']);
  expect(checked.exitCode).toBe(0);
  expect(checked.stdout.toString()).toMatch(/rollout:\n {2}host: 127\.0\.0\.1/);
});

describe('upload sources', () => {
  const taskDir = join(scratch, 'upload-task');
  const inside = join(taskDir, 'repo');
  mkdirSync(inside, { recursive: true });
  writeFileSync(join(inside, 'a.txt'), 'a\n');
  symlinkSync('/etc', join(taskDir, 'etc-link'));
  const taskFile = (src: string) => {
    writeFileSync(join(taskDir, 'task.yaml'), ['task_id: up', 'instruction: x', 'timeout_seconds: 10', `runtime: {kind: local, prepare: [{upload_dir: {src: ${src}, dest: .}}]}`, ''].join('\n'));
    return join(taskDir, 'task.yaml');
  };

  test('a task file resolves src against its directory and refuses anything outside it (symlinks followed) unless in an upload root', () => {
    expect(loadTaskFile(taskFile('repo')).task.runtime?.prepare?.[0]).toEqual({ upload_dir: { src: inside, dest: '.' } });
    expect(() => loadTaskFile(taskFile('/etc'))).toThrow(/runtime\.prepare\[0\]\.upload_dir\.src: \/etc is outside the allowed upload roots/);
    expect(() => loadTaskFile(taskFile('../payload-dir'))).toThrow(/outside the allowed upload roots/);
    expect(() => loadTaskFile(taskFile('etc-link'))).toThrow(/outside the allowed upload roots/);
    expect(loadTaskFile(taskFile('/etc'), { uploadRoots: ['/etc'] }).task.runtime?.prepare?.[0]).toEqual({ upload_dir: { src: '/etc', dest: '.' } });
  });

  test('uploadSourceProblems names each offending path; relative sources are refused over the wire', () => {
    expect(uploadSourceProblems([{ upload_file: { src: inside + '/a.txt', dest: 'a' } }, { exec: { command: 'true' } }], [taskDir])).toEqual([]);
    expect(uploadSourceProblems([{ upload_file: { src: '/etc/shadow', dest: 'x' } }], [taskDir])[0]).toMatch(/^runtime\.prepare\[0\]\.upload_file\.src: \/etc\/shadow is outside/);
    expect(uploadSourceProblems([{ upload_file: { src: 'a.txt', dest: 'x' } }], [taskDir])[0]).toMatch(/must be absolute/);
    expect(uploadSourceProblems([{ upload_file: { src: '/etc/shadow', dest: 'x' } }], [])[0]).toMatch(/none configured \(set gateway\.upload_roots\)/);
  });

  test('the rollout server refuses an upload from outside its roots with 400 at submit, naming the field; the node refuses it at dispatch', async () => {
    const store = openStore(':memory:');
    const server = new RolloutServer({ store, uploadRoots: [taskDir] }).start();
    const node = new GatewayNode({ nodeId: 'up', store, workRoot: join(scratch, 'up-work'), uploadRoots: [taskDir], runtimeDefaults: { isolation: 'none' } });
    await node.start();
    try {
      const task = (src: string) => taskRequest(`t-${src.length}`, { runtime: { kind: 'local', prepare: [{ upload_file: { src, dest: 'x' } }] } });
      const refused = await fetch(`${server.url}/rollout/task/submit`, { method: 'POST', body: JSON.stringify(task('/etc/shadow')) });
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { error: string }).error).toMatch(/runtime\.prepare\[0\]\.upload_file\.src: \/etc\/shadow is outside the allowed upload roots/);
      expect(store.tasks.list()).toEqual([]);
      const accepted = await fetch(`${server.url}/rollout/task/submit`, { method: 'POST', body: JSON.stringify(task(join(inside, 'a.txt'))) });
      expect(accepted.status).toBe(200);
      expect(() => node.dispatch({ session_id: 's-up', sample_index: 0, task: task('/etc/shadow') })).toThrow(/outside the allowed upload roots/);
    } finally {
      await node.stop();
      await server.stop();
      store.close();
    }
  });
});
