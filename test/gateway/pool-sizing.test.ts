/**
 * `pool_sizing: auto` (src/gateway/pool-sizing.ts): the INIT pool and READY buffer follow Little's law on observed
 * INIT and RUN times, bounded by the configured values; a node with fixed sizing prepares as far ahead as configured.
 */
import { afterEach, expect, test } from 'bun:test';
import { nodeSettingsFromConfig } from '../../src/cli/from-config.ts';
import { gatewayNodeSchema } from '../../src/config/sections/gateway.ts';
import { GatewayNode } from '../../src/gateway/node.ts';
import { HEADROOM, MIN_OBSERVATIONS, neededPools, PoolSizer } from '../../src/gateway/pool-sizing.ts';
import type { RuntimeFactory } from '../../src/gateway/runtimes/index.ts';
import type { Runtime, RuntimeProcess } from '../../src/gateway/runtimes/types.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { taskRequest } from '../support/tasks.ts';

test('neededPools: ceil(1.5 × run workers × INIT / RUN) + 1, capped by the configured values', () => {
  expect(HEADROOM).toBe(1.5);
  // INIT as long as RUN, 8 run workers: 12 + 1 sessions prepared ahead.
  expect(neededPools(8, 2000, 2000, { init_workers: 64, ready_buffer: 64 })).toEqual({ init_workers: 13, ready_buffer: 13 });
  // INIT twice RUN: twice the pipeline.
  expect(neededPools(8, 4000, 2000, { init_workers: 64, ready_buffer: 64 })).toEqual({ init_workers: 25, ready_buffer: 25 });
  // Caps hold.
  expect(neededPools(8, 4000, 2000, { init_workers: 10, ready_buffer: 16 })).toEqual({ init_workers: 10, ready_buffer: 16 });
  // Instant INIT: one worker, a buffer of one.
  expect(neededPools(8, 0, 2000, { init_workers: 64, ready_buffer: 64 })).toEqual({ init_workers: 1, ready_buffer: 1 });
  expect(() => neededPools(8, 100, 0, { init_workers: 4, ready_buffer: 4 })).toThrow(/RUN > 0/);
});

test('PoolSizer keeps the configured sizes until both stages have been observed, then follows their means', () => {
  const sizer = new PoolSizer(4, { init_workers: 32, ready_buffer: 32 });
  for (let i = 0; i < MIN_OBSERVATIONS; i++) sizer.observe('init', 1000);
  expect(sizer.sizes()).toEqual({ init_workers: 32, ready_buffer: 32 });
  for (let i = 0; i < MIN_OBSERVATIONS; i++) sizer.observe('run', 1000);
  expect(sizer.sizes()).toEqual({ init_workers: 7, ready_buffer: 7 });
  // INIT gets slower: the window mean moves and the pools grow.
  for (let i = 0; i < 64; i++) sizer.observe('init', 3000);
  expect(sizer.sizes()).toEqual({ init_workers: 19, ready_buffer: 19 });
});

/** Runtimes whose start takes `startMs` and whose harness runs `runMs`. */
function fakeRuntimes(startMs: number, runMs: number): RuntimeFactory {
  return (_spec, ctx) => {
    const key = ctx.instanceKey;
    const runtime: Runtime = {
      kind: 'fake', workDir: `/fake/${key}/work`, homeDir: `/fake/${key}/home`,
      start: () => Bun.sleep(startMs),
      stop: async () => {},
      exec: async () => ({ exitCode: 0, stdout: '', stderr: '', timedOut: false }),
      spawn: (): RuntimeProcess => {
        let finish!: (v: { exitCode: number | null; signal: string | null }) => void;
        const exited = new Promise<{ exitCode: number | null; signal: string | null }>((r) => { finish = r; });
        const timer = setTimeout(() => finish({ exitCode: 0, signal: null }), runMs);
        return { pid: null, exited, stdout: () => '', stderr: () => '', kill: async () => { clearTimeout(timer); finish({ exitCode: null, signal: 'SIGKILL' }); await exited; } };
      },
      upload: async () => {}, download: async () => {}, writeFile: async () => {},
    };
    return runtime;
  };
}

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup) await c();
  cleanup = [];
});

/**
 * 18 sessions (INIT ~10 ms, RUN 150 ms, one run worker); the most sessions in INIT + READY once 10 have started RUN
 * (by then the sessions prepared under the configured sizes before the first observations have run).
 */
