/**
 * Proxy CPU per call, in isolation: `polar proxy --engine vllm` in its own process against the instant mock engine,
 * N sequential calls of a small and of a 100 KB Claude-Code-shaped Anthropic Messages request (JSON and SSE). CPU ms
 * per call is read from /proc for the proxy process only, so the load generator's and the mock's CPU are excluded;
 * capture and the SQLite commit are included. The per-thread split (schedstat, ns resolution) shows the JS thread
 * (`main`: HTTP server, handlers, JSON, SQLite), the JIT compiler threads and the rest (Bun's HTTP client thread, GC
 * helpers). The warm-up is 1,000 calls: after 100 the JIT threads still spend ~0.2 ms per 100 KB call compiling,
 * after 3,000 ~0.04 ms, and a proxy in service is past both.
 * The `-c64` variants keep 64 calls in flight for 10 s (autocannon, bench/lib/load.mjs) instead: what concurrency adds
 * (garbage collection over a larger heap, queueing), with the RSS at the end of the load and again `--idle` seconds
 * later (default 15; 0 skips the wait). The `floor-` variants run bench/lib/floor-proxy.ts instead of
 * polar: a bare Bun server that only decodes and parses the request and the engine's answer (no translation,
 * capture or store), the floor under any Bun proxy that reads both documents.
 * Run: bun bench/proxy-cpu.ts [--quick] [--calls=N] [--warmup=N] [--idle=S] [small-json|large-json|small-json-c64|large-json-c64|floor-large-json|...]
 * (`--calls`: sequential calls measured, default 400; `--warmup`: calls before, default 1,000; --quick: 100 and 20).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineBench, numberOption } from './lib/bench.ts';
import { splitThreads, threadCpuMs, treeCpuMs, treeMinorFaults, treeRssBytes } from './lib/proc.ts';
import { messagesBodies } from './lib/requests.ts';
import { runLoad } from './lib/load.ts';
import { freePort, startMockAndProxy, startMockEngine, startServer, stopAll, type ServerProcess } from './lib/servers.ts';
import { percentile } from './lib/stats.ts';

/** The floor server (bench/lib/floor-proxy.ts) in front of a fresh mock engine. */
async function startMockAndFloor(servers: ServerProcess[]): Promise<{ proxy: ServerProcess }> {
  const mock = await startMockEngine();
  servers.push(mock);
  const port = freePort();
  const proxy = await startServer({ name: 'floor proxy', cmd: [process.execPath, join(import.meta.dir, 'lib', 'floor-proxy.ts'), '--port', String(port), '--engine-url', mock.url], port });
  servers.push(proxy);
  return { proxy };
}

