/**
 * `polar proxy` flags that shape every engine call reach it: the sampling defaults (--temperature, --top-p, --top-k,
 * --min-p, --max-tokens) fill what a request leaves out, --engine-api-key (else $POLAR_ENGINE_API_KEY) is the engine's
 * bearer token, and --policy-version is stamped on the records.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { join } from 'node:path';
import { openStore } from '../../src/store/index.ts';
import { startFakeEngine, type FakeEngine } from '../support/fake-engine.ts';
import { startPolarProxy, useScratch } from '../support/polar-cli.ts';

const { dir, procs } = useScratch('polar-proxy-flags-');
let engine: FakeEngine;
beforeAll(async () => {
  engine = await startFakeEngine({ shape: 'vllm', script: [{ kind: 'text', text: 'hi there' }] });
});
afterAll(() => engine.stop());

async function chat(url: string, key: string): Promise<void> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hello' }] }),
  });
  expect(res.status).toBe(200);
}

test('sampling defaults, --engine-api-key and --policy-version reach the engine and the records', async () => {
  const db = join(dir, 'flags.db');
  const { proc, url } = await startPolarProxy([
    '--port', '0', '--engine', 'vllm', '--engine-url', engine.url, '--db', db, '--engine-api-key', 'flag-key',
    '--temperature', '0.3', '--top-p', '0.8', '--top-k', '5', '--min-p', '0.1', '--max-tokens', '42', '--policy-version', 'v7',
  ], dir, { ...process.env, POLAR_ENGINE_API_KEY: 'env-key' });
  procs.push(proc);
  const before = engine.chatRequests().length;
  await chat(url, 'sess-flags');
  const sent = engine.chatRequests().slice(before);
  expect(sent).toHaveLength(1);
  expect(sent[0]!.body).toMatchObject({ temperature: 0.3, top_p: 0.8, top_k: 5, min_p: 0.1, max_tokens: 42 });
  expect(sent[0]!.headers.authorization).toBe('Bearer flag-key');
  const store = openStore(db);
  try {
    expect(store.completions.listBySession('sess-flags').map((r) => r.policy_version)).toEqual(['v7']);
  } finally {
    store.close();
  }
}, 60_000);

test('without --engine-api-key the engine gets $POLAR_ENGINE_API_KEY', async () => {
  const { proc, url } = await startPolarProxy(['--port', '0', '--engine', 'vllm', '--engine-url', engine.url, '--db', join(dir, 'env.db')], dir, { ...process.env, POLAR_ENGINE_API_KEY: 'env-key' });
  procs.push(proc);
  const before = engine.chatRequests().length;
  await chat(url, 'sess-env');
  expect(engine.chatRequests().slice(before).map((r) => r.headers.authorization)).toEqual(['Bearer env-key']);
}, 60_000);
