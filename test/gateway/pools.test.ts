/**
 * Gateway node pools with a fake runtime whose stages take set times: READY bound, INIT working while RUNNING is
 * full, priority order, cancel in every stage, TIMEOUT with the completions captured before the deadline.
 */
import { afterEach, expect, test } from 'bun:test';
import type { CompletionRecord, TaskRequest } from '../../src/core/records.ts';
import { GatewayNode, type DispatchSpec, type SessionEvent } from '../../src/gateway/node.ts';
import type { RuntimeFactory } from '../../src/gateway/runtimes/index.ts';
import type { ExecResult, Runtime, RuntimeProcess } from '../../src/gateway/runtimes/types.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { taskRequest } from '../support/tasks.ts';

interface Durations { startMs: number; runMs: number }

/** Log of what the fake runtimes did, shared by a test. */
interface Ledger { started: string[]; stopped: string[]; killed: string[]; spawned: string[] }

/** A runtime whose start takes `startMs` and whose harness runs `runMs` (or until killed); `onSpawn` may act (e.g. write records). */
function fakeRuntimes(durations: (key: string) => Durations, ledger: Ledger, onSpawn?: (key: string) => void): RuntimeFactory {
  return (_spec, ctx) => {
    const key = ctx.instanceKey;
    const { startMs, runMs } = durations(key);
    const runtime: Runtime = {
      kind: 'fake', workDir: `/fake/${key}/work`, homeDir: `/fake/${key}/home`,
      start: (signal) => new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => { ledger.started.push(key); resolve(); }, startMs);
        signal?.addEventListener('abort', () => { clearTimeout(timer); reject(signal.reason); }, { once: true });
      }),
      stop: async () => { ledger.stopped.push(key); },
      exec: async (): Promise<ExecResult> => ({ exitCode: 0, stdout: '', stderr: '', timedOut: false }),
      spawn: (): RuntimeProcess => {
        ledger.spawned.push(key);
        onSpawn?.(key);
        let finish!: (v: { exitCode: number | null; signal: string | null }) => void;
        const exited = new Promise<{ exitCode: number | null; signal: string | null }>((r) => { finish = r; });
        const timer = setTimeout(() => finish({ exitCode: 0, signal: null }), runMs);
        return {
          pid: null, exited, stdout: () => '', stderr: () => '',
          kill: async () => { clearTimeout(timer); ledger.killed.push(key); finish({ exitCode: null, signal: 'SIGKILL' }); await exited; },
        };
      },
      upload: async () => {}, download: async () => {}, writeFile: async () => {},
    };
    return runtime;
  };
}

const task = (id: string, extra: Partial<TaskRequest> = {}): TaskRequest =>
  taskRequest(id, { instruction: 'do it', timeout_seconds: 30, agent: { command: 'true {{INSTRUCTION}}', model_name: 'm' }, builder: { strategy: 'per_request' }, ...extra });

/** One turn of a growing conversation (distinct prompts: identical ones would be labelled retries and left out). */
function record(sessionId: string, seq: number): CompletionRecord {
  return {
    completion_id: `${sessionId}-c${seq}`, session_id: sessionId, seq, dialect: 'openai-chat', request_body: {},
    ir_request: { messages: [], tools: [], sampling: {}, stream: false } as unknown as CompletionRecord['ir_request'],
    ir_response: null, finish_reason: { unified: 'stop', raw: 'stop' }, prompt_ids: [1, 2, 3, ...Array<number>(seq).fill(6)], response_ids: [4, 5],
    logprobs: [-0.5, -0.25], policy_version: null, engine_id: 'sim@test', logprob_semantics: 'raw', mode: 'chat',
    capture_error: null, warnings: [], timings: { engine_ms: 1, total_ms: 1 }, created_at: 0,
  };
}

let nodes: GatewayNode[] = [];
let stores: Store[] = [];
afterEach(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  for (const s of stores) s.close();
  nodes = [];
  stores = [];
});

function makeNode(capacity: ConstructorParameters<typeof GatewayNode>[0]['capacity'], factory: RuntimeFactory) {
  const store = openStore(':memory:');
  const node = new GatewayNode({ nodeId: 'n1', capacity, store, workRoot: '/nonexistent', runtimeFactory: factory });
  nodes.push(node);
  stores.push(store);
  return { node, store };
}

const newLedger = (): Ledger => ({ started: [], stopped: [], killed: [], spawned: [] });
const spec = (id: string, t: TaskRequest = task('t')): DispatchSpec => ({ session_id: id, task: t, sample_index: 0 });

