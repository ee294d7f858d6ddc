/**
 * Runs bench/lib/load.mjs (autocannon under Node, in its own process so the load generator never shares an event loop
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
  const child = Bun.spawn(['node', join(import.meta.dir, 'load.mjs'), `${bodyFile}.spec`], { cwd: join(import.meta.dir, '..', '..'), stdout: 'pipe', stderr: 'inherit' });
  const out = await new Response(child.stdout).text();
  if ((await child.exited) !== 0) throw new Error(`load generator failed against ${name}`);
  return JSON.parse(out.trim().split('\n').pop()!) as LoadResult;
}
