/**
 * Proxy overhead against the gateways a user would run instead (docs/protocol-notes.md#peer-gateways), all against the same
 * instant mock engine (bench/lib/mock-engine.ts), each contender in its own process on 127.0.0.1:
 * - Anthropic Messages → OpenAI Chat: claude-code-router 2.0.0 vs `polar proxy`;
 * - OpenAI Chat → OpenAI Chat: Portkey gateway 1.15.2 (it cannot translate Messages to an OpenAI upstream) vs
 *   `polar proxy`;
 * - plus the mock called directly (with the Chat body of the same size and streaming mode) as the baseline;
 * - and, for JSON variants, the floor (bench/lib/floor-proxy.ts: a bare Bun server that only parses the request and
 *   the engine's answer, no translation, capture or store): what any Bun proxy that reads both documents pays.
 * Our proxy runs as `polar proxy --engine vllm`: it asks the mock for token ids and logprobs and commits every
 * completion to SQLite, so capture is part of our cost. It always calls the engine without streaming and replays
 * the answer as SSE (synthetic streaming); the peers stream from the mock.
 * Per variant (dialect × size × json|sse): added latency p50/p99 over the direct call at low load (sequential
 * requests, contenders alternating in batches), requests/s and CPU ms per request at 64 connections (autocannon),
 * RSS of the contender at the end of its load and again `--idle` seconds later (default 15; 0 skips the wait: how much
 * of the load's peak each process hands back to the OS once idle), and ours/peer ratios.
 * Run: bun bench/proxy-peers.ts [--quick] [--idle=S] [variant...]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineBench, numberOption } from './lib/bench.ts';
import { treeCpuMs, treeRssBytes } from './lib/proc.ts';
import { chatBodies, messagesBodies, type Json } from './lib/requests.ts';
import { runLoad, type LoadResult } from './lib/load.ts';
import { freePort, startMockAndProxy, startServer, stopAll, type ServerProcess } from './lib/servers.ts';
import { percentile } from './lib/stats.ts';
import type { Cell } from './lib/table.ts';
import { writeCcrConfig } from './peers/ccr-config.ts';

const PEERS = join(import.meta.dir, '.peers');
const CCR_CLI = join(PEERS, 'ccr/node_modules/@musistudio/claude-code-router/dist/cli.js');
const PORTKEY_PKG = join(PEERS, 'portkey/node_modules/@portkey-ai/gateway/package.json');
const SESSION_KEY = 'bench-session';

type Dialect = 'messages' | 'chat';
type Size = 'small' | '100k';
type Mode = 'json' | 'sse';

interface Contender {
  name: string;
  server: ServerProcess;
  path: string;
  headers: Record<string, string>;
  body: string;
  /** Marker that a complete answer contains (the last SSE event or a JSON field). */
  done: string;
}

function parseVariant(variant: string): { dialect: Dialect; size: Size; mode: Mode } {
  const [dialect, size, mode] = variant.split('-') as [Dialect, Size, Mode];
  return { dialect, size, mode };
}

async function ensurePeers(): Promise<void> {
  if ((await Bun.file(CCR_CLI).exists()) && (await Bun.file(PORTKEY_PKG).exists())) return;
  const install = Bun.spawnSync(['sh', join(import.meta.dir, 'peers/install.sh')], { stdout: 'inherit', stderr: 'inherit' });
  if (install.exitCode !== 0) throw new Error('bench/peers/install.sh failed; the peers could not be installed from npm');
}

/** One request, body read to the end; returns ms from send to last byte. */
async function timedCall(c: Contender): Promise<number> {
  const t0 = performance.now();
  const response = await fetch(`${c.server.url}${c.path}`, { method: 'POST', headers: c.headers, body: c.body });
  const text = await response.text();
  const ms = performance.now() - t0;
  if (response.status !== 200 || !text.includes(c.done)) {
    throw new Error(`${c.name} answered ${response.status} without ${JSON.stringify(c.done)}: ${text.slice(0, 300)}`);
  }
  return ms;
}

/** One contender under `connections` for `durationS`; RSS at the end and, when `idleS` > 0, after `idleS` s without calls. */
async function load(c: Contender, dir: string, connections: number, durationS: number, idleS: number): Promise<LoadResult & { cpuMsPerRequest: number; rssMB: number; rssLaterMB: number }> {
  const cpu0 = treeCpuMs(c.server.pid);
  const result = await runLoad(dir, c.name, { url: `${c.server.url}${c.path}`, headers: c.headers, body: c.body, connections, durationS });
  const cpu1 = treeCpuMs(c.server.pid);
  const rssMB = treeRssBytes(c.server.pid) / 2 ** 20;
  if (idleS > 0) await Bun.sleep(idleS * 1000);
  return { ...result, cpuMsPerRequest: result.requests > 0 ? (cpu1 - cpu0) / result.requests : Number.NaN, rssMB, rssLaterMB: idleS > 0 ? treeRssBytes(c.server.pid) / 2 ** 20 : Number.NaN };
}

