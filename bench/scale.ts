/**
 * Scale: 1,000 concurrent sessions (also with --quick: one run takes ~30 s) of recorded harness traffic against the
 * simulator, in two variants, each session replaying the request bodies of one harness's recording (Claude Code, Codex,
 * Gemini CLI, opencode, pi in four dialects, qwen-code; test/fixtures/harness-traffic) in order, with its own API
 * key, all sessions at once. The simulator is `polar sim` with its default timing model and room for every session.
 * - `1000-sessions`: through `polar proxy --engine sim` (ad-hoc sessions: each key opens one; no session table).
 * - `gateway-1000-sessions`: through one `polar gateway` node (engine kind sim). The bench dispatches every session
 *   with `POST /sessions` (shell harness whose command only sleeps, local runtime without bwrap, max_run_workers and
 *   init_workers = sessions, so all are RUNNING at once), waits until `GET /health` shows them all RUNNING, replays the
 *   traffic against the node's own port with each session id as the API key (the proxy is the node's fallback), then
 *   cancels every session with `DELETE /sessions/{id}` and waits until every stage is empty (cleanup done).
 * Each server runs in its own process. Reports client latency, added latency (client − the record's engine_ms), peak
 * RSS, dispatch and cleanup time for the gateway, and every error (there must be none).
 * Run: bun bench/scale.ts [--quick] [1000-sessions|gateway-1000-sessions]; `--sessions=N` changes the count.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineBench } from './lib/bench.ts';
import { peakRssBytes, processTree, treeCpuMs, treeRssBytes } from './lib/proc.ts';
import { freePort, startServer, stopAll, type ServerProcess } from './lib/servers.ts';
import { percentile } from './lib/stats.ts';
import { HARNESS_TRAFFIC } from '../test/support/harness-traffic.ts';

const ROOT = join(import.meta.dir, '..');
const FIXTURES = HARNESS_TRAFFIC;
// Bun's fetch keeps at most 256 requests in flight per process unless told otherwise; sessions must not queue here.
const MAX_HTTP = '4096';

if (process.env.BUN_CONFIG_MAX_HTTP_REQUESTS !== MAX_HTTP) {
  const child = Bun.spawn([process.execPath, ...process.argv.slice(1)], { env: { ...process.env, BUN_CONFIG_MAX_HTTP_REQUESTS: MAX_HTTP }, stdio: ['ignore', 'inherit', 'inherit'] });
  process.exit(await child.exited);
}

interface RecordedRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** One recording per folder (harness/condition), requests in file order. */
function recordings(): { name: string; requests: RecordedRequest[] }[] {
  const out: { name: string; requests: RecordedRequest[] }[] = [];
  for (const harness of readdirSync(FIXTURES).sort()) {
    for (const condition of readdirSync(join(FIXTURES, harness)).sort()) {
      const dir = join(FIXTURES, harness, condition);
      const requests = readdirSync(dir)
        .filter((f) => f.endsWith('-request.json'))
        .sort()
        .map((f) => {
          const rec = JSON.parse(readFileSync(join(dir, f), 'utf8')) as { url: string; headers?: Record<string, string>; body: unknown };
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(rec.headers ?? {})) {
            // Recorded keys and hop-by-hop headers are replaced; the session key goes in per session.
            if (!['authorization', 'x-api-key', 'x-goog-api-key', 'host', 'content-length', 'connection', 'accept-encoding', 'transfer-encoding'].includes(k.toLowerCase())) headers[k] = v;
          }
          const url = new URL(rec.url, 'http://x');
          url.searchParams.delete('key');
          return { url: url.pathname + url.search, headers, body: JSON.stringify(rec.body) };
        });
      if (requests.length > 0) out.push({ name: `${harness}/${condition}`, requests });
    }
  }
  return out;
}

