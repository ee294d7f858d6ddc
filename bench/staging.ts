/**
 * Staging: how well the gateway node's pools keep the engine busy (docs/architecture.md#staging-model). An in-process GatewayNode runs
 * sessions of the `shell` harness (curl makes 3 model calls through the node's proxy) against an in-process
 * simulator whose timing model makes each call take up to ~130 ms; the local runtime's prepare action sleeps (INIT
 * comparable to RUN) and the evaluation is a short test_on_output command. For READY buffer sizes 0, 1 and 4 and
 * INIT pools of 1, 2 and 4 workers it reports the simulator's busy fraction (time with ≥ 1 running sequence / wall
 * time) over the whole batch, sessions/s and mean stage times. Run: bun bench/staging.ts [--quick] [ready1-init2 ...]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SessionResult, TaskRequest } from '../src/core/records.ts';
import { createEngineClient } from '../src/engines/index.ts';
import { GatewayNode } from '../src/gateway/node.ts';
import { createProxyApp } from '../src/proxy/app.ts';
import { SimServer } from '../src/sim/server.ts';
import { openStore } from '../src/store/index.ts';
import { defineBench } from './lib/bench.ts';

const READY = [0, 1, 4];
const INIT = [1, 2, 4];
const RUN_WORKERS = 2;
const PREPARE_S = 0.4;
const CALLS = 3;

const call = (i: number) =>
  `curl -sf -m 30 "$OPENAI_BASE_URL/chat/completions" -H "authorization: Bearer $OPENAI_API_KEY" -H 'content-type: application/json' ` +
  `-d '{"model":"qwen","max_tokens":64,"messages":[{"role":"user","content":"step ${i}: list the files"}]}' >/dev/null`;
const HARNESS_COMMAND = Array.from({ length: CALLS }, (_, i) => call(i)).join(' && ');

const mean = (xs: number[]) => (xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length);

await defineBench({
  name: 'staging',
  variants: () => READY.flatMap((r) => INIT.map((i) => `ready${r}-init${i}`)),
  async run(variant, ctx) {
    const [, ready, init] = /^ready(\d+)-init(\d+)$/.exec(variant)!.map(Number) as [number, number, number];
    const sessions = ctx.quick ? 8 : 24;
    const work = mkdtempSync(join(tmpdir(), 'polar-bench-staging-'));
    // ~130 ms per call: up to 64 generated tokens at 500 tok/s decode (the prompts are tiny), so RUN (3 calls) ≈ INIT.
    const sim = await SimServer.start({ prefillTps: 40_000, decodeTps: 500, maxConcurrency: RUN_WORKERS });
    const store = openStore(':memory:');
    const engine = createEngineClient({ kind: 'sim', url: sim.url, mode: 'chat', timeoutMs: 60_000 });
    await engine.probe();
    const node = new GatewayNode({
      nodeId: 'bench',
      capacity: { init_workers: init, ready_buffer: ready, max_run_workers: RUN_WORKERS, postrun_workers: 2 },
      store,
      workRoot: work,
      autoInstallHarness: false,
      proxy: (sessions) => createProxyApp({ engine, store, sessions }),
      log: () => {},
    });
    try {
      await node.start();
      const task: TaskRequest = {
        task_id: 'staging-bench',
        instruction: 'list the files',
        num_samples: sessions,
        timeout_seconds: 120,
        agent: { harness: 'shell', command: HARNESS_COMMAND, model_name: 'qwen' },
        builder: { strategy: 'per_request' },
        runtime: { kind: 'local', prepare: [{ exec: { command: `sleep ${PREPARE_S}` } }] },
        evaluator: { strategy: 'test_on_output', config: { command: 'sleep 0.05', expect_exit_code: 0 } },
      } as TaskRequest;
      const before = sim.metrics();
      const t0 = performance.now();
      const ids = Array.from({ length: sessions }, (_, i) => `staging-${variant}-${i}-${crypto.randomUUID()}`);
      for (const [i, id] of ids.entries()) node.dispatch({ session_id: id, task, sample_index: i });
      const results: SessionResult[] = await Promise.all(ids.map((id) => node.wait(id)));
      const wallMs = performance.now() - t0;
      const after = sim.metrics();
      const failed = results.filter((r) => r.status !== 'COMPLETED');
      if (failed.length > 0) throw new Error(`${failed.length} sessions did not complete: ${failed[0]!.status} ${failed[0]!.error ?? ''}`);
      const busy = (after.busyMs - before.busyMs) / (after.wallMs - before.wallMs);
      const calls = after.requests - before.requests;
      return {
        title: `staging · engine busy fraction by READY buffer and INIT pool (max_run_workers ${RUN_WORKERS})`,
        columns: ['ready_buffer', 'init_workers', 'sessions', 'engine busy', 'sessions/s', 'wall s', 'init ms', 'ready wait ms', 'run ms', 'postrun ms', 'model calls'],
        rows: [[ready, init, sessions, busy, sessions / (wallMs / 1000), wallMs / 1000, mean(results.map((r) => r.timing.init_ms)), mean(results.map((r) => r.timing.ready_queue_ms)), mean(results.map((r) => r.timing.run_ms)), mean(results.map((r) => r.timing.postrun_ms)), calls]],
        keyColumns: 2,
        notes: [
          `${sessions} sessions dispatched at once; prepare = \`sleep ${PREPARE_S}\`, harness = shell with ${CALLS} curl calls (up to ~130 ms each in the simulator), evaluation = test_on_output \`sleep 0.05\`.`,
          'engine busy = simulator time with ≥ 1 running sequence / wall time, over the batch; stage times are means over sessions.',
        ],
      };
    } finally {
      await node.stop();
      await sim.stop();
      store.close();
      rmSync(work, { recursive: true, force: true });
    }
  },
});
