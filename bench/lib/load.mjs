// Closed-loop load with autocannon (https://github.com/mcollina/autocannon), run under Node in its own process so
// the load generator never shares an event loop with a contender or with the benchmark script.
// Usage: node bench/lib/load.mjs SPEC.json → one JSON line {requests, durationS, rps, errors, timeouts, non2xx,
// latencyP50Ms, latencyP99Ms}. SPEC: {url, method, headers, bodyFile?, connections, durationS, rate?}; `rate` caps the
// total requests per second over all connections (autocannon `overallRate`), for latency at a fixed offered load.
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';

const spec = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const result = await autocannon({
  url: spec.url,
  method: spec.method ?? 'POST',
  headers: spec.headers ?? {},
  body: spec.bodyFile ? readFileSync(spec.bodyFile) : undefined,
  connections: spec.connections,
  duration: spec.durationS,
  timeout: 30,
  ...(spec.rate ? { overallRate: spec.rate } : {}),
});
const completed = result.requests.total;
console.log(JSON.stringify({
  requests: completed,
  durationS: result.duration,
  rps: completed / result.duration,
  errors: result.errors,
  timeouts: result.timeouts,
  non2xx: result.non2xx,
  latencyP50Ms: result.latency.p50,
  latencyP99Ms: result.latency.p99,
  latencyP90Ms: result.latency.p90,
}));
