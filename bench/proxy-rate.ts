/**
 * Latency of `polar proxy --engine vllm` at a fixed offered load: small Anthropic Messages calls (JSON) at 1,000
 * requests/s for 10 s, sent open loop (bench/lib/open-load.mjs: one request every 1 ms on a schedule, whether or not
 * earlier ones were answered, over up to 32 keep-alive connections), against the instant mock engine, capture and
 * the SQLite commit included; the mock called directly at the same rate (same-size Chat body) is the baseline.
 * Prints client-side p50 / p90 / p99 / p99.9 / max in fractional ms, the achieved rate, the sender's p99 lateness
 * against its schedule and the proxy's CPU ms per request. (Until session 6 this used autocannon's `overallRate`,
 * which sends each connection's quota for the second as a closed-loop burst at the second's start: that measured 32
 * queued calls, not a rate.)
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
        runLoad(dir, name, { url, headers, body, connections: 32, durationS: seconds, rate, openLoop: true });
      const direct = await load('direct', `${mock.url}/v1/chat/completions`, json, JSON.stringify({ ...chatBodies().small, stream: false }), durationS);
      const proxyBody = JSON.stringify({ ...messagesBodies().small, stream: false });
      await load('warmup', `${proxy.url}/v1/messages`, { ...json, 'x-api-key': 'rate-warmup' }, proxyBody, 2);
      const cpu0 = treeCpuMs(proxy.pid);
      const ours = await load('polar', `${proxy.url}/v1/messages`, { ...json, 'x-api-key': 'rate' }, proxyBody, durationS);
      const cpu = (treeCpuMs(proxy.pid) - cpu0) / Math.max(1, ours.requests);
      const row = (name: string, l: LoadResult, cpuMs: Cell): Cell[] => [
        name, l.rps, l.latencyP50Ms, l.latencyP90Ms, l.latencyP99Ms, l.latencyP999Ms ?? 'n/a', l.latencyMaxMs ?? 'n/a',
        l.latencyP50Ms > 0 ? l.latencyP99Ms / l.latencyP50Ms : 'n/a', l.scheduleLagP99Ms ?? 'n/a', cpuMs, l.errors + l.timeouts + l.non2xx,
      ];
      return {
        title: `Latency at a fixed offered load (${rate} req/s open loop, ≤ 32 connections, ${durationS} s; small Messages → Chat, JSON)`,
        columns: ['contender', 'req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'p99.9 ms', 'max ms', 'p99 / p50', 'sender lag p99 ms', 'CPU ms/req', 'errors'],
        keyColumns: 1,
        rows: [row('direct (mock)', direct, '-'), row('polar proxy', ours, cpu)],
        notes: ['latency from handing the request to the client to its last byte (hdr-histogram, µs resolution); sender lag: how late the sender\'s timer sent a request against its schedule (not billed to the server)'],
      };
    } finally {
      await stopAll(servers);
      rmSync(dir, { recursive: true, force: true });
    }
  },
});
