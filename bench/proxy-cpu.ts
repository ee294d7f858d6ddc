/**
 * Proxy CPU per call, in isolation: `polar proxy --engine vllm` in its own process against the instant mock engine,
 * N sequential calls of a small and of a 100 KB Claude-Code-shaped Anthropic Messages request (JSON and SSE). CPU ms
 * per call is read from /proc for the proxy process only, so the load generator's and the mock's CPU are excluded;
 * capture and the SQLite commit are included. The `-c64` variants keep 64 calls in flight for 10 s (autocannon,
 * bench/lib/load.mjs) instead: what concurrency adds (garbage collection over a larger heap, queueing).
 * Run: bun bench/proxy-cpu.ts [--quick] [small-json|large-json|small-json-c64|large-json-c64|...]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineBench } from './lib/bench.ts';
import { treeCpuMs, treeRssBytes } from './lib/proc.ts';
import { messagesBodies } from './lib/requests.ts';
import { runLoad } from './lib/load.ts';
import { startMockAndProxy, stopAll, type ServerProcess } from './lib/servers.ts';
import { percentile } from './lib/stats.ts';


await defineBench({
  name: 'proxy-cpu',
  variants: () => ['small-json', 'small-sse', 'large-json', 'large-sse', 'small-json-c64', 'large-json-c64'],
  async run(variant, ctx) {
    const [size, mode, concurrency] = variant.split('-') as ['small' | 'large', 'json' | 'sse', 'c64' | undefined];
    const calls = ctx.quick ? 100 : 400;
    const dir = mkdtempSync(join(tmpdir(), 'polar-proxy-cpu-'));
    const servers: ServerProcess[] = [];
    try {
      const { proxy } = await startMockAndProxy(servers, join(dir, 'polar.db'));
      const body = JSON.stringify({ ...messagesBodies()[size], stream: mode === 'sse' });
      const call = async () => {
        const response = await fetch(`${proxy.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': 'bench' }, body });
        if (response.status !== 200) throw new Error(`proxy answered ${response.status}: ${(await response.text()).slice(0, 200)}`);
        await response.arrayBuffer();
      };
      // Warm-up: JIT (a 100 KB call needs ~100 calls before its cost settles), first-call probe, SQLite pages.
      for (let i = 0; i < (ctx.quick ? 20 : 100); i++) await call();
      if (concurrency === 'c64') {
        const durationS = ctx.quick ? 4 : 10;
        const cpu0 = treeCpuMs(proxy.pid);
        const load = await runLoad(dir, 'c64', { url: `${proxy.url}/v1/messages`, headers: { 'content-type': 'application/json', 'x-api-key': 'bench' }, body, connections: 64, durationS });
        if (load.requests === 0 || load.non2xx + load.errors > 0) throw new Error(`load failed: ${JSON.stringify(load)}`);
        return {
          title: 'Proxy CPU per call at 64 connections (polar proxy → instant mock, capture + SQLite commit included)',
          columns: ['request', 'mode', 'calls', 'CPU ms/call', 'req/s', 'latency p50 ms', 'latency p99 ms', 'RSS MB'],
          keyColumns: 2,
          rows: [[size === 'large' ? '100 KB' : 'small', `${mode.toUpperCase()} ×64`, load.requests, (treeCpuMs(proxy.pid) - cpu0) / load.requests, load.rps, load.latencyP50Ms, load.latencyP99Ms, treeRssBytes(proxy.pid) / 2 ** 20]],
          notes: [`body ${(body.length / 1024).toFixed(0)} KiB; ${durationS} s at 64 connections (autocannon) after the sequential warm-up; CPU from /proc over the load window`],
        };
      }
      const latencies: number[] = [];
      const cpu0 = treeCpuMs(proxy.pid);
      for (let i = 0; i < calls; i++) {
        const t0 = performance.now();
        await call();
        latencies.push(performance.now() - t0);
      }
      const cpuPerCall = (treeCpuMs(proxy.pid) - cpu0) / calls;
      return {
        title: 'Proxy CPU per call (polar proxy → instant mock, sequential, capture + SQLite commit included)',
        columns: ['request', 'mode', 'calls', 'CPU ms/call', 'latency p50 ms', 'latency p99 ms', 'RSS MB'],
        keyColumns: 2,
        rows: [[size === 'large' ? '100 KB' : 'small', mode.toUpperCase(), calls, cpuPerCall, percentile(latencies, 50), percentile(latencies, 99), treeRssBytes(proxy.pid) / 2 ** 20]],
        notes: [`body ${(body.length / 1024).toFixed(0)} KiB; CPU from /proc (10 ms ticks): the per-call figure is a mean over ${calls} calls`],
      };
    } finally {
      await stopAll(servers);
      rmSync(dir, { recursive: true, force: true });
    }
  },
});
