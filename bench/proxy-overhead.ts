/**
 * Proxy-added latency (p50/p99) and requests/s for a ~100 KB Claude-Code-shaped request, streaming and not, against an
 * instant fake engine: the same engine called directly (an equivalent OpenAI Chat body) vs through the proxy (decode,
 * engine call, capture checks, SQLite commit, encode). Prints a table; never passes or fails on time.
 * Run: node_modules/.bin/bun bench/proxy-overhead.ts [iterations=300] [concurrency=8]
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEngineClient } from '../src/engines/index.ts';
import { createProxyApp } from '../src/proxy/app.ts';
import { adHocSessions } from '../src/proxy/sessions.ts';
import { openStore } from '../src/store/index.ts';
import { HARNESS_TRAFFIC } from '../test/support/harness-traffic.ts';

const iterations = Number(process.argv[2] ?? 300);
const concurrency = Number(process.argv[3] ?? 8);

// An instant engine in vLLM shape: ~4 bytes per prompt token, a short tool-call reply with token ids and logprobs.
const responseIds = Array.from({ length: 40 }, (_, k) => 1000 + k).concat([151645]);
const engine = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === '/v1/models') return Response.json({ data: [{ id: 'bench-model' }] });
    if (url.pathname === '/version') return Response.json({ version: '0.11.0' });
    const text = await request.text();
    const promptIds = Array.from({ length: Math.ceil(text.length / 4) }, (_, k) => k % 150000);
    return Response.json({
      id: 'chatcmpl-bench',
      object: 'chat.completion',
      created: 0,
      model: 'bench-model',
      prompt_token_ids: promptIds,
      choices: [{
        index: 0,
        message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'Bash', arguments: '{"command":"ls"}' } }] },
        logprobs: { content: responseIds.map(() => ({ token: 'x', logprob: -0.5, bytes: [], top_logprobs: [] })) },
        finish_reason: 'tool_calls',
        token_ids: responseIds,
      }],
      usage: { prompt_tokens: promptIds.length, completion_tokens: responseIds.length, total_tokens: promptIds.length + responseIds.length },
    });
  },
});
const engineUrl = `http://127.0.0.1:${engine.port}`;

const dir = mkdtempSync(join(tmpdir(), 'polar-bench-'));
const store = openStore(join(dir, 'bench.db'));
const client = createEngineClient({ kind: 'vllm', url: engineUrl, mode: 'chat', timeoutMs: 30_000 });
await client.probe();
const app = createProxyApp({ engine: client, store, sessions: adHocSessions() });
const proxy = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: app.fetch, idleTimeout: 0 });
const proxyUrl = `http://127.0.0.1:${proxy.port}`;

// The recorded Claude Code request, its vendor prose padded so the body is ~100 KB.
const fixture = JSON.parse(readFileSync(join(HARNESS_TRAFFIC, 'claude-code/quiet/002-request.json'), 'utf8')) as { body: Record<string, unknown> };
const body = structuredClone(fixture.body);
const system = body.system as Array<{ text: string }>;
const filler = 'The agent follows the repository conventions and explains each change it makes. ';
while (JSON.stringify(body).length < 100_000) system[2]!.text += filler;
const anthropicBody = JSON.stringify({ ...body, model: 'polar-bench', stream: false });
const anthropicStreamBody = JSON.stringify({ ...body, model: 'polar-bench', stream: true });
// The same conversation as the engine sees it, for the direct baseline.
const directBody = JSON.stringify({
  model: 'bench-model',
  stream: false,
  logprobs: true,
  top_logprobs: 0,
  return_token_ids: true,
  messages: [{ role: 'system', content: system.map((b) => b.text).join('\n\n') }, ...(body.messages as unknown[])],
  tools: (body.tools as Array<{ name: string; description: string; input_schema: unknown }>).map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.input_schema } })),
  max_tokens: 32000,
});

type Call = () => Promise<void>;
const headers = { 'content-type': 'application/json', 'x-api-key': 'bench', 'anthropic-version': '2023-06-01' };
const calls: Record<string, Call> = {
  'direct (engine)': async () => void (await (await fetch(`${engineUrl}/v1/chat/completions`, { method: 'POST', headers, body: directBody })).arrayBuffer()),
  'proxy, non-streaming': async () => void (await (await fetch(`${proxyUrl}/v1/messages?beta=true`, { method: 'POST', headers, body: anthropicBody })).arrayBuffer()),
  'proxy, streaming': async () => void (await (await fetch(`${proxyUrl}/v1/messages?beta=true`, { method: 'POST', headers, body: anthropicStreamBody })).arrayBuffer()),
};

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

async function measure(call: Call): Promise<{ p50: number; p99: number; rps: number }> {
  for (let i = 0; i < 20; i++) await call(); // warm-up
  const latencies: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const t = performance.now();
    await call();
    latencies.push(performance.now() - t);
  }
  latencies.sort((a, b) => a - b);
  let next = 0;
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next++ < iterations) await call();
  }));
  const rps = iterations / ((performance.now() - started) / 1000);
  return { p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99), rps };
}

const results: Record<string, { p50: number; p99: number; rps: number }> = {};
for (const [name, call] of Object.entries(calls)) results[name] = await measure(call);
const direct = results['direct (engine)']!;
console.log(`proxy overhead: ${(anthropicBody.length / 1024).toFixed(1)} KiB Claude Code request, ${iterations} sequential calls for latency, ${concurrency} concurrent for req/s`);
console.log('| path | p50 ms | p99 ms | added p50 ms | added p99 ms | req/s |');
console.log('|---|---|---|---|---|---|');
for (const [name, r] of Object.entries(results)) {
  const added = name === 'direct (engine)' ? ['-', '-'] : [(r.p50 - direct.p50).toFixed(2), (r.p99 - direct.p99).toFixed(2)];
  console.log(`| ${name} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${added[0]} | ${added[1]} | ${r.rps.toFixed(0)} |`);
}
console.log(`records committed: ${store.completions.count()}`);

await proxy.stop(true);
await engine.stop(true);
store.close();
rmSync(dir, { recursive: true, force: true });
