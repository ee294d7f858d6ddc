/** `polar doctor`'s checks: each one can fail, and says what to fix. */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runDoctor, type DoctorCheck } from '../../src/cli/doctor.ts';
import { startFakeEngine, type FakeEngine } from '../support/fake-engine.ts';

const dir = mkdtempSync(join(tmpdir(), 'polar-doctor-'));
let engine: FakeEngine;
beforeAll(async () => {
  engine = await startFakeEngine({ shape: 'vllm', servedModel: 'qwen3-doctor' });
});
afterAll(async () => {
  await engine.stop();
  rmSync(dir, { recursive: true, force: true });
});

const byName = (checks: DoctorCheck[], name: string) => checks.find((c) => c.name === name)!;

test('a reachable engine with sound capture, free ports, loopback host: nothing fails', async () => {
  const checks = await runDoctor({ engine: 'vllm', engineUrl: engine.url, cache: dir, workRoot: dir, minFreeBytes: 0, ports: [0] });
  expect(checks.filter((c) => c.status === 'fail')).toEqual([]);
  expect(byName(checks, 'engine').detail).toContain('qwen3-doctor');
  expect(byName(checks, 'token capture').status).toBe('ok');
  expect(byName(checks, 'harness pi')).toMatchObject({ status: 'warn', fix: 'polar harness install pi (or --from a pack)' });
});

test('unreachable engine, a required harness missing, a port in use, too little disk, no token off loopback: each fails', async () => {
  const held = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('') });
  try {
    const checks = await runDoctor({
      engine: 'vllm', engineUrl: 'http://127.0.0.1:1', harness: ['pi'], cache: dir, workRoot: dir, minFreeBytes: Number.MAX_SAFE_INTEGER,
      ports: [held.port!], host: '127.0.0.1', adminToken: undefined,
    });
    expect(byName(checks, 'engine').status).toBe('fail');
    expect(byName(checks, 'harness pi').status).toBe('fail');
    expect(byName(checks, `port ${held.port}`).status).toBe('fail');
    expect(byName(checks, 'disk').status).toBe('fail');
  } finally {
    await held.stop(true);
  }
  const saved = process.env.POLAR_ADMIN_TOKEN;
  delete process.env.POLAR_ADMIN_TOKEN;
  try {
    const open = await runDoctor({ cache: dir, workRoot: dir, minFreeBytes: 0, host: '0.0.0.0' });
    expect(byName(open, 'admin token')).toMatchObject({ status: 'fail', fix: 'set --admin-token or $POLAR_ADMIN_TOKEN' });
    const withToken = await runDoctor({ cache: dir, workRoot: dir, minFreeBytes: 0, host: '0.0.0.0', adminToken: 't' });
    expect(byName(withToken, 'admin token').status).toBe('ok');
  } finally {
    if (saved !== undefined) process.env.POLAR_ADMIN_TOKEN = saved;
  }
});

test('no node on PATH: an installed JavaScript harness is reported as running on polar\'s own Bun', async () => {
  const { mkdirSync, writeFileSync, symlinkSync } = await import('node:fs');
  const cache = join(dir, 'cache');
  const bin = join(cache, '@mariozechner+pi-coding-agent@0.73.1', 'node_modules', '.bin');
  mkdirSync(bin, { recursive: true });
  writeFileSync(join(bin, 'pi-real'), '');
  symlinkSync('pi-real', join(bin, 'pi'));
  writeFileSync(join(cache, '@mariozechner+pi-coding-agent@0.73.1', '.installed'), 'now');
  const checks = await runDoctor({ cache, workRoot: dir, minFreeBytes: 0, path: join(dir, 'empty-path') });
  expect(byName(checks, 'harness pi').detail).toContain("runs on polar's own Bun");
  expect(byName(checks, 'bubblewrap').status).toBe('warn');
});

test('polar doctor\'s flags reach the checks (the CLI, --json)', async () => {
  const { runPolar } = await import('../support/polar-cli.ts');
  const doctor = async (args: string[]) => {
    const run = await runPolar(['doctor', '--cache', dir, '--work-root', dir, '--json', ...args]);
    return { code: run.code, stderr: run.stderr, checks: run.code === 2 ? [] : (JSON.parse(run.stdout) as DoctorCheck[]) };
  };
  const held = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('') });
  try {
    const a = await doctor(['--engine', 'vllm', '--engine-url', engine.url, '--served-model', 'qwen3-doctor', '--harness', 'pi', '--min-free-gib', '0', '--port', String(held.port), '--host', '127.0.0.1']);
    expect(a.code).toBe(1);
    expect(byName(a.checks, 'engine')).toMatchObject({ status: 'ok', detail: expect.stringContaining('serves qwen3-doctor') });
    expect(byName(a.checks, 'harness pi').status).toBe('fail');
    expect(byName(a.checks, `port ${held.port}`).status).toBe('fail');
    expect(byName(a.checks, 'disk').status).toBe('ok');
  } finally {
    await held.stop(true);
  }
  const served = await doctor(['--engine-url', engine.url, '--served-model', 'not-served', '--min-free-gib', '0']);
  expect(byName(served.checks, 'engine')).toMatchObject({ status: 'fail', detail: expect.stringContaining('not-served') });
  const disk = await doctor(['--min-free-gib', '1e12']);
  expect(byName(disk.checks, 'disk').status).toBe('fail');
  const open = await doctor(['--min-free-gib', '0', '--host', '0.0.0.0', '--admin-token', 't']);
  expect(byName(open.checks, 'admin token')).toMatchObject({ status: 'ok', detail: 'set for non-loopback 0.0.0.0' });
  const token = await doctor(['--engine-url', engine.url, '--mode', 'token', '--tokenizer', join(dir, 'no-tokenizer'), '--min-free-gib', '0']);
  expect(byName(token.checks, 'engine')).toMatchObject({ status: 'fail', detail: expect.stringContaining(join(dir, 'no-tokenizer')) });
  // --tokenizer has no effect in chat mode: refused rather than ignored.
  const chat = await doctor(['--engine-url', engine.url, '--tokenizer', join(dir, 'no-tokenizer')]);
  expect(chat.code).toBe(2);
  expect(chat.stderr).toContain('--tokenizer applies to --mode token');
}, 60_000);
