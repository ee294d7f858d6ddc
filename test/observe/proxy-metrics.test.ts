/**
 * The proxy's own metrics (src/observe/proxy-metrics.ts): `polar_proxy_requests_total` / `_errors_total` count the
 * model-API calls a dialect's handler took, nothing else the proxy answers; `polar_proxy_inference_paused` follows
 * the pause gate (src/proxy/inference-gate.ts).
 */
import { afterAll, expect, test } from 'bun:test';
import { ProxyMetrics } from '../../src/observe/proxy-metrics.ts';
import { InferenceGate } from '../../src/proxy/inference-gate.ts';
import { startFakeEngine } from '../support/fake-engine.ts';
import { startTestProxy } from '../support/proxy-harness.ts';

const engine = await startFakeEngine({ shape: 'vllm' });
const proxy = await startTestProxy({ engineUrl: engine.url, kind: 'vllm' });
afterAll(async () => {
  await proxy.stop();
  await engine.stop();
});

/** Every sample of `name` in the exposition, as `{labels} value` lines. */
const samples = async (name: string) =>
  (await (await fetch(`${proxy.url}/metrics`)).text()).split('\n').filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `));

test('requests_total and errors_total count model-API calls only, by the dialect that took them', async () => {
  const chat = (body: string, headers: Record<string, string> = { authorization: 'Bearer s-1' }) =>
    fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  expect((await chat(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }))).status).toBe(200);
  expect((await chat('{')).status).toBe(400);
  // Not model-API calls: scans, wrong methods, the root, the OpenAI model list, admin calls, the metrics themselves.
  expect((await fetch(`${proxy.url}/wp-login.php`)).status).toBe(404);
  expect((await fetch(`${proxy.url}/v1/chat/completions`)).status).toBe(405);
  expect((await fetch(`${proxy.url}/`)).status).toBe(200);
  expect((await fetch(`${proxy.url}/v1/models`)).status).toBe(200);
  expect((await fetch(`${proxy.url}/admin/inference/status`)).status).toBe(200);
  await fetch(`${proxy.url}/metrics`);
  expect(await samples('polar_proxy_requests_total')).toEqual([
    'polar_proxy_requests_total{dialect="openai-chat",engine="vllm",status="200"} 1',
    'polar_proxy_requests_total{dialect="openai-chat",engine="vllm",status="400"} 1',
  ]);
  expect(await samples('polar_proxy_errors_total')).toEqual(['polar_proxy_errors_total{dialect="openai-chat",engine="vllm",status="400"} 1']);
});

test('polar_proxy_inference_paused is 1 from a pause to its resume; inferencePause() says since when', async () => {
  let now = 1_700_000_000_000;
  const gate = new InferenceGate(null, () => now);
  const metrics = new ProxyMetrics('sim');
  const gauge = async () => (await metrics.text()).split('\n').find((line) => line.startsWith('polar_proxy_inference_paused '));
  expect(metrics.inferencePause()).toEqual({ inference_paused: false, paused_since: null });
  expect(await gauge()).toBe('polar_proxy_inference_paused 0');
  metrics.trackInferenceGate(gate);
  expect(await gauge()).toBe('polar_proxy_inference_paused 0');
  await gate.pause();
  now += 5_000;
  await gate.pause(); // a second pause keeps the first one's time
  expect(gate.pausedSince).toBe(1_700_000_000_000);
  expect(await gauge()).toBe('polar_proxy_inference_paused 1');
  expect(metrics.inferencePause()).toEqual({ inference_paused: true, paused_since: 1_700_000_000_000 });
  gate.resume();
  expect(gate.pausedSince).toBeNull();
  expect(await gauge()).toBe('polar_proxy_inference_paused 0');
  expect(metrics.inferencePause()).toEqual({ inference_paused: false, paused_since: null });
});

test('through the proxy app: POST /admin/inference/pause and /resume move the gauge (the runtime tracks its own gate)', async () => {
  const gauge = async () => (await samples('polar_proxy_inference_paused'))[0];
  expect((await fetch(`${proxy.url}/admin/inference/pause`, { method: 'POST' })).status).toBe(200);
  expect(await gauge()).toBe('polar_proxy_inference_paused 1');
  expect((await fetch(`${proxy.url}/admin/inference/resume`, { method: 'POST' })).status).toBe(200);
  expect(await gauge()).toBe('polar_proxy_inference_paused 0');
});

test('a model-API call refused for its body size (413) is counted under its path\'s dialect', async () => {
  const small = await startTestProxy({ engineUrl: engine.url, kind: 'vllm', options: { maxBodyBytes: 100 } });
  try {
    const response = await fetch(`${small.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer s-1' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(500) }] }) });
    expect(response.status).toBe(413);
    const text = await (await fetch(`${small.url}/metrics`)).text();
    expect(text).toContain('polar_proxy_errors_total{dialect="openai-chat",engine="vllm",status="413"} 1');
  } finally {
    await small.stop();
  }
});
