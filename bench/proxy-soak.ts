/**
 * Memory soak of `polar proxy --engine vllm` under a steady stream of 100 KB Claude-Code-shaped Anthropic Messages
 * calls against the instant mock engine (capture and the SQLite commit included): RSS of the proxy process sampled
 * every 10 s for the whole run, so a leak or an unbounded cache shows as a slope. Calls come from C concurrent
 * sequential clients (default 4), each a session of its own that grows turn by turn like a real conversation and
 * starts over after `--turns` turns (so the store's per-session base cache sees new sessions all the time).
 * Run: bun bench/proxy-soak.ts [--quick] [--minutes=M] [--clients=C] [--turns=T]   (default 10 minutes; --quick 1)
 * Prints one row per sample and a summary row: RSS first / min / max / last, and the slope over the second half.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineBench, numberOption } from './lib/bench.ts';
import { treeCpuMs, treeRssBytes } from './lib/proc.ts';
import { messagesBodies, type Json } from './lib/requests.ts';
import { startMockAndProxy, stopAll, type ServerProcess } from './lib/servers.ts';
import type { Cell } from './lib/table.ts';

const SAMPLE_MS = 10_000;

const positive = { ok: (value: number) => value > 0, what: 'a positive number' };

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
    const dir = mkdtempSync(join(tmpdir(), 'polar-proxy-soak-'));
    const servers: ServerProcess[] = [];
    try {
      const { proxy } = await startMockAndProxy(servers, join(dir, 'polar.db'));
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
      const samples: { s: number; rss: number; calls: number; cpu: number }[] = [];
      const t0 = performance.now();
      const sample = () => samples.push({ s: (performance.now() - t0) / 1000, rss: treeRssBytes(proxy.pid) / 2 ** 20, calls, cpu: treeCpuMs(proxy.pid) });
      sample();
      const timer = setInterval(sample, SAMPLE_MS);
      await Promise.all(Array.from({ length: clients }, (_, c) => client(c)));
      clearInterval(timer);
      sample();
      const rows: Cell[][] = samples.map((x, i) => {
        const prev = samples[i - 1];
        const cpuPerCall = prev && x.calls > prev.calls ? (x.cpu - prev.cpu) / (x.calls - prev.calls) : null;
        return [`${x.s.toFixed(0)} s`, x.calls, x.rss, cpuPerCall ?? '-'];
      });
      const rss = samples.map((x) => x.rss);
      const half = samples.slice(Math.floor(samples.length / 2));
      const slope = half.length >= 2 ? ((half.at(-1)!.rss - half[0]!.rss) / (half.at(-1)!.s - half[0]!.s)) * 60 : null;
      rows.push(['summary', calls, rss.at(-1)!, (samples.at(-1)!.cpu - samples[0]!.cpu) / Math.max(1, calls)]);
      return {
        title: `Proxy RSS soak (polar proxy → instant mock, ${clients} clients, 100 KB Messages calls, sessions of ${turns} turns, ${minutes} min)`,
        columns: ['time', 'calls', 'RSS MB', 'CPU ms/call'],
        keyColumns: 1,
        rows,
        notes: [
          `RSS first ${rss[0]!.toFixed(0)} MB, min ${Math.min(...rss).toFixed(0)}, max ${Math.max(...rss).toFixed(0)}, last ${rss.at(-1)!.toFixed(0)} MB; ` +
            `slope over the second half ${slope === null ? 'n/a' : `${slope.toFixed(2)} MB/min`}; ${failures} failed calls`,
          'RSS of the proxy process (VmRSS), sampled every 10 s; CPU ms/call is per interval, from /proc (10 ms ticks)',
        ],
      };
    } finally {
      await stopAll(servers);
      rmSync(dir, { recursive: true, force: true });
    }
  },
});