await defineBench({
  name: 'proxy-cpu',
  variants: () => ['small-json', 'small-sse', 'large-json', 'large-sse', 'small-json-c64', 'large-json-c64', 'floor-small-json', 'floor-large-json', 'floor-large-json-c64'],
  async run(variant, ctx) {
    const floor = variant.startsWith('floor-');
    const [size, mode, concurrency] = variant.replace(/^floor-/, '').split('-') as ['small' | 'large', 'json' | 'sse', 'c64' | undefined];
    const who = floor ? 'floor' : 'polar';
    const count = { ok: (value: number) => Number.isInteger(value) && value >= 0, what: 'a non-negative integer' };
    const calls = numberOption(ctx.args, 'calls', ctx.quick ? 100 : 400, count);
    const warmup = numberOption(ctx.args, 'warmup', ctx.quick ? 20 : 1000, count);
    const idleS = numberOption(ctx.args, 'idle', 15, count);
    const dir = mkdtempSync(join(tmpdir(), 'polar-proxy-cpu-'));
    const servers: ServerProcess[] = [];
    try {
      const { proxy } = floor ? await startMockAndFloor(servers) : await startMockAndProxy(servers, join(dir, 'polar.db'));
      const body = JSON.stringify({ ...messagesBodies()[size], stream: mode === 'sse' });
      const call = async () => {
        const response = await fetch(`${proxy.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': 'bench' }, body });
        if (response.status !== 200) throw new Error(`proxy answered ${response.status}: ${(await response.text()).slice(0, 200)}`);
        await response.arrayBuffer();
      };
      // Warm-up: JIT (see the header), first-call probe, SQLite pages.
      for (let i = 0; i < warmup; i++) await call();
      if (concurrency === 'c64') {
        const durationS = ctx.quick ? 4 : 10;
        const cpu0 = treeCpuMs(proxy.pid);
        const faults0 = treeMinorFaults(proxy.pid);
        const threads0 = threadCpuMs(proxy.pid);
        const load = await runLoad(dir, 'c64', { url: `${proxy.url}/v1/messages`, headers: { 'content-type': 'application/json', 'x-api-key': 'bench' }, body, connections: 64, durationS });
        if (load.requests === 0 || load.non2xx + load.errors > 0) throw new Error(`load failed: ${JSON.stringify(load)}`);
        const cpuPerCall = (treeCpuMs(proxy.pid) - cpu0) / load.requests;
        const faultsPerCall = (treeMinorFaults(proxy.pid) - faults0) / load.requests;
        const split = perCall(splitThreads(threads0, threadCpuMs(proxy.pid)), load.requests);
        const rssMB = treeRssBytes(proxy.pid) / 2 ** 20;
        if (idleS > 0) await Bun.sleep(idleS * 1000);
        const rssLater: number | string = idleS > 0 ? treeRssBytes(proxy.pid) / 2 ** 20 : 'n/a';
        return {
          title: 'Proxy CPU per call at 64 connections (polar proxy → instant mock, capture + SQLite commit included; floor = bare Bun parse-and-forward)',
          columns: ['proxy', 'request', 'mode', 'calls', 'CPU ms/call', 'main ms', 'JIT ms', 'other ms', 'page faults/call', 'req/s', 'latency p50 ms', 'latency p99 ms', 'RSS MB', `RSS MB ${idleS} s later`],
          keyColumns: 3,
          rows: [[who, size === 'large' ? '100 KB' : 'small', `${mode.toUpperCase()} ×64`, load.requests, cpuPerCall, ...split, faultsPerCall, load.rps, load.latencyP50Ms, load.latencyP99Ms, rssMB, rssLater]],
          notes: [`body ${(body.length / 1024).toFixed(0)} KiB; ${durationS} s at 64 connections (autocannon) after the sequential warm-up; CPU from /proc over the load window; RSS at the end of the load and ${idleS} s later, without calls`],
        };
      }
      const latencies: number[] = [];
      const cpu0 = treeCpuMs(proxy.pid);
      const faults0 = treeMinorFaults(proxy.pid);
      const threads0 = threadCpuMs(proxy.pid);
      for (let i = 0; i < calls; i++) {
        const t0 = performance.now();
        await call();
        latencies.push(performance.now() - t0);
      }
      const cpuPerCall = (treeCpuMs(proxy.pid) - cpu0) / calls;
      const faultsPerCall = (treeMinorFaults(proxy.pid) - faults0) / calls;
      const split = perCall(splitThreads(threads0, threadCpuMs(proxy.pid)), calls);
      return {
        title: 'Proxy CPU per call (polar proxy → instant mock, sequential, capture + SQLite commit included; floor = bare Bun parse-and-forward)',
        columns: ['proxy', 'request', 'mode', 'calls', 'CPU ms/call', 'main ms', 'JIT ms', 'other ms', 'page faults/call', 'latency p50 ms', 'latency p99 ms', 'RSS MB'],
        keyColumns: 3,
        rows: [[who, size === 'large' ? '100 KB' : 'small', mode.toUpperCase(), calls, cpuPerCall, ...split, faultsPerCall, percentile(latencies, 50), percentile(latencies, 99), treeRssBytes(proxy.pid) / 2 ** 20]],
        notes: [`body ${(body.length / 1024).toFixed(0)} KiB; CPU ms/call from /proc (10 ms ticks), a mean over ${calls} calls after ${warmup} warm-up calls; main / JIT / other: per-thread on-CPU ms per call (schedstat); page faults: minor faults of the process (/proc stat field 10)`],
      };
    } finally {
      await stopAll(servers);
      rmSync(dir, { recursive: true, force: true });
    }
  },
});

/** A thread split as ms per call, in column order. */
function perCall(split: { main: number; jit: number; other: number }, calls: number): [number, number, number] {
  return [split.main / calls, split.jit / calls, split.other / calls];
}