test('READY never exceeds its bound, and INIT keeps preparing while RUNNING is full', async () => {
  const ledger = newLedger();
  const { node } = makeNode(
    { init_workers: 3, ready_buffer: 2, max_run_workers: 1, postrun_workers: 2 },
    fakeRuntimes(() => ({ startMs: 5, runMs: 60 }), ledger),
  );
  let maxReady = 0;
  let initWhileRunFull = false;
  node.onEvent(() => {
    const c = node.stageCounts();
    maxReady = Math.max(maxReady, c.ready);
    if (c.running === 1 && c.init > 0) initWhileRunFull = true;
  });
  const ids = ['a', 'b', 'c', 'd', 'e'];
  for (const id of ids) node.dispatch(spec(id));
  // Shortly after start: one runs, READY is full, the rest wait in the queue (INIT stopped pulling).
  await Bun.sleep(40);
  const mid = node.stageCounts();
  expect(mid.running).toBe(1);
  expect(mid.ready).toBe(2);
  expect(mid.init).toBe(0);
  expect(mid.queued).toBe(2);
  const results = await Promise.all(ids.map((id) => node.wait(id)));
  expect(results.map((r) => r.status)).toEqual(['COMPLETED', 'COMPLETED', 'COMPLETED', 'COMPLETED', 'COMPLETED']);
  expect(maxReady).toBe(2);
  expect(initWhileRunFull).toBe(true);
  expect(ledger.stopped.sort()).toEqual(ids);
  for (const r of results) {
    expect(r.timing.e2e_ms).toBeGreaterThanOrEqual(r.timing.run_ms);
    expect(r.timing.run_ms).toBeGreaterThanOrEqual(50);
  }
  // The last sessions waited in READY for a RUNNING slot.
  expect(results.some((r) => r.timing.ready_queue_ms >= 50)).toBe(true);
  // d and e waited in the node's queue for INIT until a's run ended; the queue gap is in the timings, so the stages add
  // up to e2e (less the POSTRUN worker wait, none here).
  expect(results[0]!.timing.init_queue_ms).toBeLessThan(20);
  expect(results[4]!.timing.init_queue_ms).toBeGreaterThanOrEqual(50);
  for (const { timing: t } of results) {
    const stages = t.init_queue_ms! + t.init_ms + t.ready_queue_ms + t.run_ms + t.postrun_ms;
    expect(Math.abs(t.e2e_ms - stages)).toBeLessThan(5);
  }
});

test('INIT pulls by dispatch_priority (higher first), then FIFO', async () => {
  const ledger = newLedger();
  const { node } = makeNode(
    { init_workers: 1, ready_buffer: 0, max_run_workers: 1, postrun_workers: 1 },
    fakeRuntimes(() => ({ startMs: 1, runMs: 20 }), ledger),
  );
  node.dispatch(spec('first', task('t', { dispatch_priority: 0 })));
  node.dispatch(spec('low1', task('t', { dispatch_priority: 0 })));
  node.dispatch(spec('high', task('t', { dispatch_priority: 5 })));
  node.dispatch(spec('low2', task('t', { dispatch_priority: 0 })));
  node.dispatch(spec('mid', task('t', { dispatch_priority: 2 })));
  await Promise.all(['first', 'low1', 'high', 'low2', 'mid'].map((id) => node.wait(id)));
  // `first` was pulled at once, before the others arrived.
  expect(ledger.started).toEqual(['first', 'high', 'mid', 'low1', 'low2']);
});

test('cancelling in each stage ends in cleanup with ERROR "cancelled"', async () => {
  const ledger = newLedger();
  const { node } = makeNode(
    { init_workers: 1, ready_buffer: 2, max_run_workers: 1, postrun_workers: 1 },
    fakeRuntimes((key) => ({ startMs: key === 'initing' ? 500 : 5, runMs: 500 }), ledger),
  );
  const seen = new Map<string, string[]>();
  node.onEvent((e: SessionEvent) => seen.set(e.session_id, [...(seen.get(e.session_id) ?? []), e.status]));
  node.dispatch(spec('running'));
  await Bun.sleep(30);
  node.dispatch(spec('ready'));
  await Bun.sleep(30);
  node.dispatch(spec('initing'));
  node.dispatch(spec('queued'));
  await Bun.sleep(30);
  expect(node.get('running')!.status).toBe('RUNNING');
  expect(node.get('ready')!.status).toBe('READY');
  expect(node.get('initing')!.status).toBe('INITIALIZING');
  expect(node.get('queued')!.status).toBe('REGISTERED');
  for (const id of ['queued', 'initing', 'ready', 'running']) expect(node.cancel(id)).toBe(true);
  const results = await Promise.all(['queued', 'initing', 'ready', 'running'].map((id) => node.wait(id)));
  for (const r of results) {
    expect(r.status).toBe('ERROR');
    expect(r.error).toBe('cancelled');
    expect(r.trajectory.metadata.training_filter.trainable).toBe(false);
  }
  // Every runtime that was created was stopped; the running harness was killed.
  // (teardown kills the process group again, so a kill may be logged twice)
  expect([...new Set(ledger.killed)]).toEqual(['running']);
  expect(ledger.stopped.sort()).toEqual(['initing', 'ready', 'running']);
  expect(seen.get('ready')).toEqual(['REGISTERED', 'INITIALIZING', 'READY', 'POST_RUN', 'BUILDING', 'ERROR']);
  expect(node.cancel('running')).toBe(false);
});

