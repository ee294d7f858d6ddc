/**
 * Memory soak of `polar proxy --engine vllm` under a steady stream of 100 KB Claude-Code-shaped Anthropic Messages
 * calls against the instant mock engine (capture and the SQLite commit included): RSS of the proxy process sampled
 * every 10 s for the whole run, so a leak or an unbounded cache shows as a slope. Calls come from C concurrent
 * sequential clients (default 4), each a session of its own that grows turn by turn like a real conversation and
 * starts over after `--turns` turns (so the store's per-session base cache sees new sessions all the time).
 * Run: bun bench/proxy-soak.ts [--quick] [--minutes=M] [--clients=C] [--turns=T] [--heap]   (default 10 minutes; --quick 1)
 * Prints one row per sample and a summary row: RSS first / min / max / last, and the slope over the second half.
 * `--heap` also asks the proxy (preloaded with bench/lib/heap-probe.ts) for its live JavaScript heap after a full
 * collection at every sample, and lists the object types whose live count grew most from the 30 s sample to the
 * last: a leak shows there, memory the allocator merely keeps shows only in RSS. The forced collections change how
 * RSS moves, so RSS of a `--heap` run is not comparable with a plain one.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineBench, numberOption } from './lib/bench.ts';
import { treeCpuMs, treeRssBytes } from './lib/proc.ts';
import { messagesBodies, type Json } from './lib/requests.ts';
import { startMockAndProxy, stopAll, type ServerProcess } from './lib/servers.ts';
import type { Cell } from './lib/table.ts';

const SAMPLE_MS = 10_000;

const positive = { ok: (value: number) => value > 0, what: 'a positive number' };

interface HeapSnapshot {
  heapMB: number;
  externalMB: number;
  objects: number;
  types: Record<string, number>;
}

/** Signals the proxy's heap probe and waits (≤ 5 s) for the snapshot it writes after its full collection. */
async function liveHeap(pid: number, file: string): Promise<HeapSnapshot> {
  rmSync(file, { force: true });
  process.kill(pid, 'SIGUSR2');
  const deadline = performance.now() + 5000;
  while (!existsSync(file)) {
    if (performance.now() > deadline) throw new Error(`the proxy's heap probe wrote no ${file} within 5 s`);
    await Bun.sleep(5);
  }
  return JSON.parse(readFileSync(file, 'utf8')) as HeapSnapshot;
}

/** The `n` object types whose live count grew most from `from` to `to`, as `type +delta (from → to)`. */
function grownTypes(from: HeapSnapshot, to: HeapSnapshot, n: number): string {
  const grown = Object.keys(to.types)
    .map((type) => ({ type, from: from.types[type] ?? 0, to: to.types[type]! }))
    .filter((g) => g.to > g.from)
    .sort((a, b) => b.to - b.from - (a.to - a.from))
    .slice(0, n);
  return grown.length === 0 ? 'none grew' : grown.map((g) => `${g.type} +${g.to - g.from} (${g.from} → ${g.to})`).join(', ');
}

/** Turn `turn` of a conversation: the 100 KB request plus `turn` short user/assistant exchanges appended. */
function turnBody(base: Json, turn: number): string {
  const messages = [...(base.messages as Json[])];
  for (let k = 0; k < turn; k++) {
    messages.push({ role: 'assistant', content: [{ type: 'text', text: `Step ${k}: I looked at the file and it holds the expected entries.` }] });
    messages.push({ role: 'user', content: [{ type: 'text', text: `Good. Now check item ${k + 1} of the list and report what you find.` }] });
  }
  return JSON.stringify({ ...base, messages, stream: false });
}