function withKey(req: RecordedRequest, key: string): Record<string, string> {
  const h = { ...req.headers };
  if (req.url.startsWith('/v1/messages')) h['x-api-key'] = key;
  else if (req.url.startsWith('/v1beta/')) h['x-goog-api-key'] = key;
  else h.authorization = `Bearer ${key}`;
  return h;
}

interface Replay {
  latencies: number[];
  /** Client latency of each call, per session key, in call order (index = the record's seq). */
  bySession: Map<string, number[]>;
  errors: string[];
  wallS: number;
}

/** Every session replays its recording at once against `baseUrl`, each with its own key; calls within a session run in order. */
async function replay(baseUrl: string, keys: string[], recs: { name: string; requests: RecordedRequest[] }[]): Promise<Replay> {
  const errors: string[] = [];
  const latencies: number[] = [];
  const bySession = new Map<string, number[]>();
  const t0 = performance.now();
  await Promise.all(
    keys.map(async (key, i) => {
      const rec = recs[i % recs.length]!;
      const own: number[] = [];
      bySession.set(key, own);
      for (const req of rec.requests) {
        const a = performance.now();
        try {
          const response = await fetch(`${baseUrl}${req.url}`, { method: 'POST', headers: withKey(req, key), body: req.body });
          const text = await response.text();
          if (response.status !== 200) errors.push(`${rec.name} ${req.url}: HTTP ${response.status} ${text.slice(0, 200)}`);
          else if (/"type":\s*"error"|event: error/.test(text)) errors.push(`${rec.name} ${req.url}: in-band error ${text.slice(0, 200)}`);
        } catch (error) {
          errors.push(`${rec.name} ${req.url}: ${error instanceof Error ? error.message : String(error)}`);
        }
        const ms = performance.now() - a;
        latencies.push(ms);
        own.push(ms);
      }
    }),
  );
  return { latencies, bySession, errors, wallS: (performance.now() - t0) / 1000 };
}

/**
 * Added latency (client − engine_ms of the call's CompletionRecord) and in-proxy time (record total_ms − engine_ms),
 * in ms, from `GET /sessions/{key}/completions`; a session whose record count differs from its calls is an error.
 */
async function recordTimings(baseUrl: string, bySession: Map<string, number[]>, errors: string[]): Promise<{ added: number[]; inProxy: number[] }> {
  const added: number[] = [];
  const inProxy: number[] = [];
  for (const [key, own] of bySession) {
    // The records of a session are readable with its own API key (or the admin token).
    const response = await fetch(`${baseUrl}/sessions/${key}/completions`, { headers: { authorization: `Bearer ${key}` } });
    const body = (await response.json()) as { completions?: { seq: number; timings: { engine_ms: number; total_ms: number } }[] };
    const records = body.completions ?? [];
    if (records.length !== own.length) errors.push(`${key}: ${records.length} records for ${own.length} calls`);
    for (const r of records) {
      const client = own[r.seq];
      if (client !== undefined) added.push(client - r.timings.engine_ms);
      inProxy.push(r.timings.total_ms - r.timings.engine_ms);
    }
  }
  return { added, inProxy };
}

async function simMetrics(simUrl: string): Promise<string[]> {
  return (await (await fetch(`${simUrl}/metrics`)).text()).split('\n').filter((l) => /^vllm:(num_requests_running|prompt_tokens_total|generation_tokens_total)/.test(l));
}

/** Runs `fn` over `items` with at most `limit` calls in flight. */
async function pool<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]!);
  }));
}

interface Stages {
  queued: number;
  init: number;
  ready: number;
  running: number;
  postrun: number;
}

/** Polls the node's `GET /health` every 100 ms until `done(stages)`; throws after `timeoutMs` with the last counts. */
async function waitForStages(nodeUrl: string, what: string, timeoutMs: number, done: (s: Stages) => boolean): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let last: Stages | null = null;
  while (performance.now() < deadline) {
    last = ((await (await fetch(`${nodeUrl}/health`)).json()) as { stages: Stages }).stages;
    if (done(last)) return;
    await Bun.sleep(100);
  }
  throw new Error(`gateway: ${what} not reached within ${timeoutMs} ms (stages ${JSON.stringify(last)})`);
}

