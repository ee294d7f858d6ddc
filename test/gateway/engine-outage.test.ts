/**
 * A gateway node whose engine goes down: queued and READY sessions wait for it (their waiting costs no budget) and run
 * once it is back; running ones are left alone; past `engineWaitMs` the waiting ones end ERROR "engine down: …".
 * The engine is a flag behind a real EngineHealthMonitor (as `polar gateway` wires it); the fake runtime's harness
 * exits 1 when the engine is down at its end (a harness that got 502s), and `beforeSession` throws while it is down
 * (the simulator's script registration). A session held while the engine is re-checked after its `beforeSession`
 * failed stays in the stage counts the rollout server plans with.
 */
import { afterEach, expect, test } from 'bun:test';
import type { TaskRequest } from '../../src/core/records.ts';
import { EngineHealthMonitor } from '../../src/engines/health.ts';
import { GatewayNode, type DispatchSpec } from '../../src/gateway/node.ts';
import type { RuntimeFactory } from '../../src/gateway/runtimes/index.ts';
import type { ExecResult, Runtime, RuntimeProcess } from '../../src/gateway/runtimes/types.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { taskRequest } from '../support/tasks.ts';

/** The fake engine: up or down, and the harnesses that were started. */
interface Engine { up: boolean; spawned: string[]; inits: string[] }

function fakeRuntimes(engine: Engine, runMs: number): RuntimeFactory {
  return (_spec, ctx) => {
    const key = ctx.instanceKey;
    const runtime: Runtime = {
      kind: 'fake', workDir: `/fake/${key}/work`, homeDir: `/fake/${key}/home`,
      start: async () => { engine.inits.push(key); },
      stop: async () => {},
      exec: async (): Promise<ExecResult> => ({ exitCode: 0, stdout: '', stderr: '', timedOut: false }),
      spawn: (): RuntimeProcess => {
        engine.spawned.push(key);
        let finish!: (v: { exitCode: number | null; signal: string | null }) => void;
        const exited = new Promise<{ exitCode: number | null; signal: string | null }>((r) => { finish = r; });
        const timer = setTimeout(() => finish({ exitCode: engine.up ? 0 : 1, signal: null }), runMs);
        return {
          pid: null, exited, stdout: () => '', stderr: () => (engine.up ? '' : 'API error 502: engine unreachable'),
          kill: async () => { clearTimeout(timer); finish({ exitCode: null, signal: 'SIGKILL' }); await exited; },
        };
      },
      upload: async () => {}, download: async () => {}, writeFile: async () => {},
    };
    return runtime;
  };
}

const task = (timeoutSeconds = 30): TaskRequest =>
  taskRequest('t', { instruction: 'do it', timeout_seconds: timeoutSeconds, agent: { command: 'true {{INSTRUCTION}}', model_name: 'm' }, builder: { strategy: 'per_request' } });
const spec = (id: string, t: TaskRequest): DispatchSpec => ({ session_id: id, task: t, sample_index: 0 });

let cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

async function makeNode(engine: Engine, opts: { runMs: number; checkIntervalMs: number; engineWaitMs?: number; capacity: ConstructorParameters<typeof GatewayNode>[0]['capacity'] }) {
  const monitor = new EngineHealthMonitor({
    check: async () => { if (!engine.up) throw new Error('connect ECONNREFUSED 127.0.0.1:30000'); },
    describe: 'fake engine', intervalMs: opts.checkIntervalMs,
  });
  await monitor.start();
  const store: Store = openStore(':memory:');
  const lines: string[] = [];
  const node = new GatewayNode({
    nodeId: 'n1', capacity: opts.capacity, store, workRoot: '/nonexistent', runtimeFactory: fakeRuntimes(engine, opts.runMs),
    engineHealth: () => monitor.state(), checkEngine: () => monitor.checkNow().then(() => monitor.state()),
    engineWaitPollMs: 50, ...(opts.engineWaitMs !== undefined ? { engineWaitMs: opts.engineWaitMs } : {}),
    beforeSession: async () => { if (!engine.up) throw new Error('cannot reach the simulator to register the behaviour script'); },
    log: (line) => lines.push(line),
  });
  cleanup.push(() => monitor.stop(), () => node.stop({ graceMs: 100 }), () => store.close());
  return { node, monitor, lines };
}

