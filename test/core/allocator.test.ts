/**
 * The serving commands' allocator setting (src/core/allocator.ts): `polar proxy` started without
 * MIMALLOC_PURGE_DELAY runs with it set to PURGE_DELAY and hole purging off, as the same process (pid) with the same
 * argv, and serves; a value the caller sets is kept; other commands and other platforms are left alone. What the
 * setting does to CPU and RSS is measured in bench/ (proxy-cpu `-c64` variants, RSS at the end of the load and later).
 */
import { afterEach, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ALLOCATOR_ENV, needsAllocatorSetting, PURGE_DELAY } from '../../src/core/allocator.ts';
import { REPO_ROOT, startPolarProxy } from '../support/polar-cli.ts';

const dirs: string[] = [];
const procs: { kill(): void }[] = [];
afterEach(() => {
  for (const p of procs.splice(0)) p.kill();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** `polar proxy` with `env` (added to this process's, MIMALLOC_PURGE_DELAY removed first); resolves once it listens. */
async function proxyWith(env: Record<string, string>): Promise<{ pid: number; url: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'polar-allocator-'));
  dirs.push(dir);
  const { MIMALLOC_PURGE_DELAY: _, MIMALLOC_PURGE_HOLES: __, ...inherited } = process.env;
  const { proc, url } = await startPolarProxy(['--port', '0', '--engine', 'vllm', '--engine-url', 'http://127.0.0.1:9', '--db', join(dir, 'polar.db')], dir, { ...inherited, ...env });
  procs.push(proc);
  return { pid: proc.pid, url };
}

const environOf = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
const argvOf = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((a) => a !== '');

test.skipIf(process.platform !== 'linux')('polar proxy without MIMALLOC_PURGE_DELAY re-executes itself with it (same pid, same argv) and serves', async () => {
  const { pid, url } = await proxyWith({ POLAR_TEST_MARK: 'kept' });
  const env = environOf(pid);
  expect(env).toContain(`MIMALLOC_PURGE_DELAY=${PURGE_DELAY}`);
  expect(env).toContain('MIMALLOC_PURGE_HOLES=0');
  expect(env).toContain('POLAR_TEST_MARK=kept');
  expect(argvOf(pid).slice(1)).toEqual([join(REPO_ROOT, 'src/main.ts'), 'proxy', '--port', '0', '--engine', 'vllm', '--engine-url', 'http://127.0.0.1:9', '--db', expect.stringContaining('polar.db')]);
  expect((await fetch(`${url}/health`)).status).toBeLessThan(600);
});

test.skipIf(process.platform !== 'linux')('a MIMALLOC_PURGE_DELAY the caller sets is kept', async () => {
  const { pid } = await proxyWith({ MIMALLOC_PURGE_DELAY: '250' });
  const env = environOf(pid);
  expect(env).toContain('MIMALLOC_PURGE_DELAY=250');
  expect(env.filter((e) => e.startsWith('MIMALLOC_PURGE_DELAY='))).toHaveLength(1);
  expect(env.some((e) => e.startsWith('MIMALLOC_PURGE_HOLES='))).toBe(false); // no re-execution, nothing added
});

test.skipIf(process.platform !== 'linux')('the re-execution keeps a MIMALLOC_PURGE_HOLES the caller sets and adds the delay', async () => {
  const { pid } = await proxyWith({ MIMALLOC_PURGE_HOLES: '1' });
  const env = environOf(pid);
  expect(env).toContain(`MIMALLOC_PURGE_DELAY=${ALLOCATOR_ENV.MIMALLOC_PURGE_DELAY}`);
  expect(env.filter((e) => e.startsWith('MIMALLOC_PURGE_HOLES='))).toEqual(['MIMALLOC_PURGE_HOLES=1']);
});

test('only serving commands on Linux whose environment leaves the variable unset re-execute', () => {
  for (const command of ['proxy', 'gateway', 'serve', 'rollout', 'run', 'train-demo', 'sim']) expect(needsAllocatorSetting(command, {}, 'linux')).toBe(true);
  for (const command of ['version', 'export', 'trace', 'results', 'config', 'submit', undefined]) expect(needsAllocatorSetting(command, {}, 'linux')).toBe(false);
  expect(needsAllocatorSetting('proxy', { MIMALLOC_PURGE_DELAY: '100' }, 'linux')).toBe(false);
  expect(needsAllocatorSetting('proxy', {}, 'darwin')).toBe(false);
});