await defineBench({
  name: 'proxy-peers',
  variants: () => ['messages', 'chat'].flatMap((d) => ['small', '100k'].flatMap((s) => ['json', 'sse'].map((m) => `${d}-${s}-${m}`))),
  async run(variant, ctx) {
    const { dialect, size, mode } = parseVariant(variant);
    const idleS = numberOption(ctx.args, 'idle', 15, { ok: (value) => Number.isFinite(value) && value >= 0, what: 'seconds, 0 or more' });
    await ensurePeers();
    const dir = mkdtempSync(join(tmpdir(), 'polar-bench-peers-'));
    const servers: ServerProcess[] = [];
    try {
      const { mock, proxy: ours } = await startMockAndProxy(servers, join(dir, 'polar.db'));
      const peerPort = freePort();
      let peer: ServerProcess;
      if (dialect === 'messages') {
        const home = join(dir, 'ccr-home');
        writeCcrConfig(home, peerPort, mock.url);
        peer = await startServer({ name: 'claude-code-router 2.0.0', cmd: ['node', CCR_CLI, 'start'], port: peerPort, env: { HOME: home } });
      } else {
        peer = await startServer({ name: 'Portkey gateway 1.15.2', cmd: ['node', join(import.meta.dir, 'peers/portkey-loopback.mjs'), `--port=${peerPort}`, '--headless'], port: peerPort, env: { NODE_ENV: 'production' } });
      }
      servers.push(peer);
      // The floor has no streaming path: JSON variants only.
      let floor: ServerProcess | null = null;
      if (mode === 'json') {
        const floorPort = freePort();
        floor = await startServer({ name: 'floor: bare Bun parse-and-forward', cmd: [process.execPath, join(import.meta.dir, 'lib', 'floor-proxy.ts'), '--port', String(floorPort), '--engine-url', mock.url], port: floorPort });
        servers.push(floor);
      }

      const stream = mode === 'sse';
      const bodies = dialect === 'messages' ? messagesBodies() : chatBodies();
      const chat = chatBodies();
      const pick = (b: { small: Json; large: Json }) => JSON.stringify({ ...(size === 'small' ? b.small : b.large), stream });
      const json = { 'content-type': 'application/json' };
      const clientBody = pick(bodies);
      const clientDone = dialect === 'messages' ? (stream ? 'message_stop' : '"stop_reason"') : stream ? '[DONE]' : '"finish_reason"';
      const contenders: Contender[] = [
        { name: 'direct (mock)', server: mock, path: '/v1/chat/completions', headers: json, body: pick(chat), done: stream ? '[DONE]' : '"finish_reason"' },
        {
          name: 'polar proxy',
          server: ours,
          path: dialect === 'messages' ? '/v1/messages' : '/v1/chat/completions',
          headers: dialect === 'messages' ? { ...json, 'x-api-key': SESSION_KEY, 'anthropic-version': '2023-06-01' } : { ...json, authorization: `Bearer ${SESSION_KEY}` },
          body: clientBody,
          done: clientDone,
        },
        dialect === 'messages'
          ? { name: peer.name, server: peer, path: '/v1/messages', headers: { ...json, 'x-api-key': 'bench', 'anthropic-version': '2023-06-01' }, body: clientBody, done: clientDone }
          : {
              name: peer.name,
              server: peer,
              path: '/v1/chat/completions',
              headers: { ...json, authorization: 'Bearer bench', 'x-portkey-provider': 'openai', 'x-portkey-custom-host': `${mock.url}/v1` },
              body: clientBody,
              done: clientDone,
            },
        ...(floor === null ? [] : [{ name: floor.name, server: floor, path: dialect === 'messages' ? '/v1/messages' : '/v1/chat/completions', headers: json, body: clientBody, done: clientDone }]),
      ];

      // Low load: sequential requests, contenders alternating in batches so drift hits all of them alike.
      // Warm: after 30 calls JavaScriptCore and V8 still run much of a small call's path in their lower tiers (polar's
      // sequential p50 was ~1.0 ms after 30 calls, ~0.5 back to back after 1,000; bench/README.md, session 6).
      const warmup = ctx.quick ? 10 : size === 'small' ? 1000 : 200;
      const perContender = ctx.quick ? 60 : 300;
      const batch = 10;
      for (const c of contenders) for (let i = 0; i < warmup; i++) await timedCall(c);
      const samples = new Map<Contender, number[]>(contenders.map((c) => [c, []]));
      for (let done = 0; done < perContender; done += batch) {
        for (const c of contenders) for (let i = 0; i < batch; i++) samples.get(c)!.push(await timedCall(c));
      }
      // 64 connections: one contender at a time, so they never compete for the 2 cores of a small box.
      // 100 KB calls take a peer ~100 ms of CPU each, so 64 queued calls need seconds before the first completes.
      const durationS = size === '100k' ? (ctx.quick ? 8 : 15) : ctx.quick ? 3 : 10;
      const loads = new Map<Contender, Awaited<ReturnType<typeof load>>>();
      for (const c of contenders) loads.set(c, await load(c, dir, 64, durationS, idleS));

      const direct = contenders[0]!;
      const d50 = percentile(samples.get(direct)!, 50);
      const d99 = percentile(samples.get(direct)!, 99);
      const figures = contenders.map((c) => {
        const s = samples.get(c)!;
        const l = loads.get(c)!;
        const p50 = percentile(s, 50);
        const p99 = percentile(s, 99);
        return {
          name: c.name,
          p50,
          p99,
          added50: c === direct ? 0 : p50 - d50,
          added99: c === direct ? 0 : p99 - d99,
          rps: l.rps,
          cpu: l.cpuMsPerRequest,
          rss: l.rssMB,
          rssLater: l.rssLaterMB,
          errors: l.errors + l.timeouts + l.non2xx,
        };
      });
      const finite = (x: number): Cell => (Number.isFinite(x) ? x : 'n/a'); // e.g. CPU per request when none completed
      const rows: Cell[][] = figures.map((f) => [f.name, f.p50, f.p99, f.added50, f.added99, f.rps, finite(f.cpu), f.rss, finite(f.rssLater), f.errors]);
      const [, o, p] = figures as [unknown, (typeof figures)[number], (typeof figures)[number]];
      // A peer that answered nothing under load (0 req/s) has no ratio; NaN would reach the table as null.
      const ratio = (a: number, b: number): Cell => (b > 0 && Number.isFinite(a / b) ? a / b : 'n/a');
      rows.push([`ratio ours/peer`, ratio(o.p50, p.p50), ratio(o.p99, p.p99), ratio(o.added50, p.added50), ratio(o.added99, p.added99), ratio(o.rps, p.rps), ratio(o.cpu, p.cpu), ratio(o.rss, p.rss), ratio(o.rssLater, p.rssLater), '']);
      const sizeText = size === 'small' ? 'small request' : '100 KB Claude-Code-shaped request';
      return {
        title: `proxy overhead · ${dialect === 'messages' ? 'Anthropic Messages → OpenAI Chat' : 'OpenAI Chat → OpenAI Chat'} · ${size === 'small' ? 'small' : '100 KB'} · ${stream ? 'streaming' : 'non-streaming'}`,
        columns: ['contender', 'p50 ms', 'p99 ms', 'added p50 ms', 'added p99 ms', 'req/s @64 conn', 'CPU ms/req', 'RSS MB after load', `RSS MB ${idleS} s later`, 'errors'],
        rows,
        keyColumns: 1,
        notes: [
          `${sizeText}; ${perContender} sequential requests per contender (after ${warmup} warm-up), then ${durationS} s at 64 connections each (autocannon).`,
          'added = contender − direct call to the mock (direct uses the OpenAI Chat body of the same size and mode).',
          'polar proxy = `polar proxy --engine vllm`: capture included (token ids + logprobs from the mock, one SQLite record per call); synthetic streaming.',
          ...(dialect === 'chat' ? ['Portkey 1.15.2 cannot translate Anthropic Messages to an OpenAI upstream, so it is compared on Chat → Chat.'] : []),
          ...(dialect === 'chat' && stream ? ['Portkey sleeps ~25 ms before the first chunk of every stream (visible in its streaming latency).'] : []),
          'CPU ms/req and RSS are of the contender process tree only (not the mock, not the load generator).',
          ...(idleS > 0 ? [`RSS ${idleS} s later: the same process after ${idleS} s without calls, sampled before the next contender's load starts.`] : []),
          ...(floor === null ? [] : ['floor = bench/lib/floor-proxy.ts: a bare Bun server that parses the request and the engine\'s answer and nothing else (no translation, capture or store); the ratio row is still ours/peer.']),
        ],
      };
    } finally {
      await stopAll(servers);
      rmSync(dir, { recursive: true, force: true });
    }
  },
});
