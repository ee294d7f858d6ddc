/**
 * Scale-out: one `polar rollout` server drives N `polar gateway` processes (each its own process, port and SQLite file,
 * registered and heartbeating like on separate hosts) through S sessions submitted at once, against `polar sim`
 * (instant timing: prefill and decode cost only the simulator's tokenizer). Everything on 127.0.0.1.
 * - Tasks: S / group GRPO groups of `group` samples (default 8), submitted with `POST /rollout/task/submit` (16 in
 *   flight); the server holds what the gateways have no slot for and dispatches as slots free up.
 * - Harness: `shell`, a recorded-traffic player: a generated `sh` script per recording under
 *   test/fixtures/harness-traffic that POSTs each recorded request body in order with `curl` to the gateway's own proxy
 *   (`$POLAR_BASE_URL`, the session id as the API key in the dialect's header). Not a real CLI: a session costs a
 *   process group, a work dir and 2–3 model calls, so the control plane is what is measured.
 * - Gateway pools (per gateway): init_workers 8, ready_buffer 4, max_run_workers 16, postrun_workers 8 (the rollout
 *   server's nodeSlots: 28, 20 of them before POSTRUN), so at most 16 × N harness scripts run at once;
 *   `--run-workers=K` changes max_run_workers.
 * Measured, all from the stores after the run plus /proc while it runs:
 * - dispatch rate: sessions / (last − first arrival at a gateway), arrival = the gateway's result row time − the
 *   result's timing.e2e_ms (e2e counts from the gateway's accept); fill rate: the first min(S, slots) dispatches over
 *   their span (the server dispatching as fast as it can into empty gateways).
 * - results/s: sessions / (last − first result recorded by the server).
 * - callback latency: server results.created_at − gateway results.created_at (the gateway stores its result, then
 *   POSTs it to /callbacks/session_result; same clock, ms resolution).
 * - server RSS (VmHWM) and CPU ms per session (utime + stime of the `polar rollout` process from the first submit to
 *   the last result, / S).
 * - lost: sessions without a final status and a stored result on the server, or tasks not COMPLETED; duplicated: a
 *   session that ran on more than one gateway (a result row in two gateway stores) plus the server's
 *   polar_rollout_duplicate_results_total; calls: completion records in the gateway stores (every recorded call of
 *   every session must be there).
 * Run: bun bench/scale-out.ts [--quick] [--gateways=N] [--sessions=S] [--group=G] [--run-workers=K]
 *   [--player=none] [--profile-server=DIR] (default 16 gateways × 10,000 sessions; --quick 4 × 400). Variant names are
 *   `<N>x<S>`. `--player=none` runs `true` as the harness (no model calls), to load the control plane alone;
 *   `--profile-server=DIR` writes a CPU profile of the rollout server there (Bun `--cpu-prof-md`).
 */
import { Database } from 'bun:sqlite';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineBench, type BenchContext } from './lib/bench.ts';
import { peakRssBytes, treeCpuMs, treeRssBytes } from './lib/proc.ts';
import { freePort, startServer, stopAll, type ServerProcess } from './lib/servers.ts';
import { percentile } from './lib/stats.ts';
import { nodeSlots } from '../src/rollout/scheduler.ts';
import { HARNESS_TRAFFIC } from '../test/support/harness-traffic.ts';

const ROOT = join(import.meta.dir, '..');
const MAX_HTTP = '4096';

interface Sizes {
  gateways: number;
  sessions: number;
  group: number;
  runWorkers: number;
  /** 'traffic' (default): the recorded-traffic player; 'none': the harness is `true` (no model calls: control plane only). */
  player: 'traffic' | 'none';
  /** Write a CPU profile of the rollout server (Bun --cpu-prof-md) into this directory. */
  profileServer: string | null;
}

