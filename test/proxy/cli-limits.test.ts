/**
 * `polar proxy` body limit as a process: a body over `--max-body-bytes` (default 64 MiB; the server's own limit is set
 * above it) gets 413 in the caller's error shape, not Bun's empty 413; a bad value exits 2.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startFakeEngine, type FakeEngine } from '../support/fake-engine.ts';
import { startPolarProxy } from '../support/polar-cli.ts';

const root = join(import.meta.dir, '..', '..');
const bun = process.execPath;
const dir = mkdtempSync(join(tmpdir(), 'polar-proxy-limits-'));
let engine: FakeEngine;

beforeAll(async () => {
  engine = await startFakeEngine({ shape: 'vllm', script: [{ kind: 'text', text: 'ok' }] });
});
afterAll(async () => {
  await engine.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function startProxy(extra: string[]): Promise<{ url: string; stop(): Promise<number> }> {
  const { proc, url } = await startPolarProxy(['--port', '0', '--engine', 'vllm', '--engine-url', engine.url, '--db', join(dir, 'p.db'), ...extra], dir);
  return {
    url,
    async stop() {
      proc.kill('SIGTERM');
      return proc.exited;
    },
  };
}

// A body over the limit gets 413 in the caller's own error shape (not Bun's empty 413). A 1 MB body against a 64 KiB
// limit takes the same path as 150 MB against the 64 MiB default, without pushing 300 MB through loopback (a client
// still sending after the server answered made that test slow and flaky on a loaded 2-core machine).
test('a body over the limit → 413 in the Anthropic / Gemini shape', async () => {
  const limit = 64 * 1024;
  const proxy = await startProxy(['--max-body-bytes', String(limit)]);
  try {
    const body = new Uint8Array(1024 * 1024).fill(0x20);
    const anthropic = await fetch(`${proxy.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': 'big' }, body });
    expect(anthropic.status).toBe(413);
    const error = (await anthropic.json()) as any;
    expect(error).toMatchObject({ type: 'error', error: { type: 'request_too_large' } });
    expect(error.error.message).toContain(`limit of ${limit} bytes`);
    const gemini = await fetch(`${proxy.url}/v1beta/models/m:generateContent`, { method: 'POST', headers: { 'x-goog-api-key': 'big' }, body });
    expect(gemini.status).toBe(413);
    expect(((await gemini.json()) as any).error.code).toBe(413);
  } finally {
    expect(await proxy.stop()).toBe(0);
  }
});

test('--max-body-bytes lowers the limit; a bad value is a usage error', async () => {
  const bad = Bun.spawnSync([bun, join(root, 'src/main.ts'), 'proxy', '--port', '0', '--engine', 'vllm', '--engine-url', engine.url, '--max-body-bytes', 'lots'], { cwd: dir, stderr: 'pipe' });
  expect(bad.exitCode).toBe(2);
  expect(bad.stderr.toString()).toContain('--max-body-bytes');
  const proxy = await startProxy(['--max-body-bytes', '200']);
  try {
    const small = JSON.stringify({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] });
    const ok = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer lim' }, body: small });
    expect(ok.status).toBe(200);
    const big = JSON.stringify({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x'.repeat(300) }] });
    const rejected = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer lim' }, body: big });
    expect(rejected.status).toBe(413);
    expect(((await rejected.json()) as any).error.message).toContain('limit of 200 bytes');
  } finally {
    expect(await proxy.stop()).toBe(0);
  }
});
