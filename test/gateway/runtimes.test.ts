/** Runtimes: local (process-group kill, scrubbed env, timeout, files, prepare, diff), docker/podman/apptainer command lines. */
import { afterAll, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { applyDiff, commitBaseline, runPrepare, sessionDiff } from '../../src/gateway/prepare.ts';
import { ApptainerRuntime } from '../../src/gateway/runtimes/apptainer.ts';
import { ContainerRuntime } from '../../src/gateway/runtimes/container.ts';
import { createRuntime, parseRuntimeSpec } from '../../src/gateway/runtimes/index.ts';
import { LocalRuntime } from '../../src/gateway/runtimes/local.ts';
import type { CommandRunner } from '../../src/gateway/runtimes/types.ts';

const root = mkdtempSync(join(tmpdir(), 'polar-rt-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const local = (id: string) => new LocalRuntime({ sessionId: id, workRoot: root, isolation: 'none' });

/** Running (a killed child reparented to a non-reaping init lingers as a zombie: state Z counts as dead). */
const alive = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
};

test('local: killing a spawned harness kills its grandchildren (process group)', async () => {
  const rt = local('pg');
  await rt.start();
  const proc = rt.spawn(['sh', '-c', 'sleep 30 & echo $! > grandchild.pid; wait']);
  const pidFile = join(rt.workDir, 'grandchild.pid');
  for (let i = 0; i < 200 && !existsSync(pidFile); i++) await Bun.sleep(10);
  await Bun.sleep(20);
  const grandchild = Number(readFileSync(pidFile, 'utf8').trim());
  expect(alive(grandchild)).toBe(true);
  await proc.kill();
  for (let i = 0; i < 100 && alive(grandchild); i++) await Bun.sleep(10);
  expect(alive(grandchild)).toBe(false);
  expect((await proc.exited).exitCode).toBeNull();
  await rt.stop();
  expect(existsSync(rt.root)).toBe(false);
});

test('local: a harness that exits leaving a background job is done at its exit; the job is killed with its group', async () => {
  const rt = local('bg');
  await rt.start();
  const started = performance.now();
  const proc = rt.spawn(['sh', '-c', 'sleep 30 & echo $! > bg.pid; echo done; exit 0']);
  const { exitCode } = await proc.exited;
  expect(exitCode).toBe(0);
  expect(proc.stdout()).toContain('done');
  expect(performance.now() - started).toBeLessThan(10_000); // not the 30 s the background job holds stdout open
  const bg = Number(readFileSync(join(rt.workDir, 'bg.pid'), 'utf8').trim());
  for (let i = 0; i < 100 && alive(bg); i++) await Bun.sleep(10);
  expect(alive(bg)).toBe(false);
  await rt.stop();
});

test('local: a child that left the group (setsid) but holds the pipe does not wedge the command', async () => {
  const rt = local('setsid');
  await rt.start();
  const started = performance.now();
  // The pause lets setsid run before the leader exits, so the sleep really is outside the group when it is killed.
  const proc = rt.spawn(['sh', '-c', 'setsid sleep 30 & echo $! > escaped.pid; sleep 0.3; exit 3']);
  expect((await proc.exited).exitCode).toBe(3);
  expect(performance.now() - started).toBeLessThan(10_000); // the pipe stays open for 30 s; we stop waiting after the drain
  // The escapee is out of the group kill's reach (bwrap's --unshare-pid is what contains it); clean it up here.
  const escaped = Number(readFileSync(join(rt.workDir, 'escaped.pid'), 'utf8').trim());
  try { process.kill(escaped, 'SIGKILL'); } catch {}
  await rt.stop();
});

test('local: the environment is scrubbed (no host secrets), HOME/TMPDIR are the session\'s', async () => {
  process.env.POLAR_TEST_SECRET = 'hunter2';
  const rt = local('env');
  await rt.start();
  const r = await rt.exec('env', { env: { EXTRA: 'yes' } });
  delete process.env.POLAR_TEST_SECRET;
  const env = Object.fromEntries(r.stdout.trim().split('\n').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
  expect(env.POLAR_TEST_SECRET).toBeUndefined();
  expect(env.HOME).toBe(rt.homeDir);
  expect(env.TMPDIR).toBe(rt.tmpDir);
  expect(env.EXTRA).toBe('yes');
  const allowed = new Set(['PATH', 'LANG', 'HOME', 'TMPDIR', 'EXTRA', 'PWD', 'SHLVL', '_', 'OLDPWD']);
  expect(Object.keys(env).filter((k) => !allowed.has(k))).toEqual([]);
  // The session directory name does not reveal the session id (it is the API key).
  expect(basename(rt.root)).toMatch(/^s-[0-9a-f]{20}$/);
  await rt.stop();
});

test('local: exec timeout kills the group and reports timedOut; abort signal too', async () => {
  const rt = local('to');
  await rt.start();
  const started = Date.now();
  const r = await rt.exec('sleep 20 & sleep 20; echo never', { timeoutMs: 100 });
  expect(r).toMatchObject({ exitCode: null, timedOut: true });
  expect(r.stdout).not.toContain('never');
  expect(Date.now() - started).toBeLessThan(5000);
  const ctl = new AbortController();
  setTimeout(() => ctl.abort(), 50);
  const aborted = await rt.exec('sleep 20', { signal: ctl.signal });
  expect(aborted).toMatchObject({ exitCode: null, timedOut: false });
  expect((await rt.exec('exit 3')).exitCode).toBe(3);
  await rt.stop();
});

test('local: the bubblewrap command line binds only what the module doc lists; required bwrap missing fails at start', async () => {
  const rt = new LocalRuntime({ sessionId: 'bw', workRoot: root, bwrapPath: '/usr/bin/bwrap', extraPath: ['/opt/h/pkg@1/node_modules/.bin'] });
  expect(rt.isolation).toBe('bwrap');
  const argv = rt.wrap(['echo', 'hi'], rt.workDir);
  const line = argv.join(' ');
  expect(argv[0]).toBe('/usr/bin/bwrap');
  for (const flag of ['--unshare-user', '--unshare-pid', '--unshare-net', '--die-with-parent', '--new-session', '--cap-drop ALL', '--proc /proc', '--tmpfs /tmp', '--ro-bind /usr /usr']) {
    expect(line).toContain(flag);
  }
  expect(line).not.toMatch(/--ro-bind \/ \//);
  expect(line).not.toContain(`--bind ${rt.root} `);
  for (const dir of [rt.workDir, rt.homeDir, rt.tmpDir]) expect(line).toContain(`--bind ${dir} ${dir}`);
  expect(line).toContain('--ro-bind-try /opt/h/pkg@1 /opt/h/pkg@1');
  expect(argv.slice(-3)).toEqual(['--', 'echo', 'hi']);
  // network host keeps the host network; isolation none is a plain argv.
  expect(new LocalRuntime({ sessionId: 'bw', workRoot: root, bwrapPath: '/usr/bin/bwrap', network: 'host' }).wrap(['x'], '/').join(' ')).not.toContain('--unshare-net');
  const off = new LocalRuntime({ sessionId: 'bw', workRoot: root, isolation: 'none', bwrapPath: '/usr/bin/bwrap' });
  expect(off.wrap(['echo'], '/')).toEqual(['echo']);
  const required = new LocalRuntime({ sessionId: 'bw2', workRoot: root, bwrapPath: null });
  await expect(required.start()).rejects.toThrow(/bwrap\) is not installed.*runtime\.isolation: none/);
});

test('prepare: upload_dir, upload_file, exec with retries; baseline + diff + apply into a fresh runtime', async () => {
  const src = join(root, 'repo-src');
  mkdirSync(src, { recursive: true });
  writeFileSync(join(src, 'a.txt'), 'one\n');
  const note = join(root, 'note.txt');
  writeFileSync(note, 'note\n');
  const spec = parseRuntimeSpec({
    kind: 'local',
    prepare: [
      { upload_dir: { src, dest: '.' } }, { upload_file: { src: note, dest: 'docs/note.txt' } },
      // Fails on the first try, succeeds on the second.
      { exec: { command: 'if [ -f .tried ]; then echo ok > prepared; else touch .tried; exit 1; fi', retries: 2, backoff_ms: 5 } },
    ],
  }, { isolation: 'none' });
  const rt = createRuntime(spec, { instanceKey: 'prep', workRoot: root, toolDirs: [] });
  await rt.start();
  await runPrepare(rt, spec.prepare);
  expect(readFileSync(join(rt.workDir, 'docs/note.txt'), 'utf8')).toBe('note\n');
  expect(readFileSync(join(rt.workDir, 'prepared'), 'utf8')).toBe('ok\n');
  await commitBaseline(rt);
  writeFileSync(join(rt.workDir, 'a.txt'), 'two\n');
  writeFileSync(join(rt.workDir, 'new.txt'), 'new\n');
  const diff = await sessionDiff(rt);
  expect(diff).toContain('+two');
  expect(diff).toContain('new.txt');
  const fresh = createRuntime(spec, { instanceKey: 'prep:eval', workRoot: root, toolDirs: [] });
  await fresh.start();
  await runPrepare(fresh, spec.prepare);
  await commitBaseline(fresh);
  await applyDiff(fresh, diff);
  expect(readFileSync(join(fresh.workDir, 'a.txt'), 'utf8')).toBe('two\n');
  expect(readFileSync(join(fresh.workDir, 'new.txt'), 'utf8')).toBe('new\n');
  const failing = parseRuntimeSpec({ prepare: [{ exec: { command: 'echo boom >&2; exit 4', retries: 1, backoff_ms: 1 } }] });
  await expect(runPrepare(rt, failing.prepare)).rejects.toThrow(/prepare action 0 .*exit 4: boom/);
  await rt.stop();
  await fresh.stop();
});

test('runtime spec: bad input is a clear error', () => {
  expect(() => parseRuntimeSpec({ kind: 'vm' })).toThrow(/invalid runtime section/);
  expect(() => parseRuntimeSpec({ prepare: [{ exec: {} }] })).toThrow(/invalid runtime section/);
  expect(() => createRuntime(parseRuntimeSpec({ kind: 'docker' }), { instanceKey: 'x', workRoot: root, toolDirs: [] })).toThrow(/needs an image/);
});

function recordingRunner(): { runner: CommandRunner; calls: string[][] } {
  const calls: string[][] = [];
  return { calls, runner: async (argv) => { calls.push(argv); return { exitCode: 0, stdout: 'out', stderr: '', timedOut: false }; } };
}

for (const engine of ['docker', 'podman'] as const) {
  test(`${engine}: run/exec/cp/rm command lines`, async () => {
    const { runner, calls } = recordingRunner();
    const rt = new ContainerRuntime({ engine, sessionId: 's1', image: 'python:3.12', readOnlyMounts: ['/cache'], runner });
    await rt.start();
    expect(calls[0]).toEqual([
      engine, 'run', '-d', '--rm', '--init', '--name', rt.name, '--network', 'none', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges',
      '-e', 'HOME=/polar/home', '-e', 'TMPDIR=/polar/tmp', '-v', '/cache:/cache:ro', 'python:3.12', 'sleep', 'infinity',
    ]);
    expect(calls[1]).toEqual([engine, 'exec', '--privileged', rt.name, 'mkdir', '-p', '/workspace', '/polar/home', '/polar/tmp']);
    expect(rt.name).not.toContain('s1');
    const r = await rt.exec('pytest -q', { env: { A: '1' }, cwd: 'sub' });
    expect(r.stdout).toBe('out');
    expect(calls[2]).toEqual([engine, 'exec', '-w', '/workspace/sub', '-e', 'A=1', rt.name, 'sh', '-c', 'echo $$ > "$0"; exec "$@"', '/polar/tmp/exec-1.pgid', 'sh', '-c', 'pytest -q']);
    const dir = mkdtempSync(join(root, 'up-'));
    await rt.upload(dir, 'repo');
    expect(calls.at(-1)).toEqual([engine, 'cp', `${dir}/.`, `${rt.name}:/workspace/repo`]);
    await rt.download('/workspace/out.txt', '/tmp/x');
    expect(calls.at(-1)).toEqual([engine, 'cp', `${rt.name}:/workspace/out.txt`, '/tmp/x']);
    await rt.stop();
    expect(calls.at(-1)).toEqual(engine === 'podman' ? [engine, 'rm', '-f', '-t', '0', rt.name] : [engine, 'rm', '-f', rt.name]);
  });
}

test('docker/podman: runtime.binary, limits and network reach the command lines', async () => {
  const { runner, calls } = recordingRunner();
  // binary and limits are node settings; a task may not loosen the node's network.
  const spec = parseRuntimeSpec({ kind: 'podman', image: 'img' }, { binary: '/opt/bin/podman-4', network: 'host', limits: { cpus: 1.5, memory: '512m', pids: 100 } });
  const rt = createRuntime(spec, { instanceKey: 'lim', workRoot: root, toolDirs: [], runner });
  await rt.start();
  const run = calls[0]!;
  expect(run[0]).toBe('/opt/bin/podman-4');
  expect(run.join(' ')).toContain('--network host');
  expect(run.join(' ')).toContain('--cpus 1.5 --memory 536870912b --memory-swap 536870912b --pids-limit 100');
  expect(calls.every((c) => c[0] === '/opt/bin/podman-4')).toBe(true);
  const apptainer = createRuntime(parseRuntimeSpec({ kind: 'apptainer', image: 'x.sif' }, { binary: '/opt/apptainer/bin/apptainer' }), { instanceKey: 'a', workRoot: root, toolDirs: [], runner });
  await apptainer.start();
  expect(calls.at(-1)![0]).toBe('/opt/apptainer/bin/apptainer');
  expect(() => parseRuntimeSpec({}, { limits: { memory: 'lots' } })).toThrow(/limits\.memory/);
  expect(() => parseRuntimeSpec({ kind: 'local', limits: { pids: 1 } })).toThrow(/limits: unknown key/);
  expect(() => parseRuntimeSpec({ network: 'bridge' })).toThrow(/network/);
  // A task tightens, never loosens: network none under gateway is fine, host is not; it cannot switch bwrap off.
  expect(parseRuntimeSpec({ kind: 'local', network: 'none' }, { network: 'gateway' }).network).toBe('none');
  expect(() => parseRuntimeSpec({ kind: 'local', network: 'host' }, { network: 'gateway' })).toThrow(/may tighten the node's network \(gateway\), not loosen it to host/);
  expect(() => parseRuntimeSpec({ kind: 'local', isolation: 'none' })).toThrow(/cannot turn the sandbox off/);
  expect(parseRuntimeSpec({ kind: 'local', isolation: 'none' }, { isolation: 'none' }).isolation).toBe('none');
});

test('docker: a timed-out exec kills its process group inside the container', async () => {
  const calls: string[][] = [];
  const runner: CommandRunner = (argv, opts) => {
    calls.push(argv);
    if (argv[1] === 'exec' && argv.includes('echo $$ > "$0"; exec "$@"')) {
      return new Promise((resolve) => opts?.signal?.addEventListener('abort', () => resolve({ exitCode: 137, stdout: '', stderr: '', timedOut: false })) ?? setTimeout(() => resolve({ exitCode: 137, stdout: '', stderr: '', timedOut: false }), 200));
    }
    return Promise.resolve({ exitCode: 0, stdout: '', stderr: '', timedOut: false });
  };
  const rt = new ContainerRuntime({ engine: 'docker', sessionId: 's2', image: 'img', runner });
  const r = await rt.exec('sleep 100', { timeoutMs: 20 });
  expect(r).toMatchObject({ exitCode: null, timedOut: true });
  expect(calls.some((c) => c.join(' ').includes('kill -KILL -"$(cat /polar/tmp/exec-1.pgid)"'))).toBe(true);
});

test('apptainer: instance start / exec / stop command lines; files through the bound session dir', async () => {
  const { runner, calls } = recordingRunner();
  const rt = new ApptainerRuntime({ sessionId: 's3', image: '/images/py.sif', workRoot: root, runner });
  await rt.start();
  expect(calls[0]).toEqual([
    'apptainer', 'instance', 'start', '--containall', '--cleanenv', '--bind', `${rt.hostRoot}:/polar`,
    '--home', `${rt.hostRoot}/home:/polar/home`, '/images/py.sif', rt.name,
  ]);
  await rt.exec('make test', { env: { K: 'v' } });
  expect(calls[1]).toEqual(['apptainer', 'exec', '--cleanenv', '--pwd', '/polar/work', '--env', 'TMPDIR=/polar/tmp', '--env', 'K=v', `instance://${rt.name}`, 'sh', '-c', 'make test']);
  await rt.writeFile('cfg/x.json', '{}');
  expect(readFileSync(join(rt.hostRoot, 'work/cfg/x.json'), 'utf8')).toBe('{}');
  await expect(rt.writeFile('/etc/passwd', 'x')).rejects.toThrow(/outside \/polar/);
  await rt.stop();
  expect(calls.at(-1)).toEqual(['apptainer', 'instance', 'stop', rt.name]);
  expect(existsSync(rt.hostRoot)).toBe(false);
});