test('cancelling in POSTRUN still tears down and ends ERROR "cancelled"', async () => {
  const ledger = newLedger();
  const slowEval = {
    session_completed: {
      name: 'session_completed', needsDiff: () => false,
      evaluate: (ctx: { signal: AbortSignal }) => new Promise<never>((_, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('aborted')))),
    },
  };
  const store = openStore(':memory:');
  stores.push(store);
  const node = new GatewayNode({
    nodeId: 'n1', store, workRoot: '/nonexistent', runtimeFactory: fakeRuntimes(() => ({ startMs: 1, runMs: 1 }), ledger),
    evaluators: slowEval as never,
  });
  nodes.push(node);
  node.dispatch(spec('p'));
  while (node.get('p')!.status !== 'EVALUATING') await Bun.sleep(2);
  expect(node.cancel('p')).toBe(true);
  const result = await node.wait('p');
  expect(result.status).toBe('ERROR');
  expect(result.error).toBe('cancelled');
  expect(ledger.stopped).toEqual(['p']);
});

test('a session that runs out of agent time returns TIMEOUT with the completions captured before the deadline', async () => {
  const ledger = newLedger();
  let store!: Store;
  const factory = fakeRuntimes(() => ({ startMs: 1, runMs: 10_000 }), ledger, (key) => {
    // Two completions land while the harness runs; the deadline then kills it.
    setTimeout(() => store.completions.insert(record(key, 0)), 5);
    setTimeout(() => store.completions.insert(record(key, 1)), 15);
  });
  ({ store } = makeNode({ max_run_workers: 1 }, factory));
  const node = nodes.at(-1)!;
  node.dispatch(spec('slow', task('t', { metadata: { agent_timeout: 0.1 } })));
  const result = await node.wait('slow');
  expect(result.status).toBe('TIMEOUT');
  expect([...new Set(ledger.killed)]).toEqual(['slow']);
  expect(ledger.stopped).toEqual(['slow']);
  expect(result.trajectory.status).toBe('TIMEOUT');
  expect(result.trajectory.traces.map((t) => t.metadata.completion_ids)).toEqual([['slow-c0'], ['slow-c1']]);
  // An agent-budget timeout stays trainable with reward 0.
  expect(result.trajectory.traces.every((t) => t.reward === 0)).toBe(true);
  expect(result.timing.run_ms).toBeGreaterThanOrEqual(90);
  expect(store.results.get('slow')?.status).toBe('TIMEOUT');
});

test('the total budget (timeout_seconds) runs from INIT and also ends a session waiting in READY', async () => {
  const ledger = newLedger();
  const { node } = makeNode(
    { init_workers: 2, ready_buffer: 1, max_run_workers: 1, postrun_workers: 1 },
    fakeRuntimes(() => ({ startMs: 1, runMs: 400 }), ledger),
  );
  node.dispatch(spec('hog', task('t')));
  node.dispatch(spec('waiter', task('t', { timeout_seconds: 0.1 })));
  const waiter = await node.wait('waiter');
  expect(waiter.status).toBe('TIMEOUT');
  expect(waiter.error).toBe('timeout_seconds exceeded');
  expect(waiter.timing.run_ms).toBe(0);
  expect(ledger.spawned).toEqual(['hog']);
  expect(ledger.stopped).toContain('waiter');
  expect(waiter.trajectory.metadata.training_filter.trainable).toBe(false);
  expect((await node.wait('hog')).status).toBe('COMPLETED');
});

test('dispatch rejects bad specs and duplicate ids', () => {
  const { node } = makeNode({}, fakeRuntimes(() => ({ startMs: 1, runMs: 1 }), newLedger()));
  expect(() => node.dispatch({ session_id: 'x', sample_index: 0 } as unknown as DispatchSpec)).toThrow(/invalid session spec/);
  expect(() => node.dispatch(spec('h', task('t', { agent: { harness: 'nope', model_name: 'm' } })))).toThrow(/unknown harness "nope"/);
  expect(() => node.dispatch(spec('e', task('t', { evaluator: { strategy: 'nope' } })))).toThrow(/unknown evaluator "nope"/);
  node.dispatch(spec('dup'));
  expect(() => node.dispatch(spec('dup'))).toThrow(/already exists/);
});