/** `--sessions=N` (one argument: bench/lib/bench.ts takes bare words for variant names). */
const argSessions = (ctx: { args: string[] }): number | null => {
  const arg = ctx.args.find((a) => a.startsWith('--sessions='));
  if (arg === undefined) return null;
  const n = Number(arg.slice('--sessions='.length));
  if (!Number.isInteger(n) || n < 1) throw new Error(`--sessions needs a positive integer, got ${arg}`);
  return n;
};

const recordingsNote = (recs: { name: string }[]) =>
  `${recs.length} recordings (${recs.map((r) => r.name).join(', ')}), session i replays recording i mod ${recs.length}; all sessions start at once.`;

async function runProxy(sessions: number, recs: { name: string; requests: RecordedRequest[] }[], simUrl: string, dir: string, servers: ServerProcess[]) {
  const proxyPort = freePort();
  const proxy = await startServer({
    name: 'polar proxy',
    cmd: [process.execPath, join(ROOT, 'src/main.ts'), 'proxy', '--port', String(proxyPort), '--engine', 'sim', '--engine-url', simUrl, '--db', join(dir, 'polar.db')],
    port: proxyPort,
    env: { BUN_CONFIG_MAX_HTTP_REQUESTS: MAX_HTTP },
    timeoutMs: 60_000,
  });
  servers.push(proxy);
  const keys = Array.from({ length: sessions }, (_, i) => `bench-scale-${String(i).padStart(4, '0')}`);
  const cpu0 = treeCpuMs(proxy.pid);
  const { latencies, bySession, errors, wallS } = await replay(proxy.url, keys, recs);
  const proxyCpuMs = treeCpuMs(proxy.pid) - cpu0;
  const peakMB = peakRssBytes(proxy.pid) / 2 ** 20;
  const { added, inProxy } = await recordTimings(proxy.url, bySession, errors);
  const sim = await simMetrics(simUrl);
  for (const e of errors.slice(0, 20)) console.error(`error: ${e}`);
  return {
    title: `scale · ${sessions} concurrent sessions of recorded harness traffic through one polar proxy → polar sim`,
    columns: ['sessions', 'calls', 'wall s', 'calls/s', 'client p50 ms', 'client p99 ms', 'added p50 ms', 'added p99 ms', 'in-proxy p99 ms', 'proxy CPU ms/call', 'proxy peak RSS MB', 'errors'],
    rows: [[sessions, latencies.length, wallS, latencies.length / wallS, percentile(latencies, 50), percentile(latencies, 99), percentile(added, 50), percentile(added, 99), percentile(inProxy, 99), proxyCpuMs / latencies.length, peakMB, errors.length]],
    keyColumns: 1,
    notes: [
      recordingsNote(recs),
      'added = client latency − engine_ms of the call’s CompletionRecord; in-proxy = record total_ms − engine_ms (the proxy’s own view).',
      'simulator and proxy share the machine’s cores with the client, so latency includes CPU contention with the simulator’s tokenizer.',
      ...(errors.length > 0 ? [`first error: ${errors[0]}`] : []),
      ...(sim.length > 0 ? [`sim: ${sim.join('; ')}`] : []),
    ],
  };
}

/** Seconds a dispatched session's harness sleeps; far longer than a run, so every session is RUNNING until cancelled. */
const HARNESS_SLEEP_S = 900;

