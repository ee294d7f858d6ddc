/**
 * Time to first content byte and to last byte through the proxy, relative to the engine's own token timeline, per
 * dialect, true streaming vs synthetic (the non-streaming call replayed), chat and token mode. The engine is
 * `polar sim` in its own process (default 20 tok/s decode, no prefill time, 200-token answers), so it costs this
 * process no CPU; the engine's timeline is measured by streaming the same answer from it directly.
 * Columns: first = first content byte at the client, last = last byte, both in ms after the request was sent;
 * Δfirst / Δlast = minus the engine's own first token / last token when streamed directly; CPU ms = this process
 * (proxy + client parsing) per call; chunks = SSE frames the client got.
 * Run: bun bench/streaming.ts [--decode-tps 20] [--tokens 200]. Prints a table; never passes or fails on time.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createEngineClient } from '../src/engines/index.ts';
import type { CaptureMode } from '../src/engines/types.ts';
import { createProxyApp } from '../src/proxy/app.ts';
import { staticSessions } from '../src/proxy/sessions.ts';
import { openStore } from '../src/store/index.ts';

const { values } = parseArgs({ options: { 'decode-tps': { type: 'string', default: '20' }, tokens: { type: 'string', default: '200' } } });
const decodeTps = Number(values['decode-tps']);
const tokens = Number(values.tokens);
const root = mkdtempSync(join(tmpdir(), 'polar-bench-streaming-'));
// "Hello w1 w2 …": one "wN" ≈ two tokens with the Qwen3 tokenizer; "Hello" (one token) marks the first content byte.
const answer = ['Hello', ...Array.from({ length: Math.ceil(tokens / 2) - 1 }, (_, i) => `w${i + 1}`)].join(' ');
writeFileSync(join(root, 'bench.yaml'), `variants:\n  a:\n    weight: 1\n    steps:\n      - say: "${answer}"\n`);

const port = 20_000 + Math.floor(Math.random() * 20_000);
const sim = Bun.spawn([process.execPath, join(import.meta.dir, '..', 'src', 'main.ts'), 'sim', '--port', String(port), '--decode-tps', String(decodeTps), '--prefill-tps', '0', '--scripts', root], { stdout: 'ignore', stderr: 'inherit' });
const simUrl = `http://127.0.0.1:${port}`;
for (let i = 0; ; i++) {
  try {
    if ((await fetch(`${simUrl}/health`)).ok) break;
  } catch {
    // not up yet
  }
  if (i > 200) throw new Error('polar sim did not start');
  await Bun.sleep(50);
}

type Dialect = 'anthropic' | 'openai-chat' | 'openai-responses' | 'gemini';
const REQUESTS: Record<Dialect, { path: string; headers: Record<string, string>; body: unknown }> = {
  anthropic: { path: '/v1/messages', headers: { 'x-api-key': 'a' }, body: { model: 'm', max_tokens: tokens + 100, stream: true, messages: [{ role: 'user', content: 'go' }] } },
  'openai-chat': { path: '/v1/chat/completions', headers: { authorization: 'Bearer c' }, body: { model: 'm', max_tokens: tokens + 100, stream: true, messages: [{ role: 'user', content: 'go' }] } },
  'openai-responses': { path: '/v1/responses', headers: { authorization: 'Bearer r' }, body: { model: 'm', max_output_tokens: tokens + 100, stream: true, input: 'go' } },
  gemini: { path: '/v1beta/models/m:streamGenerateContent?alt=sse', headers: { 'x-goog-api-key': 'g' }, body: { contents: [{ role: 'user', parts: [{ text: 'go' }] }], generationConfig: { maxOutputTokens: tokens + 100 } } },
};

interface Timing { first: number; last: number; chunks: number }

/** Read a stream; `first` = when a frame carrying the answer's first word arrived. */
async function timed(url: string, init: RequestInit): Promise<Timing> {
  const t0 = performance.now();
  const res = await fetch(url, init);
  if (res.status !== 200) throw new Error(`${url}: HTTP ${res.status} ${await res.text()}`);
  const decoder = new TextDecoder();
  let text = '';
  let first = -1;
  for await (const chunk of res.body!) {
    text += decoder.decode(chunk, { stream: true });
    if (first < 0 && text.includes('Hello')) first = performance.now() - t0;
  }
  return { first, last: performance.now() - t0, chunks: text.split('\n\n').length - 1 };
}

// The engine's own timeline: the same answer streamed from the simulator directly (vLLM chat stream), after one
// warm-up call (the simulator's first call compiles its chat template).
const directCall = () => timed(`${simUrl}/v1/chat/completions`, {
  method: 'POST', headers: { 'content-type': 'application/json', 'x-polar-task': 'bench' },
  body: JSON.stringify({ stream: true, max_tokens: tokens + 100, messages: [{ role: 'user', content: 'go' }] }),
});
await directCall();
const direct = await directCall();

const rows: string[][] = [];
for (const mode of ['chat', 'token'] as CaptureMode[]) {
  for (const variant of ['streaming', 'synthetic'] as const) {
    const engine = createEngineClient({ kind: 'sim', url: simUrl, mode, timeoutMs: 600_000, stream: variant === 'streaming' ? 'auto' : 'never', log: () => {} });
    await engine.probe();
    const store = openStore(':memory:');
    const sessions = staticSessions(Object.fromEntries(['a', 'c', 'r', 'g'].map((k) => [k, { session_id: `${mode}-${variant}-${k}`, task_id: 'bench' }])));
    const app = createProxyApp({ engine, store, sessions });
    const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: app.fetch, idleTimeout: 0 });
    for (const dialect of Object.keys(REQUESTS) as Dialect[]) {
      const spec = REQUESTS[dialect];
      const cpu0 = process.cpuUsage();
      const t = await timed(`http://127.0.0.1:${server.port}${spec.path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...spec.headers }, body: JSON.stringify(spec.body) });
      const cpu = process.cpuUsage(cpu0);
      rows.push([
        mode, dialect, variant, t.first.toFixed(0), t.last.toFixed(0), (t.first - direct.first).toFixed(0), (t.last - direct.last).toFixed(0), ((cpu.user + cpu.system) / 1000).toFixed(1), String(t.chunks),
      ]);
    }
    await server.stop(true);
    store.close();
  }
}

console.log(`streaming vs synthetic, ${decodeTps} tok/s decode, ${tokens}-token answers; engine direct: first token ${direct.first.toFixed(0)} ms, last ${direct.last.toFixed(0)} ms`);
const header = ['mode', 'dialect', 'variant', 'first ms', 'last ms', 'Δfirst ms', 'Δlast ms', 'CPU ms', 'chunks'];
console.log(`| ${header.join(' | ')} |\n|${header.map(() => '---').join('|')}|`);
for (const row of rows) console.log(`| ${row.join(' | ')} |`);
sim.kill();
await sim.exited;
rmSync(root, { recursive: true, force: true });
