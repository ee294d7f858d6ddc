/**
 * Round trip per engine JSON call against a REAL uvicorn (test/support/uvicorn_engine.py): engineFetchJson over the
 * HTTP/1.1 pool (src/engines/http1.ts) against Bun's fetch, sequential, a small POST and a 100 KB POST whose answer
 * carries ~25k prompt_token_ids. Needs python3-uvicorn (and python3-httptools for the httptools parser).
 * Usage: bun bench/uvicorn-http1.ts [h11|httptools] [calls=300]
 * The times include uvicorn's own work (Python JSON for the 25k ids dominates the large case).
 */
import { engineFetchJson } from '../src/engines/http.ts';
import { pythonWithUvicorn, startUvicornEngine } from '../test/support/uvicorn-engine.ts';

const parser = (process.argv[2] ?? 'h11') as 'h11' | 'httptools';
const calls = Number(process.argv[3] ?? 300);
const python = pythonWithUvicorn(parser === 'httptools');
if (python === null) throw new Error(`no python3 imports uvicorn${parser === 'httptools' ? ' and httptools' : ''} (Debian: python3-uvicorn python3-httptools)`);
const engine = await startUvicornEngine(python, { http: parser });
const big = Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'a'.repeat(100_000) }] }));
const small = Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }));
const url = `${engine.url}/v1/chat/completions`;

async function viaFetch(body: Uint8Array): Promise<unknown> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body, timeout: false });
  return JSON.parse(await response.text());
}
const viaPool = (body: Uint8Array) => engineFetchJson(url, { method: 'POST', bodyBytes: body }, { timeoutMs: 60_000 }, 'engine');

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
for (const [name, body] of [['small', small], ['100 KB', big]] as const) {
  for (const [client, run] of [['http1 pool', viaPool], ['fetch', viaFetch]] as const) {
    for (let i = 0; i < 20; i++) await run(body); // warm-up
    const times: number[] = [];
    const cpu = process.cpuUsage();
    for (let i = 0; i < calls; i++) {
      const t = performance.now();
      await run(body);
      times.push(performance.now() - t);
    }
    const used = process.cpuUsage(cpu);
    console.log(`${parser} ${name.padEnd(6)} ${client.padEnd(10)} median ${(median(times) * 1000).toFixed(0)} µs, mean ${((times.reduce((a, b) => a + b, 0) / calls) * 1000).toFixed(0)} µs, client CPU ${((used.user + used.system) / calls).toFixed(0)} µs/call`);
  }
}
await engine.stop();
