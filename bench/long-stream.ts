/**
 * A long Gemini stream through a gateway node: the simulator decodes slowly (default 2 tok/s, 1200 tokens ≈ 10 min)
 * after a long prefill, and the client must receive every byte: no idle cut by the node's server (its idle timeout is
 * 255 s for the session API; model calls are exempt) and no keep-alive comment (gemini-cli's SDK stalls on one).
 * Usage: bun bench/long-stream.ts [--decode-tps 2] [--tokens 1200] [--prefill-s 300]. Prints the timeline.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createEngineClient } from '../src/engines/index.ts';
import { GatewayNode } from '../src/gateway/node.ts';
import { createProxyApp } from '../src/proxy/app.ts';
import { SimServer } from '../src/sim/server.ts';
import { openStore } from '../src/store/index.ts';

const { values } = parseArgs({ options: { 'decode-tps': { type: 'string', default: '2' }, tokens: { type: 'string', default: '1200' }, 'prefill-s': { type: 'string', default: '300' } } });
const decodeTps = Number(values['decode-tps']);
const tokens = Number(values.tokens);
const prefillS = Number(values['prefill-s']);
const root = mkdtempSync(join(tmpdir(), 'polar-long-stream-'));
// The prompt is ~30 tokens: a prefill rate of 30/prefillS tokens/s makes the engine silent for prefillS seconds first.
const sim = await SimServer.start({ port: 0, decodeTps, prefillTps: 30 / prefillS, scripts: { long: { variants: { a: { weight: 1, steps: [{ say: 'word '.repeat(tokens) }] } } } } });
const store = openStore(join(root, 'polar.db'));
const engine = createEngineClient({ kind: 'sim', url: sim.url, mode: 'chat', timeoutMs: 0 });
await engine.probe();
const node = new GatewayNode({ nodeId: 'bench', store, workRoot: join(root, 'work'), harnessCacheDir: join(root, 'h'), autoInstallHarness: false, runtimeDefaults: { isolation: 'none' }, proxy: (sessions) => createProxyApp({ engine, store, sessions: { resolve: (key) => sessions.resolve(key) ?? (key === 'bench' ? { session_id: 'bench', task_id: 'long' } : null) } }) });
await node.start();
const t0 = performance.now();
const res = await fetch(`${node.url}/v1beta/models/m:streamGenerateContent?alt=sse`, {
  timeout: false, // the client's own idle timer off: this measures the gateway's
  method: 'POST', headers: { 'x-goog-api-key': 'bench', 'content-type': 'application/json' }, body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'write' }] }], generationConfig: { maxOutputTokens: tokens + 50 } }),
});
const tStatus = (performance.now() - t0) / 1000;
let bytes = 0;
let first = -1;
const decoder = new TextDecoder();
let text = '';
for await (const chunk of res.body!) {
  if (first < 0) first = (performance.now() - t0) / 1000;
  bytes += chunk.length;
  text += decoder.decode(chunk, { stream: true });
}
const total = (performance.now() - t0) / 1000;
const finished = text.includes('"finishReason"');
console.log(JSON.stringify({ status: res.status, status_s: +tStatus.toFixed(1), first_byte_s: +first.toFixed(1), total_s: +total.toFixed(1), bytes, finished, comment_keepalives: (text.match(/^:/gm) ?? []).length, records: store.completions.listBySession('bench').length }));
await node.stop();
await sim.stop();
store.close();
rmSync(root, { recursive: true, force: true });
process.exit(finished ? 0 : 1);