async function maxPreparedAhead(poolSizing: 'fixed' | 'auto', rolloutUrl?: string) {
  const store: Store = openStore(':memory:');
  const node = new GatewayNode({
    nodeId: 'n1', capacity: { init_workers: 6, ready_buffer: 6, max_run_workers: 1, postrun_workers: 2 }, poolSizing,
    store, workRoot: '/nonexistent', runtimeFactory: fakeRuntimes(10, 150),
    ...(rolloutUrl ? { rollout: { url: rolloutUrl, heartbeatIntervalMs: 20 } } : {}),
  });
  cleanup.push(async () => { await node.stop(); store.close(); });
  if (rolloutUrl) await node.start();
  let runsStarted = 0;
  let maxAhead = 0;
  node.onEvent((e) => {
    if (e.status === 'RUNNING') runsStarted++;
    const c = node.stageCounts();
    if (runsStarted > 10) maxAhead = Math.max(maxAhead, c.init + c.ready);
  });
  const task = taskRequest('t', { instruction: 'do it', timeout_seconds: 30, agent: { command: 'true', model_name: 'm' }, builder: { strategy: 'per_request' } });
  const ids = Array.from({ length: 18 }, (_, i) => `s${i}`);
  for (const id of ids) node.dispatch({ session_id: id, task, sample_index: 0 });
  const results = await Promise.all(ids.map((id) => node.wait(id)));
  expect(results.every((r) => r.status === 'COMPLETED')).toBe(true);
  return { maxAhead, pools: node.poolSizes() };
}

test('a node with pool_sizing auto prepares only as far ahead as INIT / RUN calls for; fixed prepares what is configured', async () => {
  const fixed = await maxPreparedAhead('fixed');
  expect(fixed.pools).toEqual({ init_workers: 6, ready_buffer: 6 });
  expect(fixed.maxAhead).toBe(6);
  // INIT (~10 ms) is far shorter than RUN (150 ms): ceil(1.5 × 1 × INIT / RUN) + 1 = 2.
  const auto = await maxPreparedAhead('auto');
  expect(auto.pools).toEqual({ init_workers: 2, ready_buffer: 2 });
  expect(auto.maxAhead).toBeLessThanOrEqual(2);
});

test('a pool_sizing auto node reports the pools in use in its heartbeats (the rollout server plans with them); fixed reports none', async () => {
  const beats: Record<string, unknown>[] = [];
  const rollout = Bun.serve({
    hostname: '127.0.0.1', port: 0,
    fetch: async (req) => {
      if (new URL(req.url).pathname.endsWith('/heartbeat')) beats.push((await req.json()) as Record<string, unknown>);
      return Response.json({ ok: true });
    },
  });
  cleanup.push(async () => { rollout.stop(true); });
  const url = `http://127.0.0.1:${rollout.port}`;
  const store: Store = openStore(':memory:');
  const fixed = new GatewayNode({ nodeId: 'fixed', store, workRoot: '/nonexistent', rollout: { url, heartbeatIntervalMs: 20 } });
  await fixed.start();
  const until = async (cond: () => boolean) => {
    const deadline = Date.now() + 2000;
    while (!cond() && Date.now() < deadline) await Bun.sleep(10);
  };
  await until(() => beats.length > 0);
  await fixed.stop();
  store.close();
  expect(beats.length).toBeGreaterThan(0);
  expect(beats.some((b) => 'pools' in b)).toBe(false);
  await maxPreparedAhead('auto', url);
  await until(() => beats.some((b) => JSON.stringify(b.pools) === JSON.stringify({ init_workers: 2, ready_buffer: 2 })));
  expect(beats.filter((b) => 'pools' in b).at(-1)?.pools).toEqual({ init_workers: 2, ready_buffer: 2 });
});

test('gateway.nodes[].pool_sizing reaches the node settings; unknown values are rejected', () => {
  expect(nodeSettingsFromConfig(gatewayNodeSchema.parse({ pool_sizing: 'auto' }), '/srv').poolSizing).toBe('auto');
  expect(nodeSettingsFromConfig(gatewayNodeSchema.parse({}), '/srv').poolSizing).toBe('fixed');
  expect(gatewayNodeSchema.safeParse({ pool_sizing: 'dynamic' }).success).toBe(false);
});
