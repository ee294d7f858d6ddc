/**
 * `--engine-url` as replicas (src/cli/engine-urls.ts): repeatable and comma-separated on `polar proxy`, `polar run`,
 * `polar gateway` and `polar serve`; two or more URLs route over replicas, so a dead first URL no longer fails calls.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { collectEngineUrls, engineUrlFields } from '../../src/cli/engine-urls.ts';
import { openStore } from '../../src/store/index.ts';
import { startFakeEngine, type FakeEngine } from '../support/fake-engine.ts';
import { lineMatching, REPO_ROOT, runPolarSync, startPolarProxy } from '../support/polar-cli.ts';

const DEAD = 'http://127.0.0.1:9';
let engine: FakeEngine;
const dir = mkdtempSync(join(tmpdir(), 'polar-engine-urls-'));

beforeAll(async () => {
  engine = await startFakeEngine({ shape: 'vllm', script: [{ kind: 'text', text: 'from a replica' }] });
});
afterAll(async () => {
  await engine.stop();
  rmSync(dir, { recursive: true, force: true });
});

test('values collect across repeats and commas; a bad or repeated URL is a usage error naming it', () => {
  expect(collectEngineUrls('http://a:1, http://b:2', undefined)).toEqual(['http://a:1', 'http://b:2']);
  expect(collectEngineUrls('http://c:3', ['http://a:1'])).toEqual(['http://a:1', 'http://c:3']);
  expect(() => collectEngineUrls('http://a:1,', undefined)).toThrow(/"" is not an http\(s\) URL/);
  expect(() => collectEngineUrls('ftp://a', undefined)).toThrow(/"ftp:\/\/a" is not an http\(s\) URL/);
  expect(engineUrlFields(['http://a:1'])).toEqual({ url: 'http://a:1', urls: [] });
  expect(engineUrlFields(['http://a:1', 'http://b:2'])).toEqual({ url: 'http://a:1', urls: ['http://a:1', 'http://b:2'] });
  expect(() => engineUrlFields(['http://a:1', 'http://a:1'])).toThrow(/given twice/);
  const bad = runPolarSync(['proxy', '--port', '0', '--engine', 'vllm', '--engine-url', `${engine.url},not-a-url`]);
  expect(bad.exitCode).toBe(2);
  expect(bad.stderr.toString()).toContain('"not-a-url" is not an http(s) URL');
});

async function chat(url: string, key: string) {
  return fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }) });
}

test('polar proxy: a dead URL alone fails the call; with a live replica beside it (comma or repeated flag) the replica answers', async () => {
  for (const [name, urlArgs] of [['alone', ['--engine-url', DEAD]], ['comma', ['--engine-url', `${DEAD},${engine.url}`]], ['repeated', ['--engine-url', DEAD, '--engine-url', engine.url]]] as const) {
    const db = join(dir, `proxy-${name}.db`);
    const { proc, url } = await startPolarProxy(['--port', '0', '--engine', 'vllm', ...urlArgs, '--timeout-ms', '3000', '--db', db], dir);
    try {
      const response = await chat(url, `s-${name}`);
      if (name === 'alone') {
        expect(response.status).toBeGreaterThanOrEqual(500);
        continue;
      }
      expect(response.status).toBe(200);
      expect(((await response.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe('from a replica');
      const replicas = ((await (await fetch(`${url}/admin/engine/replicas`)).json()) as { replicas: { url: string; healthy: boolean }[] }).replicas;
      expect(replicas.map((r) => [r.url, r.healthy])).toEqual([[DEAD, false], [engine.url, true]]);
    } finally {
      proc.kill('SIGTERM');
      expect(await proc.exited).toBe(0);
    }
    const store = openStore(db);
    expect(store.completions.listBySession(`s-${name}`).map((r) => r.engine_id)).toEqual([`vllm@${engine.url}`]);
    store.close();
  }
});

test('polar gateway: --engine-url replaces the config file\'s engine.url', async () => {
  const config = join(dir, 'gateway.json');
  writeFileSync(config, JSON.stringify({
    engine: { kind: 'vllm', url: DEAD },
    store: { path: join(dir, 'gateway.db') },
    gateway: { nodes: [{ node_id: 'g', host: '127.0.0.1', port: 0, runtime: { kind: 'local', isolation: 'none' }, work_root: join(dir, 'work'), harness_cache_dir: join(dir, 'harnesses') }] },
  }));
  const health = async (extra: string[]) => {
    const proc = Bun.spawn([process.execPath, join(REPO_ROOT, 'src/main.ts'), 'gateway', '--config', config, ...extra], { cwd: dir, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' });
    try {
      const line = await lineMatching(proc.stdout, /listening on http/);
      const url = /listening on (http:\/\/\S+)/.exec(line)![1]!;
      return ((await (await fetch(`${url}/health`)).json()) as { engine: { ok: boolean } }).engine;
    } finally {
      proc.kill('SIGTERM');
      await proc.exited;
    }
  };
  expect((await health([])).ok).toBe(false);
  expect((await health(['--engine-url', engine.url])).ok).toBe(true);
  expect((await health(['--engine-url', `${DEAD},${engine.url}`])).ok).toBe(true);
});