async function runGateway(sessions: number, recs: { name: string; requests: RecordedRequest[] }[], simUrl: string, dir: string, servers: ServerProcess[]) {
  const port = freePort();
  const config = {
    engine: { kind: 'sim', url: simUrl, timeout_s: 900 },
    store: { path: join(dir, 'polar.db') },
    gateway: {
      nodes: [{
        node_id: 'bench', host: '127.0.0.1', port,
        // Everything RUNNING at once: INIT may take every session, READY needs no buffer, POSTRUN only cleans up.
        init_workers: sessions, ready_buffer: 0, max_run_workers: sessions, postrun_workers: 64,
        runtime: { kind: 'local', isolation: 'none' },
        work_root: join(dir, 'work'), harness_cache_dir: join(dir, 'harnesses'),
      }],
    },
  };
  const configPath = join(dir, 'polar.json');
  writeFileSync(configPath, JSON.stringify(config));
  const node = await startServer({
    name: 'polar gateway',
    cmd: [process.execPath, join(ROOT, 'src/main.ts'), 'gateway', '--config', configPath, '--node-id', 'bench'],
    port,
    readyPath: '/health',
    env: { BUN_CONFIG_MAX_HTTP_REQUESTS: MAX_HTTP },
    timeoutMs: 60_000,
  });
  servers.push(node);

  // Peak RSS of the node with its children (sh + sleep per session), sampled every second from /proc.
  let treePeak = 0;
  let procPeak = 0;
  const sample = () => {
    treePeak = Math.max(treePeak, treeRssBytes(node.pid));
    procPeak = Math.max(procPeak, processTree(node.pid).length);
  };
  const sampler = setInterval(sample, 1000);
  try {
    const errors: string[] = [];
    const ids = Array.from({ length: sessions }, (_, i) => `bench-gw-${String(i).padStart(4, '0')}`);
    const task = {
      task_id: 'bench-scale', instruction: 'wait', num_samples: sessions, timeout_seconds: HARNESS_SLEEP_S + 300,
      agent: { harness: 'shell', command: `exec sleep ${HARNESS_SLEEP_S}`, model_name: 'sim' },
      builder: { strategy: 'per_request' },
    };
    const t0 = performance.now();
    await pool(ids.map((id, i) => [id, i] as const), 64, async ([id, i]) => {
      const response = await fetch(`${node.url}/sessions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ session_id: id, task, sample_index: i }) });
      const text = await response.text();
      if (response.status !== 202) throw new Error(`POST /sessions ${id}: HTTP ${response.status} ${text.slice(0, 300)}`);
    });
    const dispatchS = (performance.now() - t0) / 1000;
    await waitForStages(node.url, `all ${sessions} sessions RUNNING`, 300_000, (s) => s.running === sessions);
    const runningS = (performance.now() - t0) / 1000;
    sample();

    const cpu0 = treeCpuMs(node.pid);
    const run = await replay(node.url, ids, recs);
    const cpuMs = treeCpuMs(node.pid) - cpu0;
    errors.push(...run.errors);
    sample();
    const { added, inProxy } = await recordTimings(node.url, run.bySession, errors);

    const c0 = performance.now();
    await pool(ids, 64, async (id) => {
      const response = await fetch(`${node.url}/sessions/${id}`, { method: 'DELETE' });
      const body = (await response.json()) as { cancelled?: boolean };
      if (response.status !== 200 || body.cancelled !== true) errors.push(`DELETE /sessions/${id}: HTTP ${response.status} ${JSON.stringify(body).slice(0, 200)}`);
    });
    await waitForStages(node.url, 'every session cleaned up', 300_000, (s) => s.queued + s.init + s.ready + s.running + s.postrun === 0);
    const cleanupS = (performance.now() - c0) / 1000;
    // Each session must have ended as cancelled (not failed earlier, e.g. its harness dying mid-replay).
    await pool(ids, 64, async (id) => {
      const view = (await (await fetch(`${node.url}/sessions/${id}`)).json()) as { status?: string; error?: string | null };
      if (view.status !== 'ERROR' || !/cancel/i.test(view.error ?? '')) errors.push(`${id}: ended ${view.status} (${view.error ?? 'no error'}), expected cancelled`);
    });
    const leftover = processTree(node.pid).length - 1;
    if (leftover > 0) errors.push(`${leftover} child processes of the gateway still alive after cleanup`);
    const nodeProcPeakMB = peakRssBytes(node.pid) / 2 ** 20;
    const sim = await simMetrics(simUrl);
    for (const e of errors.slice(0, 20)) console.error(`error: ${e}`);
    const { latencies, wallS } = run;
    return {
      title: `scale · ${sessions} concurrent sessions dispatched to one polar gateway (shell harness sleeping) replaying recorded harness traffic → polar sim`,
      columns: ['sessions', 'dispatch s', 'all RUNNING s', 'calls', 'wall s', 'calls/s', 'client p50 ms', 'client p99 ms', 'added p50 ms', 'added p99 ms', 'in-proxy p99 ms', 'gateway CPU ms/call', 'gateway peak RSS MB', 'gateway + children peak RSS MB', 'peak processes', 'cancel + cleanup s', 'errors'],
      rows: [[sessions, dispatchS, runningS, latencies.length, wallS, latencies.length / wallS, percentile(latencies, 50), percentile(latencies, 99), percentile(added, 50), percentile(added, 99), percentile(inProxy, 99), cpuMs / latencies.length, nodeProcPeakMB, treePeak / 2 ** 20, procPeak, cleanupS, errors.length]],
      keyColumns: 1,
      notes: [
        recordingsNote(recs),
        `dispatch s = the ${sessions} POST /sessions (64 in flight) accepted; all RUNNING s = from the first POST until GET /health shows ${sessions} RUNNING (runtime start: a work dir per session and a \`sh -c 'exec sleep ${HARNESS_SLEEP_S}'\` process group, no bwrap).`,
        'each session’s id is its API key on the gateway’s own port (session API + proxy fallback); added = client latency − engine_ms of the call’s CompletionRecord; in-proxy = record total_ms − engine_ms.',
        'gateway CPU = the node and its children during the replay; gateway peak RSS = VmHWM of the node process; with children = sum of VmRSS over the node’s process tree, sampled every second (shared pages counted per process).',
        'cancel + cleanup s = from the first DELETE /sessions/{id} until every stage is empty (harness killed, trajectory built, evaluator, teardown); every session must end ERROR "cancelled" and no child may be left.',
        ...(errors.length > 0 ? [`first error: ${errors[0]}`] : []),
        ...(sim.length > 0 ? [`sim: ${sim.join('; ')}`] : []),
      ],
    };
  } finally {
    clearInterval(sampler);
  }
}

await defineBench({
  name: 'scale',
  variants: (ctx) => {
    const n = argSessions(ctx) ?? 1000;
    return [`${n}-sessions`, `gateway-${n}-sessions`];
  },
  async run(variant) {
    const gateway = variant.startsWith('gateway-');
    const sessions = Number.parseInt(gateway ? variant.slice('gateway-'.length) : variant, 10);
    const recs = recordings();
    if (recs.length === 0) throw new Error(`no recordings under ${FIXTURES}`);
    const dir = mkdtempSync(join(tmpdir(), 'polar-bench-scale-'));
    const servers: ServerProcess[] = [];
    try {
      const simPort = freePort();
      const sim = await startServer({
        name: 'polar sim',
        cmd: [process.execPath, join(ROOT, 'src/main.ts'), 'sim', '--port', String(simPort), '--max-concurrency', String(sessions)],
        port: simPort,
        readyPath: '/health',
        timeoutMs: 60_000,
      });
      servers.push(sim);
      return gateway ? await runGateway(sessions, recs, sim.url, dir, servers) : await runProxy(sessions, recs, sim.url, dir, servers);
    } finally {
      await stopAll(servers);
      rmSync(dir, { recursive: true, force: true });
    }
  },
});
