/**
 * `GET /metrics` of every process, with live values: `polar serve --with-sim` (rollout server and gateway node, the
 * node's proxy merged in) after a two-sample task, and a standalone `polar proxy` after one captured call.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startFakeEngine, type FakeEngine } from '../support/fake-engine.ts';
import { REPO_ROOT, SHELL_AGENT_COMMAND, SHELL_AGENT_RUNTIME_YAML, startPolar, startPolarProxy, useScratch } from '../support/polar-cli.ts';

const { dir: scratch, procs } = useScratch('polar-metrics-');
let engine: FakeEngine;
beforeAll(async () => {
  engine = await startFakeEngine({ shape: 'vllm', script: [{ kind: 'text', text: 'ok' }] });
});
afterAll(async () => engine.stop());

/** The value of the first sample whose name and labels contain every given fragment. */
function sample(text: string, name: string, ...labels: string[]): number | null {
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || !(line.startsWith(`${name}{`) || line.startsWith(`${name} `))) continue;
    if (labels.every((l) => line.includes(l))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return null;
}

test('polar serve: the rollout server and the gateway node both expose their metrics with live values', async () => {
  const config = join(scratch, 'polar.yaml');
  writeFileSync(config, [
    'sim: {port: 0}', 'rollout: {port: 0}',
    `gateway: {heartbeat_interval_s: 0.5, nodes: [{node_id: box-0, port: 0, work_root: ${join(scratch, 'work')}, ${SHELL_AGENT_RUNTIME_YAML}}]}`,
    `store: {path: ${join(scratch, 'polar.db')}}`, '',
  ].join('\n'));
  mkdirSync(join(scratch, 'work'), { recursive: true });
  const { line } = await startPolar(['serve', '--config', config, '--with-sim'], procs);
  const server = line.match(/rollout server on (http:\/\/\S+?),/)?.[1];
  expect(server).toBeDefined();
  const task = {
    task_id: 'metrics-task', instruction: 'Create out.txt containing ok.', num_samples: 2, timeout_seconds: 60,
    agent: { harness: 'shell', command: SHELL_AGENT_COMMAND, model_name: 'polar-sim' },
    builder: { strategy: 'prefix_merging' }, runtime: { kind: 'local' },
    evaluator: { strategy: 'test_on_output', config: { command: 'true' } },
  };
  expect((await fetch(`${server}/rollout/task/submit`, { method: 'POST', body: JSON.stringify(task) })).status).toBe(200);
  for (let i = 0; i < 300; i++) {
    const status = (await (await fetch(`${server}/rollout/task/metrics-task`)).json()) as { status: string };
    if (!['RUNNING', 'PENDING'].includes(status.status.toUpperCase())) break;
    await Bun.sleep(100);
  }
  // /nodes: a list (the Python Polar's shape) or {nodes: [...]}.
  const listed = (await (await fetch(`${server}/nodes`)).json()) as { url: string }[] | { nodes: { url: string }[] };
  const gateway = (Array.isArray(listed) ? listed : listed.nodes)[0]!.url;

  const rollout = await (await fetch(`${server}/metrics`)).text();
  expect(sample(rollout, 'polar_rollout_tasks_submitted_total')).toBe(1);
  const res = await fetch(`${gateway}/metrics`);
  expect(res.headers.get('content-type')).toContain('text/plain');
  const node = await res.text();
  expect(sample(node, 'polar_gateway_session_results_total', 'status="COMPLETED"', 'harness="shell"')).toBe(2);
  expect(sample(node, 'polar_gateway_stage_duration_seconds_count', 'stage="run"')).toBe(2);
  expect(sample(node, 'polar_gateway_sessions', 'stage="running"')).toBe(0);
  expect(sample(node, 'polar_gateway_pool_occupancy', 'pool="run"')).toBe(0);
  // A paused gateway says so in GET /health and /metrics (its proxy's pause gate), and clears it on resume.
  expect((await fetch(`${gateway}/admin/inference/pause`, { method: 'POST' })).status).toBe(200);
  expect(await (await fetch(`${gateway}/health`)).json()).toMatchObject({ inference_paused: true });
  expect(sample(await (await fetch(`${gateway}/metrics`)).text(), 'polar_proxy_inference_paused')).toBe(1);
  expect((await fetch(`${gateway}/admin/inference/resume`, { method: 'POST' })).status).toBe(200);
  expect(await (await fetch(`${gateway}/health`)).json()).toMatchObject({ inference_paused: false, paused_since: null });
  expect(sample(node, 'polar_gateway_harness_failures_total')).toBeNull(); // no failure, no series
  expect(sample(node, 'polar_trace_chains_total')!).toBeGreaterThanOrEqual(2);
  expect(sample(node, 'polar_trace_chain_breaks_total', 'reason="prefix_break"')).toBe(0);
  expect(sample(node, 'polar_trace_trainable_tokens_total')!).toBeGreaterThan(0);
  // The proxy's own series, merged into the node's exposition.
  const calls = sample(node, 'polar_proxy_requests_total', 'dialect="openai-chat"', 'engine="sim"', 'status="200"')!;
  expect(calls).toBeGreaterThanOrEqual(2);
  expect(sample(node, 'polar_proxy_completions_total', 'engine="sim"')).toBe(calls);
  expect(sample(node, 'polar_proxy_tokens_total', 'kind="sampled"')!).toBeGreaterThan(0);
  expect(sample(node, 'polar_proxy_tokens_total', 'kind="prompt"')!).toBeGreaterThan(sample(node, 'polar_proxy_tokens_total', 'kind="sampled"')!);
  expect(sample(node, 'polar_proxy_engine_latency_seconds_count', 'dialect="openai-chat"')).toBe(calls);
  expect(sample(node, 'polar_proxy_added_latency_seconds_count', 'dialect="openai-chat"')).toBe(calls);
  expect(sample(node, 'polar_proxy_engine_busy_seconds_total')!).toBeGreaterThan(0);
  const busy = sample(node, 'polar_proxy_engine_busy_fraction')!;
  expect(busy).toBeGreaterThan(0);
  expect(busy).toBeLessThanOrEqual(1);

  // Every metric the Grafana dashboard queries is served by one of these processes.
  const served = new Set([...`${rollout}\n${node}`.matchAll(/^# TYPE (\S+) (\w+)$/gm)].flatMap(([, name, type]) => (type === 'histogram' ? [`${name}_bucket`, `${name}_sum`, `${name}_count`] : [name!])));
  const dashboard = JSON.parse(readFileSync(join(REPO_ROOT, 'examples/grafana/polar-dashboard.json'), 'utf8')) as { panels: { targets?: { expr: string }[] }[] };
  const queried = new Set(dashboard.panels.flatMap((p) => p.targets ?? []).flatMap((t) => [...t.expr.matchAll(/\b(polar_[a-z_]+)\b/g)].map((m) => m[1]!)));
  expect(queried.size).toBeGreaterThan(20);
  expect([...queried].filter((name) => !served.has(name))).toEqual([]);
}, 90_000);

test('polar proxy: /metrics counts requests by dialect and status, captured tokens and errors', async () => {
  const { proc, url } = await startPolarProxy(['--port', '0', '--engine', 'vllm', '--engine-url', engine.url, '--db', join(scratch, 'p.db')], scratch);
  procs.push(proc);
  const ok = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer m1', 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }) });
  expect(ok.status).toBe(200);
  const bad = await fetch(`${url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': 'm1', 'content-type': 'application/json' }, body: '{' });
  expect(bad.status).toBe(400);
  const text = await (await fetch(`${url}/metrics`)).text();
  expect(sample(text, 'polar_proxy_requests_total', 'dialect="openai-chat"', 'engine="vllm"', 'status="200"')).toBe(1);
  expect(sample(text, 'polar_proxy_errors_total', 'dialect="anthropic-messages"', 'status="400"')).toBe(1);
  expect(sample(text, 'polar_proxy_completions_total', 'engine="vllm"')).toBe(1);
  expect(sample(text, 'polar_proxy_capture_errors_total', 'engine="vllm"')).toBe(0);
  expect(sample(text, 'polar_proxy_tokens_total', 'kind="trainable"')!).toBeGreaterThan(0);
  expect(sample(text, 'polar_proxy_engine_in_flight')).toBe(0);
  // A paused proxy says so at GET /health (admin calls answer loopback callers without --admin-token).
  expect(await (await fetch(`${url}/health`)).json()).toMatchObject({ ok: true, inference_paused: false, paused_since: null });
  const before = Date.now();
  expect((await fetch(`${url}/admin/inference/pause`, { method: 'POST' })).status).toBe(200);
  const paused = (await (await fetch(`${url}/health`)).json()) as { inference_paused: boolean; paused_since: number };
  expect(paused.inference_paused).toBe(true);
  expect(paused.paused_since).toBeGreaterThanOrEqual(before);
  expect(sample(await (await fetch(`${url}/metrics`)).text(), 'polar_proxy_inference_paused')).toBe(1);
  expect((await fetch(`${url}/admin/inference/resume`, { method: 'POST' })).status).toBe(200);
  expect(await (await fetch(`${url}/health`)).json()).toMatchObject({ inference_paused: false, paused_since: null });
}, 60_000);