await defineBench({
  name: 'proxy-soak',
  variants: () => ['100k'],
  async run(_variant, ctx) {
    const minutes = numberOption(ctx.args, 'minutes', ctx.quick ? 1 : 10, positive);
    const clients = numberOption(ctx.args, 'clients', 4, positive);
    const turns = numberOption(ctx.args, 'turns', 50, positive);
    const heap = ctx.args.includes('--heap');
    const dir = mkdtempSync(join(tmpdir(), 'polar-proxy-soak-'));
    const heapFile = join(dir, 'heap.json');
    const servers: ServerProcess[] = [];
    try {
      if (heap) process.env.POLAR_BENCH_HEAP_OUT = heapFile; // the proxy inherits this process's environment
      const { proxy } = await startMockAndProxy(servers, join(dir, 'polar.db'), heap ? ['--preload', join(import.meta.dir, 'lib', 'heap-probe.ts')] : []);
      const base = messagesBodies().large;
      const bodies = Array.from({ length: turns }, (_, t) => turnBody(base, t));
      const deadline = performance.now() + minutes * 60_000;
      let calls = 0;
      let failures = 0;
      const client = async (c: number) => {
        for (let session = 0; performance.now() < deadline; session++) {
          const key = `soak-${c}-${session}`;
          for (let t = 0; t < turns && performance.now() < deadline; t++) {
            const response = await fetch(`${proxy.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body: bodies[t] });
            await response.arrayBuffer();
            if (response.status === 200) calls++;
            else failures++;
          }
        }
      };
      const samples: { s: number; rss: number; calls: number; cpu: number; heap: HeapSnapshot | null }[] = [];
      const t0 = performance.now();
      // RSS is read before the probe's collection, so the forced GC of a `--heap` run shows in the next sample only.
      const sample = async () => {
        const at = { s: (performance.now() - t0) / 1000, rss: treeRssBytes(proxy.pid) / 2 ** 20, calls, cpu: treeCpuMs(proxy.pid) };
        samples.push({ ...at, heap: heap ? await liveHeap(proxy.pid, heapFile) : null });
      };
      await sample();
      let stop!: () => void;
      const stopped = new Promise<'stop'>((resolve) => (stop = () => resolve('stop')));
      const sampler = (async () => {
        for (let next = SAMPLE_MS; ; next += SAMPLE_MS) {
          if ((await Promise.race([stopped, Bun.sleep(Math.max(0, t0 + next - performance.now()))])) === 'stop') return;
          await sample();
        }
      })();
      await Promise.all(Array.from({ length: clients }, (_, c) => client(c)));
      stop();
      await sampler;
      await sample();
      const rows: Cell[][] = samples.map((x, i) => {
        const prev = samples[i - 1];
        const cpuPerCall = prev && x.calls > prev.calls ? (x.cpu - prev.cpu) / (x.calls - prev.calls) : null;
        const row: Cell[] = [`${x.s.toFixed(0)} s`, x.calls, x.rss, cpuPerCall ?? '-'];
        return heap ? [...row, x.heap!.heapMB, x.heap!.externalMB, x.heap!.objects] : row;
      });
      const rss = samples.map((x) => x.rss);
      const half = samples.slice(Math.floor(samples.length / 2));
      const slope = half.length >= 2 ? ((half.at(-1)!.rss - half[0]!.rss) / (half.at(-1)!.s - half[0]!.s)) * 60 : null;
      const summary: Cell[] = ['summary', calls, rss.at(-1)!, (samples.at(-1)!.cpu - samples[0]!.cpu) / Math.max(1, calls)];
      rows.push(heap ? [...summary, samples.at(-1)!.heap!.heapMB, samples.at(-1)!.heap!.externalMB, samples.at(-1)!.heap!.objects] : summary);
      const heapNotes: string[] = [];
      if (heap) {
        // From the 30 s sample on: the first seconds fill caches and JIT tiers, which is not growth.
        const from = samples.find((x) => x.s >= 29) ?? samples[0]!;
        const last = samples.at(-1)!;
        heapNotes.push(
          `live heap after a full collection ${from.heap!.heapMB.toFixed(1)} MB at ${from.s.toFixed(0)} s → ${last.heap!.heapMB.toFixed(1)} MB at the end ` +
            `(outside the heap ${from.heap!.externalMB.toFixed(1)} → ${last.heap!.externalMB.toFixed(1)} MB, objects ${from.heap!.objects} → ${last.heap!.objects}); ` +
            `grew most: ${grownTypes(from.heap!, last.heap!, 5)}`,
          '--heap: every sample forces a full collection in the proxy (bench/lib/heap-probe.ts), so its RSS is not comparable with a plain run',
        );
      }
      return {
        title: `Proxy RSS soak (polar proxy → instant mock, ${clients} clients, 100 KB Messages calls, sessions of ${turns} turns, ${minutes} min)`,
        columns: heap ? ['time', 'calls', 'RSS MB', 'CPU ms/call', 'live heap MB', 'outside heap MB', 'live objects'] : ['time', 'calls', 'RSS MB', 'CPU ms/call'],
        keyColumns: 1,
        rows,
        notes: [
          `RSS first ${rss[0]!.toFixed(0)} MB, min ${Math.min(...rss).toFixed(0)}, max ${Math.max(...rss).toFixed(0)}, last ${rss.at(-1)!.toFixed(0)} MB; ` +
            `slope over the second half ${slope === null ? 'n/a' : `${slope.toFixed(2)} MB/min`}; ${failures} failed calls`,
          'RSS of the proxy process (VmRSS), sampled every 10 s; CPU ms/call is per interval, from /proc (10 ms ticks)',
          ...heapNotes,
        ],
      };
    } finally {
      await stopAll(servers);
      rmSync(dir, { recursive: true, force: true });
    }
  },
});
