// Open-loop load at a fixed rate (wrk2's model), run under Node in its own process like load.mjs. Request i is sent
// at start + i / rate whether or not earlier ones have been answered, over a keep-alive pool of up to `connections`
// sockets (node:http Agent; a request that finds every socket busy waits in the agent's queue, and that wait counts
// in its latency). Latency is from the moment the request is handed to the client to its last response byte, in
// microseconds (hdr-histogram-js, 3 significant digits); the sender's own lateness against the schedule is reported
// apart (`scheduleLagP99Ms`), so a late timer is not billed to the server.
// Written here rather than taken from npm: autocannon's `overallRate` sends each connection's quota for the second
// in a closed-loop burst at the second's start (bench/README.md), and loadtest's `--rps` keeps whole-millisecond
// buckets, too coarse for sub-millisecond latencies.
// Usage: node bench/lib/open-load.mjs SPEC.json → one JSON line (LoadResult of bench/lib/load.ts, latencies in ms
// with fractions). SPEC: {url, method?, headers, bodyFile, connections, durationS, rate}.
import http from 'node:http';
import { readFileSync } from 'node:fs';
import * as hdr from 'hdr-histogram-js';

const spec = JSON.parse(readFileSync(process.argv[2], 'utf8'));
if (!(spec.rate > 0) || !(spec.durationS > 0) || !(spec.connections > 0)) throw new Error('open-load: rate, durationS and connections must be positive');
const url = new URL(spec.url);
const body = spec.bodyFile ? readFileSync(spec.bodyFile) : Buffer.alloc(0);
const headers = { ...(spec.headers ?? {}), 'content-length': String(body.byteLength) };
const agent = new http.Agent({ keepAlive: true, maxSockets: spec.connections });
const histogram = () => hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 120_000_000, numberOfSignificantValueDigits: 3 });
const latencyUs = histogram();
const lagUs = histogram();
const total = Math.round(spec.rate * spec.durationS);
const intervalNs = 1e9 / spec.rate;
let sent = 0;
let finished = 0;
let errors = 0;
let non2xx = 0;
let ok = 0;
const start = process.hrtime.bigint();
const elapsedNs = () => Number(process.hrtime.bigint() - start);

function settle() {
  finished++;
  if (finished < total) return;
  const durationS = elapsedNs() / 1e9;
  const ms = (us) => us / 1000;
  console.log(JSON.stringify({
    requests: ok,
    durationS,
    rps: ok / durationS,
    errors,
    timeouts: 0,
    non2xx,
    latencyP50Ms: ms(latencyUs.getValueAtPercentile(50)),
    latencyP90Ms: ms(latencyUs.getValueAtPercentile(90)),
    latencyP99Ms: ms(latencyUs.getValueAtPercentile(99)),
    latencyP999Ms: ms(latencyUs.getValueAtPercentile(99.9)),
    latencyMaxMs: ms(latencyUs.maxValue),
    scheduleLagP99Ms: ms(lagUs.getValueAtPercentile(99)),
  }));
  agent.destroy();
}

function send() {
  const sentAt = process.hrtime.bigint();
  const request = http.request({ agent, host: url.hostname, port: url.port, path: url.pathname + url.search, method: spec.method ?? 'POST', headers }, (response) => {
    response.on('data', () => {});
    response.on('end', () => {
      latencyUs.recordValue(Math.max(1, Math.round(Number(process.hrtime.bigint() - sentAt) / 1000)));
      if (response.statusCode >= 200 && response.statusCode < 300) ok++;
      else non2xx++;
      settle();
    });
    response.on('error', () => {
      errors++;
      settle();
    });
  });
  request.on('error', () => {
    errors++;
    settle();
  });
  request.end(body);
}

function tick() {
  const now = elapsedNs();
  const due = Math.min(total, Math.floor(now / intervalNs) + 1);
  while (sent < due) {
    lagUs.recordValue(Math.max(1, Math.round((now - sent * intervalNs) / 1000)));
    sent++;
    send();
  }
  if (sent >= total) return;
  // Timers fire at ~1 ms granularity: a request due sooner goes out with the next tick (its lag is recorded), so
  // the sender never spins a core the server needs.
  setTimeout(tick, Math.max(0, Math.floor((sent * intervalNs - elapsedNs()) / 1e6)));
}
tick();
