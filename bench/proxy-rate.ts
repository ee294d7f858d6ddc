/**
 * Latency of `polar proxy --engine vllm` at a fixed offered load: small Anthropic Messages calls (JSON) at 1,000
 * requests/s over 32 connections for 10 s (autocannon `overallRate`, bench/lib/load.mjs), against the instant mock
 * engine, capture and the SQLite commit included; the mock called directly at the same rate (same-size Chat body) is
 * the baseline. Prints client-side p50 / p90 / p99, the achieved rate and the proxy's CPU ms per request.
 * Run: bun bench/proxy-rate.ts [--quick] [1000]   (variants are the offered rates; --quick: 4 s)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineBench } from './lib/bench.ts';
import { treeCpuMs } from './lib/proc.ts';
import { chatBodies, messagesBodies } from './lib/requests.ts';
import { startMockEngine, startPolarProxy, stopAll, type ServerProcess } from './lib/servers.ts';
import type { Cell } from './lib/table.ts';

const ROOT = join(import.meta.dir, '..');

interface LoadOut {
  requests: number;
  rps: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  latencyP50Ms: number;
  latencyP90Ms: number;
  latencyP99Ms: number;
}

async function load(dir: string, name: string, url: string, headers: Record<string, string>, body: string, rate: number, durationS: number): Promise<LoadOut> {
  const bodyFile = join(dir, `${name}.json`);
  writeFileSync(bodyFile, body);
  writeFileSync(`${bodyFile}.spec`, JSON.stringify({ url, headers, bodyFile, connections: 32, durationS, rate }));
  const child = Bun.spawn(['node', join(import.meta.dir, 'lib/load.mjs'), `${bodyFile}.spec`], { cwd: ROOT, stdout: 'pipe', stderr: 'inherit' });
  const out = await new Response(child.stdout).text();
  if ((await child.exited) !== 0) throw new Error(`load generator failed against ${name}`);
  return JSON.parse(out.trim().split('\n').pop()!) as LoadOut;
}

await defineBench({
  name: 'proxy-rate',
  variants: () => ['1000'],
  async run(variant, ctx) {
    const rate = Number(variant);
    const durationS = ctx.quick ? 4 : 10;
    const dir = mkdtempSync(join(tmpdir(), 'polar-proxy-rate-'));
    const servers: ServerProcess[] = [];
    try {
      const mock = await startMockEngine();
      servers.push(mock);
      const proxy = await startPolarProxy(mock.url, join(dir, 'polar.db'));
      servers.push(proxy);
      const json = { 'content-type': 'application/json' };
      const direct = await load(dir, 'direct', `${mock.url}/v1/chat/completions`, json, JSON.stringify({ ...chatBodies().small, stream: false }), rate, durationS);
      const proxyBody = JSON.stringify({ ...messagesBodies().small, stream: false });
      await load(dir, 'warmup', `${proxy.url}/v1/messages`, { ...json, 'x-api-key': 'rate-warmup' }, proxyBody, rate, 2);
      const cpu0 = treeCpuMs(proxy.pid);
      const ours = await load(dir, 'polar', `${proxy.url}/v1/messages`, { ...json, 'x-api-key': 'rate' }, proxyBody, rate, durationS);
      const cpu = (treeCpuMs(proxy.pid) - cpu0) / Math.max(1, ours.requests);
      const row = (name: string, l: LoadOut, cpuMs: Cell): Cell[] => [name, l.rps, l.latencyP50Ms, l.latencyP90Ms, l.latencyP99Ms, l.latencyP50Ms > 0 ? l.latencyP99Ms / l.latencyP50Ms : 'n/a', cpuMs, l.errors + l.timeouts + l.non2xx];
      return {
        title: `Latency at a fixed offered load (${rate} req/s, 32 connections, ${durationS} s; small Messages → Chat, JSON)`,
        columns: ['contender', 'req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'p99 / p50', 'CPU ms/req', 'errors'],
        keyColumns: 1,
        rows: [row('direct (mock)', direct, '-'), row('polar proxy', ours, cpu)],
        notes: ['autocannon reports latency in whole milliseconds: at sub-millisecond latencies p50 and p99 are coarse (1 ms steps)'],
      };
    } finally {
      await stopAll(servers);
      rmSync(dir, { recursive: true, force: true });
    }
  },
});