test('engine down before the monitor notices: the queue waits (INIT does not fail it) and runs once the engine is back', async () => {
  const engine: Engine = { up: true, spawned: [], inits: [] };
  // The periodic check is slower than the failures: only the check after a failed INIT can see the outage in time.
  const { node } = await makeNode(engine, { runMs: 50, checkIntervalMs: 400, capacity: { init_workers: 2, ready_buffer: 2, max_run_workers: 2 } });
  engine.up = false; // killed; the monitor still says up
  const ids = Array.from({ length: 8 }, (_, i) => `s${i}`);
  for (const id of ids) node.dispatch(spec(id, task()));
  await Bun.sleep(1000);
  expect(engine.spawned).toEqual([]);
  expect(engine.inits).toEqual([]);
  expect(ids.map((id) => node.get(id)!.status).every((s) => s === 'REGISTERED')).toBe(true);
  engine.up = true;
  const results = await Promise.all(ids.map((id) => node.wait(id)));
  expect(results.map((r) => [r.status, r.error])).toEqual(ids.map(() => ['COMPLETED', null]));
  expect(engine.spawned.length).toBe(8);
});

test('engine down while sessions run: running ones fail, READY and queued ones wait (their timeout does not run) and complete after', async () => {
  const engine: Engine = { up: true, spawned: [], inits: [] };
  const { node, lines } = await makeNode(engine, { runMs: 400, checkIntervalMs: 300, capacity: { init_workers: 2, ready_buffer: 2, max_run_workers: 2 } });
  const ids = Array.from({ length: 6 }, (_, i) => `s${i}`);
  // 2 s of budget: s2..s5 wait longer than that for the engine, which must not count.
  for (const id of ids) node.dispatch(spec(id, task(2)));
  await Bun.sleep(150);
  expect(engine.spawned).toEqual(['s0', 's1']);
  engine.up = false;
  await Bun.sleep(2500);
  expect(engine.spawned).toEqual(['s0', 's1']);
  expect(node.get('s0')!.status).toBe('ERROR');
  expect(node.get('s1')!.status).toBe('ERROR');
  expect(node.stageCounts()).toMatchObject({ running: 0 });
  engine.up = true;
  const results = await Promise.all(ids.map((id) => node.wait(id)));
  expect(results.map((r) => r.status)).toEqual(['ERROR', 'ERROR', 'COMPLETED', 'COMPLETED', 'COMPLETED', 'COMPLETED']);
  expect(lines.some((l) => l.startsWith('engine down (') && l.includes('gateway.engine_wait_s'))).toBe(true);
  expect(lines.some((l) => l.startsWith('engine is back'))).toBe(true);
});

test('engine down past engineWaitMs: the waiting sessions end ERROR "engine down: …" without starting', async () => {
  const engine: Engine = { up: false, spawned: [], inits: [] };
  const { node } = await makeNode(engine, { runMs: 50, checkIntervalMs: 200, engineWaitMs: 600, capacity: { init_workers: 2, ready_buffer: 1, max_run_workers: 1 } });
  const ids = ['a', 'b', 'c'];
  const t0 = Date.now();
  for (const id of ids) node.dispatch(spec(id, task()));
  const results = await Promise.all(ids.map((id) => node.wait(id)));
  expect(Date.now() - t0).toBeGreaterThanOrEqual(550);
  for (const r of results) {
    expect(r.status).toBe('ERROR');
    expect(r.error).toMatch(/^engine down: not started after waiting [\d.]+ s for the engine \(gateway\.engine_wait_s 0\.6\): connect ECONNREFUSED/);
  }
  expect(engine.inits).toEqual([]);
  expect(engine.spawned).toEqual([]);
});

test('a session whose beforeSession failed stays in the stage counts while the engine is re-checked', async () => {
  const store = openStore(':memory:');
  cleanup.push(() => store.close());
  let answer!: () => void;
  const recheck = new Promise<void>((r) => { answer = r; });
  const e: Engine = { up: true, spawned: [], inits: [] };
  const health = () => ({ ok: e.up, error: e.up ? null : 'down' });
  let failures = 1;
  const n = new GatewayNode({
    nodeId: 'n', store, workRoot: '/nonexistent', runtimeFactory: fakeRuntimes(e, 50), engineHealth: health,
    checkEngine: async () => { await recheck; return health(); },
    beforeSession: async () => { if (failures-- > 0) throw new Error('cannot reach the simulator'); },
  });
  cleanup.push(() => n.stop({ graceMs: 100 }), () => answer());
  n.dispatch(spec('s0', task()));
  await Bun.sleep(50);
  // In no queue while the check runs, but still on this node: the rollout server must count it (it goes back to the
  // queue or on to POSTRUN).
  expect(n.stageCounts()).toEqual({ queued: 1, init: 0, ready: 0, running: 0, postrun: 0 });
  answer();
  const result = await n.wait('s0');
  // The engine was up: the failure was the session's own.
  expect(result.status).toBe('ERROR');
  for (let i = 0; i < 100 && n.stageCounts().postrun > 0; i++) await Bun.sleep(10);
  expect(n.stageCounts()).toEqual({ queued: 0, init: 0, ready: 0, running: 0, postrun: 0 });
});
