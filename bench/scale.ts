/**
 * Scale: 1,000 concurrent sessions (also with --quick: one run takes ~30 s) of recorded harness traffic through one proxy against the
 * simulator. Each session replays the request bodies of one harness's recording (Claude Code, Codex, Gemini CLI,
 * opencode, pi in four dialects, qwen-code; ../shared/fixtures/harness-traffic) in order, with its own API key,
 * all sessions at once. The proxy is `polar proxy --engine sim` (ad-hoc sessions: each key opens one; the gateway's
 * session table is not on this path), the simulator is `polar sim` with its default timing model and room for every
 * session, each in its own process. Reports client latency, added latency (client − the record's engine_ms), the
 * proxy's peak RSS and every error (there must be none). Run: bun bench/scale.ts [--quick]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineBench } from './lib/bench.ts';
import { peakRssBytes, treeCpuMs } from './lib/proc.ts';
import { freePort, startServer, stopAll, type ServerProcess } from './lib/servers.ts';
import { percentile } from './lib/stats.ts';
import { HARNESS_TRAFFIC } from '../test/support/shared-fixtures.ts';

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
          const rec = JSON.parse(readFileSync(join(dir, f), 'utf8')) as { url: string; headers: Record<string, string>; body: unknown };
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(rec.headers)) {
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

await defineBench({
  name: 'scale',
  variants: () => ['1000-sessions'],
  async run(variant) {
    const sessions = Number.parseInt(variant, 10);
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
      const proxyPort = freePort();
      const proxy = await startServer({
        name: 'polar proxy',
        cmd: [process.execPath, join(ROOT, 'src/main.ts'), 'proxy', '--port', String(proxyPort), '--engine', 'sim', '--engine-url', sim.url, '--db', join(dir, 'polar.db')],
        port: proxyPort,
        env: { BUN_CONFIG_MAX_HTTP_REQUESTS: MAX_HTTP },
        timeoutMs: 60_000,
      });
      servers.push(proxy);

      const errors: string[] = [];
      const latencies: number[] = [];
      const bySession = new Map<string, number[]>();
      const cpu0 = treeCpuMs(proxy.pid);
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: sessions }, async (_, i) => {
          const key = `bench-scale-${String(i).padStart(4, '0')}`;
          const rec = recs[i % recs.length]!;
          const own: number[] = [];
          bySession.set(key, own);
          for (const req of rec.requests) {
            const a = performance.now();
            try {
              const response = await fetch(`${proxy.url}${req.url}`, { method: 'POST', headers: withKey(req, key), body: req.body });
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
      const wallS = (performance.now() - t0) / 1000;
      const proxyCpuMs = treeCpuMs(proxy.pid) - cpu0;
      const peakMB = peakRssBytes(proxy.pid) / 2 ** 20;

      // Added latency: what the client saw minus the engine time the proxy recorded for the same call.
      const added: number[] = [];
      const inProxy: number[] = [];
      for (const [key, own] of bySession) {
        const response = await fetch(`${proxy.url}/sessions/${key}/completions`);
        const body = (await response.json()) as { completions?: { seq: number; timings: { engine_ms: number; total_ms: number } }[] };
        const records = body.completions ?? [];
        if (records.length !== own.length) errors.push(`${key}: ${records.length} records for ${own.length} calls`);
        for (const r of records) {
          const client = own[r.seq];
          if (client !== undefined) added.push(client - r.timings.engine_ms);
          inProxy.push(r.timings.total_ms - r.timings.engine_ms);
        }
      }
      const simMetrics = (await (await fetch(`${sim.url}/metrics`)).text()).split('\n').filter((l) => /^vllm:(num_requests_running|prompt_tokens_total|generation_tokens_total)/.test(l));
      for (const e of errors.slice(0, 20)) console.error(`error: ${e}`);
      return {
        title: `scale · ${sessions} concurrent sessions of recorded harness traffic through one polar proxy → polar sim`,
        columns: ['sessions', 'calls', 'wall s', 'calls/s', 'client p50 ms', 'client p99 ms', 'added p50 ms', 'added p99 ms', 'in-proxy p99 ms', 'proxy CPU ms/call', 'proxy peak RSS MB', 'errors'],
        rows: [[sessions, latencies.length, wallS, latencies.length / wallS, percentile(latencies, 50), percentile(latencies, 99), percentile(added, 50), percentile(added, 99), percentile(inProxy, 99), proxyCpuMs / latencies.length, peakMB, errors.length]],
        keyColumns: 1,
        notes: [
          `${recs.length} recordings (${recs.map((r) => r.name).join(', ')}), session i replays recording i mod ${recs.length}; all sessions start at once.`,
          'added = client latency − engine_ms of the call’s CompletionRecord; in-proxy = record total_ms − engine_ms (the proxy’s own view).',
          'simulator and proxy share the machine’s cores with the client, so latency includes CPU contention with the simulator’s tokenizer.',
          ...(errors.length > 0 ? [`first error: ${errors[0]}`] : []),
          ...(simMetrics.length > 0 ? [`sim: ${simMetrics.join('; ')}`] : []),
        ],
      };
    } finally {
      await stopAll(servers);
      rmSync(dir, { recursive: true, force: true });
    }
  },
});