function intArg(ctx: BenchContext, name: string): number | null {
  const arg = ctx.args.find((a) => a.startsWith(`--${name}=`));
  if (arg === undefined) return null;
  const n = Number(arg.slice(name.length + 3));
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} needs a positive integer, got ${arg}`);
  return n;
}

function sizes(ctx: BenchContext): Sizes {
  return {
    gateways: intArg(ctx, 'gateways') ?? (ctx.quick ? 4 : 16),
    sessions: intArg(ctx, 'sessions') ?? (ctx.quick ? 400 : 10_000),
    group: intArg(ctx, 'group') ?? 8,
    runWorkers: intArg(ctx, 'run-workers') ?? 16,
    player: ctx.args.includes('--player=none') ? 'none' : 'traffic',
    profileServer: ctx.args.find((a) => a.startsWith('--profile-server='))?.slice('--profile-server='.length) ?? null,
  };
}

// ------------------------------------------------------------------------------------------- the traffic player

const KEY_HEADERS = ['authorization', 'x-api-key', 'x-goog-api-key', 'host', 'content-length', 'connection', 'accept-encoding', 'transfer-encoding'];
const shq = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/**
 * One `sh` script per recording: `curl` POSTs each recorded body in order to `$POLAR_BASE_URL` + the recorded path,
 * with the recorded headers (keys dropped) and `$POLAR_API_KEY` in the dialect's key header; any HTTP error fails the
 * script (curl -f), so the session ends ERROR. Returns the script paths and the number of calls of each.
 */
function writePlayers(dir: string): { path: string; calls: number; name: string }[] {
  const out: { path: string; calls: number; name: string }[] = [];
  for (const harness of readdirSync(HARNESS_TRAFFIC).sort()) {
    for (const condition of readdirSync(join(HARNESS_TRAFFIC, harness)).sort()) {
      const src = join(HARNESS_TRAFFIC, harness, condition);
      const files = readdirSync(src).filter((f) => f.endsWith('-request.json')).sort();
      if (files.length === 0) continue;
      const recDir = join(dir, `${harness}-${condition}`);
      mkdirSync(recDir, { recursive: true });
      const lines = ['set -e'];
      files.forEach((f, i) => {
        const rec = JSON.parse(readFileSync(join(src, f), 'utf8')) as { url: string; headers?: Record<string, string>; body: unknown };
        const bodyPath = join(recDir, `${i}.json`);
        writeFileSync(bodyPath, JSON.stringify(rec.body));
        const url = new URL(rec.url, 'http://x');
        url.searchParams.delete('key');
        const path = url.pathname + url.search;
        const headers = Object.entries(rec.headers ?? {}).filter(([k]) => !KEY_HEADERS.includes(k.toLowerCase()));
        if (!headers.some(([k]) => k.toLowerCase() === 'content-type')) headers.push(['content-type', 'application/json']);
        const key = path.startsWith('/v1/messages') ? 'x-api-key: $POLAR_API_KEY' : path.startsWith('/v1beta/') ? 'x-goog-api-key: $POLAR_API_KEY' : 'authorization: Bearer $POLAR_API_KEY';
        const h = headers.map(([k, v]) => `-H ${shq(`${k}: ${v}`)}`).join(' ');
        lines.push(`curl -sSf -o /dev/null --max-time 300 ${h} -H "${key}" --data-binary @${shq(bodyPath)} "$POLAR_BASE_URL"${shq(path)}`);
      });
      const script = join(dir, `${harness}-${condition}.sh`);
      writeFileSync(script, `${lines.join('\n')}\n`);
      out.push({ path: script, calls: files.length, name: `${harness}/${condition}` });
    }
  }
  return out;
}

// ------------------------------------------------------------------------------------------- helpers

async function pool<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]!);
  }));
}

/** Sum of a Prometheus counter's samples (all label sets). */
function counter(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(name) && (line[name.length] === ' ' || line[name.length] === '{')) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

const loadAvg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

// ------------------------------------------------------------------------------------------- the run

async function run(sz: Sizes) {
  const dir = mkdtempSync(join(tmpdir(), 'polar-bench-scale-out-'));
  const servers: ServerProcess[] = [];
  const gateways: ServerProcess[] = [];
  try {
    const players = writePlayers(join(dir, 'play'));
    if (players.length === 0) throw new Error(`no recordings under ${HARNESS_TRAFFIC}`);
    const simPort = freePort();
    const sim = await startServer({
      name: 'polar sim',
      cmd: [process.execPath, join(ROOT, 'src/main.ts'), 'sim', '--port', String(simPort), '--max-concurrency', '4096', '--prefill-tps', '0', '--decode-tps', '0'],
      port: simPort, readyPath: '/health', timeoutMs: 60_000, env: { BUN_CONFIG_MAX_HTTP_REQUESTS: MAX_HTTP },
    });
    servers.push(sim);

    const serverPort = freePort();
    const serverConfig = join(dir, 'rollout.json');
    writeFileSync(serverConfig, JSON.stringify({ rollout: { host: '127.0.0.1', port: serverPort, db: join(dir, 'rollout.db') }, store: { path: join(dir, 'rollout-store.db') } }));
    const server = await startServer({
      name: 'polar rollout',
      cmd: [process.execPath, ...(sz.profileServer ? ['--cpu-prof-md', `--cpu-prof-dir=${sz.profileServer}`] : []), join(ROOT, 'src/main.ts'), 'rollout', '--config', serverConfig],
      port: serverPort, readyPath: '/health', timeoutMs: 60_000, env: { BUN_CONFIG_MAX_HTTP_REQUESTS: MAX_HTTP },
    });
    servers.push(server);

    const capacity = { init_workers: 8, ready_buffer: 4, max_run_workers: sz.runWorkers, postrun_workers: 8 };
    const slots = nodeSlots(capacity);
    const t0Start = performance.now();
    const idx = Array.from({ length: sz.gateways }, (_, i) => i);
    const gwDbs: string[] = [];
    await pool(idx, 4, async (i) => {
      const port = freePort();
      const id = `gw-${String(i).padStart(3, '0')}`;
      const db = join(dir, `${id}.db`);
      gwDbs[i] = db;
      const config = {
        engine: { kind: 'sim', url: sim.url, timeout_s: 300 },
        store: { path: db },
        gateway: {
          rollout_url: server.url,
          nodes: [{ node_id: id, host: '127.0.0.1', port, ...capacity, runtime: { kind: 'local', isolation: 'none' }, work_root: join(dir, 'work', id), harness_cache_dir: join(dir, 'harnesses') }],
        },
      };
      const path = join(dir, `${id}.json`);
      writeFileSync(path, JSON.stringify(config));
      gateways[i] = await startServer({ name: `polar gateway ${id}`, cmd: [process.execPath, join(ROOT, 'src/main.ts'), 'gateway', '--config', path], port, readyPath: '/health', timeoutMs: 120_000 });
    });
    // Every gateway registered with the server.
    const deadline = performance.now() + 120_000;
    for (;;) {
      const nodes = (await (await fetch(`${server.url}/nodes`)).json()) as unknown[];
      if (nodes.length >= sz.gateways) break;
      if (performance.now() > deadline) throw new Error(`only ${nodes.length} of ${sz.gateways} gateways registered`);
      await Bun.sleep(200);
    }
    const startS = (performance.now() - t0Start) / 1000;
    const gatewayIdleRss = gateways.reduce((a, g) => a + treeRssBytes(g.pid), 0);

    // Sampling: server RSS and the gateways' total RSS every second.
    let serverRssPeak = 0;
    let gatewaysRssPeak = 0;
    const sampler = setInterval(() => {
      serverRssPeak = Math.max(serverRssPeak, treeRssBytes(server.pid));
      gatewaysRssPeak = Math.max(gatewaysRssPeak, gateways.reduce((a, g) => a + treeRssBytes(g.pid), 0));
    }, 1000);

    const tasks = Math.ceil(sz.sessions / sz.group);
    const load0 = loadAvg();
    const cpu0 = treeCpuMs(server.pid);
    const gwCpu0 = gateways.reduce((a, g) => a + treeCpuMs(g.pid), 0);
    const simCpu0 = treeCpuMs(sim.pid);
    const t0 = performance.now();
    let submitted = 0;
    await pool(Array.from({ length: tasks }, (_, i) => i), 16, async (i) => {
      const player = players[i % players.length]!;
      const n = Math.min(sz.group, sz.sessions - i * sz.group);
      const task = {
        task_id: `scale-out-${String(i).padStart(5, '0')}`, instruction: 'replay recorded traffic', num_samples: n, timeout_seconds: 900,
        agent: { harness: 'shell', command: sz.player === 'none' ? 'true' : `sh ${player.path}`, model_name: 'sim' },
        builder: { strategy: 'per_request' },
      };
      const response = await fetch(`${server.url}/rollout/task/submit`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(task) });
      const text = await response.text();
      if (response.status !== 200) throw new Error(`submit ${task.task_id}: HTTP ${response.status} ${text.slice(0, 300)}`);
      submitted += n;
    });
    const submitS = (performance.now() - t0) / 1000;

    // Until every session has a result (the server's counter); 120 s without a new result ends the wait, and what is
    // missing then counts as lost.
    let metrics = '';
    let lastLog = 0;
    let lastDone = -1;
    let lastProgress = performance.now();
    let stalled = false;
    for (;;) {
      metrics = await (await fetch(`${server.url}/metrics`)).text();
      const done = counter(metrics, 'polar_rollout_session_results_total');
      if (done >= submitted) break;
      if (done !== lastDone) {
        lastDone = done;
        lastProgress = performance.now();
      } else if (performance.now() - lastProgress > 120_000) {
        stalled = true;
        console.error(`scale-out: no new result for 120 s at ${done}/${submitted}; the rest count as lost`);
        break;
      }
      if (performance.now() - lastLog > 15_000) {
        lastLog = performance.now();
        console.error(`scale-out: ${done}/${submitted} results after ${((performance.now() - t0) / 1000).toFixed(0)} s (load ${loadAvg()})`);
      }
      await Bun.sleep(500);
    }
    const wallS = (performance.now() - t0) / 1000 - (stalled ? 120 : 0);
    const serverCpuMs = treeCpuMs(server.pid) - cpu0;
    // Gateways with their live children (finished harness processes are not counted: their CPU is the player's).
    const gatewaysCpuMs = gateways.reduce((a, g) => a + treeCpuMs(g.pid), 0) - gwCpu0;
    const simCpuMs = treeCpuMs(sim.pid) - simCpu0;
    const load1 = loadAvg();
    clearInterval(sampler);
    const serverPeakMB = peakRssBytes(server.pid) / 2 ** 20;
    // Let late duplicates (a retried callback) arrive before counting them.
    await Bun.sleep(1000);
    metrics = await (await fetch(`${server.url}/metrics`)).text();

    // ---- from the stores
    const sdb = new Database(join(dir, 'rollout.db'), { readonly: true });
    const sSessions = sdb.query('SELECT session_id, status, attempt FROM sessions').all() as { session_id: string; status: string; attempt: number }[];
    const sResults = new Map((sdb.query('SELECT session_id, status, created_at FROM results').all() as { session_id: string; status: string; created_at: number }[]).map((r) => [r.session_id, r]));
    sdb.close();
    const gwRows = new Map<string, { created_at: number; e2e: number; status: string }[]>();
    let calls = 0;
    for (const path of gwDbs) {
      const db = new Database(path, { readonly: true });
      for (const r of db.query(`SELECT session_id, status, created_at, json_extract(result, '$.timing.e2e_ms') AS e2e FROM results`).all() as { session_id: string; status: string; created_at: number; e2e: number }[]) {
        const list = gwRows.get(r.session_id) ?? [];
        list.push(r);
        gwRows.set(r.session_id, list);
      }
      calls += (db.query('SELECT count(*) AS n FROM completions').get() as { n: number }).n;
      db.close();
    }
    const callbackFailures = gateways.flatMap((g) => g.output().split('\n').filter((l) => /callback for .* failed/.test(l)));
    for (const line of callbackFailures.slice(0, 5)) console.error(`scale-out: ${line}`);
    const final = new Set(['COMPLETED', 'ERROR', 'TIMEOUT', 'CANCELLED']);
    const lost = sSessions.filter((s) => !final.has(s.status) || !sResults.has(s.session_id)).length + Math.max(0, submitted - sSessions.length);
    const ranTwice = [...gwRows.values()].filter((l) => l.length > 1).length;
    const dupCallbacks = counter(metrics, 'polar_rollout_duplicate_results_total');
    const stale = counter(metrics, 'polar_rollout_stale_results_total');
    const redispatched = counter(metrics, 'polar_rollout_sessions_redispatched_total');
    const notCompleted = sSessions.filter((s) => s.status !== 'COMPLETED').length;
    const callbackMs: number[] = [];
    const arrivals: number[] = [];
    for (const [id, rows] of gwRows) {
      const s = sResults.get(id);
      const g = rows[rows.length - 1]!;
      arrivals.push(g.created_at - g.e2e);
      if (s) callbackMs.push(s.created_at - g.created_at);
    }
    arrivals.sort((a, b) => a - b);
    const recorded = [...sResults.values()].map((r) => r.created_at).sort((a, b) => a - b);
    const span = (a: number[]) => (a.length > 1 ? (a[a.length - 1]! - a[0]!) / 1000 : Number.NaN);
    const fill = Math.min(arrivals.length, sz.gateways * slots);
    const fillS = fill > 1 ? (arrivals[fill - 1]! - arrivals[0]!) / 1000 : Number.NaN;
    const expectedCalls = sz.player === 'none' ? 0 : Array.from({ length: tasks }, (_, i) => players[i % players.length]!.calls * Math.min(sz.group, sz.sessions - i * sz.group)).reduce((a, b) => a + b, 0);
    const loadNote = `load average (1/5/15 min) at start ${load0}, at end ${load1}; ${Bun.env.HOSTNAME ?? 'this host'} has ${navigator.hardwareConcurrency} cores`;
    return {
      title: `scale-out · one polar rollout → ${sz.gateways} polar gateway processes · ${submitted} sessions (${tasks} groups of ${sz.group}) of recorded traffic (sh + curl) → polar sim`,
      columns: ['gateways', 'sessions', 'wall s', 'dispatch /s', 'fill /s', 'results /s', 'callback p50 ms', 'callback p99 ms', 'server peak RSS MB', 'server CPU ms/session', 'lost', 'duplicated', 'not COMPLETED', 'calls', 'expected calls'],
      rows: [[sz.gateways, submitted, wallS, arrivals.length / span(arrivals), fill / fillS, recorded.length / span(recorded), percentile(callbackMs, 50), percentile(callbackMs, 99), serverPeakMB, serverCpuMs / submitted, lost, ranTwice + dupCallbacks, notCompleted, calls, expectedCalls]],
      keyColumns: 2,
      notes: [
        `${players.length} recordings (${players.map((p) => `${p.name}: ${p.calls}`).join(', ')}); group i replays recording i mod ${players.length}.`,
        `per gateway: init_workers ${capacity.init_workers}, ready_buffer ${capacity.ready_buffer}, max_run_workers ${capacity.max_run_workers}, postrun_workers ${capacity.postrun_workers} (${slots} slots; ${sz.gateways * slots} in flight at most); started and registered in ${startS.toFixed(1)} s; idle RSS of all gateways ${(gatewayIdleRss / 2 ** 20).toFixed(0)} MB, peak ${(gatewaysRssPeak / 2 ** 20).toFixed(0)} MB (with harness children, sampled each second).`,
        `submit of ${tasks} tasks (16 in flight) took ${submitS.toFixed(1)} s; server RSS sampled peak ${(serverRssPeak / 2 ** 20).toFixed(0)} MB; server CPU ${(serverCpuMs / 1000).toFixed(1)} s over ${wallS.toFixed(1)} s wall; gateway processes ${(gatewaysCpuMs / submitted).toFixed(1)} ms CPU per session (${(gatewaysCpuMs / 1000).toFixed(0)} s in all), simulator ${(simCpuMs / submitted).toFixed(1)} ms per session.`,
        `duplicated = sessions run on two gateways (${ranTwice}) + duplicate callbacks acknowledged by the server (${dupCallbacks}); stale results ${stale}; re-dispatched ${redispatched}; callbacks the gateways gave up on ${callbackFailures.length}.`,
        loadNote,
      ],
    };
  } finally {
    await stopAll([...gateways, ...servers.slice().reverse()]);
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.env.BUN_CONFIG_MAX_HTTP_REQUESTS !== MAX_HTTP) {
  const child = Bun.spawn([process.execPath, ...process.argv.slice(1)], { env: { ...process.env, BUN_CONFIG_MAX_HTTP_REQUESTS: MAX_HTTP }, stdio: ['ignore', 'inherit', 'inherit'] });
  process.exit(await child.exited);
}

await defineBench({
  name: 'scale-out',
  variants: (ctx) => {
    const s = sizes(ctx);
    return [`${s.gateways}x${s.sessions}`];
  },
  run: (_variant, ctx) => run(sizes(ctx)),
});
