/**
 * The npm scripts' wrapper (scripts/bun.mjs → scripts/run-child.mjs): a stop signal sent to the wrapper alone reaches
 * Bun once, a terminal-style signal to the wrapper's whole process group also reaches it once (polar treats a second
 * SIGINT/SIGTERM as "force"), a later repeat is passed on, and the wrapper ends the way Bun ended.
 */
import { afterEach, expect, test } from 'bun:test';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { until } from '../support/poll.ts';

const ROOT = resolve(import.meta.dir, '../..');
const dirs: string[] = [];
const procs: ChildProcess[] = [];
afterEach(() => {
  for (const p of procs.splice(0)) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/**
 * A Bun script that logs each SIGINT/SIGTERM it receives to LOG (one line each), says "ready" in READY, and exits with
 * 7 once told to (file STOP exists) or, with DIE_BY=SIGNAL, kills itself with that signal on its first signal.
 */
const CHILD = `
import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
const [log, ready, stop] = process.argv.slice(2);
for (const s of ['SIGINT', 'SIGTERM']) process.on(s, () => {
  appendFileSync(log, s + '\\n');
  if (process.env.DIE_BY) { process.removeAllListeners(process.env.DIE_BY); process.kill(process.pid, process.env.DIE_BY); }
});
writeFileSync(ready, String(process.pid));
const timer = setInterval(() => { if (existsSync(stop)) { clearInterval(timer); process.exit(7); } }, 20);
`;

function startWrapper(env: Record<string, string> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'polar-wrapper-'));
  dirs.push(dir);
  const script = join(dir, 'child.ts');
  writeFileSync(script, CHILD);
  const files = { log: join(dir, 'log'), ready: join(dir, 'ready'), stop: join(dir, 'stop') };
  writeFileSync(files.log, '');
  // detached: the wrapper leads its own process group, so a signal to -pid is what a terminal's Ctrl-C does.
  const wrapper = spawn('node', [join(ROOT, 'scripts/bun.mjs'), script, files.log, files.ready, files.stop], {
    cwd: ROOT, stdio: 'ignore', detached: true, env: { ...process.env, ...env },
  });
  procs.push(wrapper);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => wrapper.on('exit', (code, signal) => done({ code, signal })));
  const received = () => readFileSync(files.log, 'utf8').split('\n').filter(Boolean);
  return { wrapper, files, exited, received };
}

test('SIGTERM to the wrapper pid alone reaches Bun once, and the wrapper exits with Bun\'s code', async () => {
  const w = startWrapper();
  await until(() => existsSync(w.files.ready), 20_000);
  w.wrapper.kill('SIGTERM');
  await until(() => w.received().length > 0, 5_000);
  writeFileSync(w.files.stop, '');
  expect(await w.exited).toEqual({ code: 7, signal: null });
  expect(w.received()).toEqual(['SIGTERM']);
});

test('SIGINT to the wrapper\'s whole process group (Ctrl-C) reaches Bun once, not as a second "force" signal', async () => {
  const w = startWrapper();
  await until(() => existsSync(w.files.ready), 20_000);
  process.kill(-w.wrapper.pid!, 'SIGINT');
  await until(() => w.received().length > 0, 5_000);
  await Bun.sleep(400);
  writeFileSync(w.files.stop, '');
  expect(await w.exited).toEqual({ code: 7, signal: null });
  expect(w.received()).toEqual(['SIGINT']);
});

test('the same signal twice at once is passed on once; again later (to force) it is passed on', async () => {
  const w = startWrapper();
  await until(() => existsSync(w.files.ready), 20_000);
  w.wrapper.kill('SIGINT'); // npm's forwarded copy of the same Ctrl-C
  w.wrapper.kill('SIGINT');
  await until(() => w.received().length > 0, 5_000);
  await Bun.sleep(600);
  expect(w.received()).toEqual(['SIGINT']);
  w.wrapper.kill('SIGINT');
  await until(() => w.received().length > 1, 5_000);
  writeFileSync(w.files.stop, '');
  expect(await w.exited).toEqual({ code: 7, signal: null });
  expect(w.received()).toEqual(['SIGINT', 'SIGINT']);
});

test('Bun killed by a signal: the wrapper ends by the same signal', async () => {
  const w = startWrapper({ DIE_BY: 'SIGTERM' });
  await until(() => existsSync(w.files.ready), 20_000);
  w.wrapper.kill('SIGTERM');
  expect(await w.exited).toEqual({ code: null, signal: 'SIGTERM' });
  expect(w.received()).toEqual(['SIGTERM']);
});
