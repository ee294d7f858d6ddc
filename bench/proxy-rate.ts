/**
 * Latency of `polar proxy --engine vllm` at a fixed offered load: small Anthropic Messages calls (JSON) at 1,000
 * requests/s over 32 connections for 10 s (autocannon `overallRate`, bench/lib/load.mjs), against the instant mock
 * engine, capture and the SQLite commit included; the mock called directly at the same rate (same-size Chat body) is
 * the baseline. Prints client-side p50 / p90 / p99, the achieved rate and the proxy's CPU ms per request.
 * Run: bun bench/proxy-rate.ts [--quick] [1000]   (variants are the offered rates; --quick: 4 s)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineBench } from './lib/bench.ts';
import { treeCpuMs } from './lib/proc.ts';
import { chatBodies, messagesBodies } from './lib/requests.ts';
import { runLoad, type LoadResult } from './lib/load.ts';
import { startMockAndProxy, stopAll, type ServerProcess } from './lib/servers.ts';
import type { Cell } from './lib/table.ts';


await defineBench({
  name: 'proxy-rate',
  variants: () => ['1000'],
  async run(variant, ctx) {
    const rate = Number(variant);
    const durationS = ctx.quick ? 4 : 10;
    const dir = mkdtempSync(join(tmpdir(), 'polar-proxy-rate-'));
    const servers: ServerProcess[] = [];
    try {
      const { mock, proxy } = await startMockAndProxy(servers, join(dir, 'polar.db'));
      const json = { 'content-type': 'application/json' };
      const load = (name: string, url: string, headers: Record<string, string>, body: string, seconds: number) =>
        runLoad(dir, name, { url, headers, body, connections: 32, durationS: seconds, rate });
      const direct = await load('direct', `${mock.url}/v1/chat/completions`, json, JSON.stringify({ ...chatBodies().small, stream: false }), durationS);
      const proxyBody = JSON.stringify({ ...messagesBodies().small, stream: false });
      await load('warmup', `${proxy.url}/v1/messages`, { ...json, 'x-api-key': 'rate-warmup' }, proxyBody, 2);
      const cpu0 = treeCpuMs(proxy.pid);
      const ours = await load('polar', `${proxy.url}/v1/messages`, { ...json, 'x-api-key': 'rate' }, proxyBody, durationS);
      const cpu = (treeCpuMs(proxy.pid) - cpu0) / Math.max(1, ours.requests);
      const row = (name: string, l: LoadResult, cpuMs: Cell): Cell[] => [name, l.rps, l.latencyP50Ms, l.latencyP90Ms, l.latencyP99Ms, l.latencyP50Ms > 0 ? l.latencyP99Ms / l.latencyP50Ms : 'n/a', cpuMs, l.errors + l.timeouts + l.non2xx];
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
