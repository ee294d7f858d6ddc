/**
 * Runs bench/lib/load.mjs (autocannon) or, for an open-loop rate, bench/lib/open-load.mjs under Node, in its own process so the load generator never shares an event loop
 * with a contender) against one URL and returns its result line. The body and the spec are written under `dir`.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface LoadSpec {
  url: string;
  headers: Record<string, string>;
  /** The request body sent on every call (JSON text). */
  body: string;
  connections: number;
  durationS: number;
  /** Total requests per second over all connections (autocannon `overallRate`); absent = closed loop. */
  rate?: number;
  /**
   * With `rate`: send on a fixed schedule instead (bench/lib/open-load.mjs, open loop: a request every 1/rate s
   * whether or not earlier ones were answered; latencies in fractional ms).
   */
  openLoop?: boolean;
}

/** load.mjs's result: counts, achieved rate, and client-side latency percentiles in whole ms (autocannon). */
export interface LoadResult {
  requests: number;
  durationS: number;
  rps: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  latencyP50Ms: number;
  latencyP90Ms: number;
  latencyP99Ms: number;
  /** Open loop only: p99.9 and max latency, and the sender's p99 lateness against its schedule, ms. */
  latencyP999Ms?: number;
  latencyMaxMs?: number;
  scheduleLagP99Ms?: number;
}

/**
 * @param name file-name stem for the body and spec under `dir` (non-word characters become `_`).
 * @throws Error when the load generator exits non-zero.
 */
export async function runLoad(dir: string, name: string, spec: LoadSpec): Promise<LoadResult> {
  const bodyFile = join(dir, `${name.replace(/\W+/g, '_')}.json`);
  writeFileSync(bodyFile, spec.body);
  const { body: _body, ...rest } = spec;
  writeFileSync(`${bodyFile}.spec`, JSON.stringify({ ...rest, bodyFile }));
  const script = spec.openLoop ? 'open-load.mjs' : 'load.mjs';
  const child = Bun.spawn(['node', join(import.meta.dir, script), `${bodyFile}.spec`], { cwd: join(import.meta.dir, '..', '..'), stdout: 'pipe', stderr: 'inherit' });
  const out = await new Response(child.stdout).text();
  if ((await child.exited) !== 0) throw new Error(`load generator failed against ${name}`);
  return JSON.parse(out.trim().split('\n').pop()!) as LoadResult;
}
