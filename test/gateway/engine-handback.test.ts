/**
 * A gateway node whose engine stays down gives its unstarted sessions back to the rollout server
 * (`POST /nodes/{id}/handback`, after `engineHandbackMs`), which runs them on another node long before the node's
 * `engineWaitMs` would have failed them; a READY one's sandbox is torn down; what the server does not take back keeps
 * waiting.
 * The engines are flags (`engineHealth`); the fake runtime's harness exits 1 when its engine is down at its end.
 */
import { afterEach, expect, test } from 'bun:test';
import type { TaskRequest } from '../../src/core/records.ts';
import { GatewayNode, type DispatchSpec } from '../../src/gateway/node.ts';
import type { RuntimeFactory } from '../../src/gateway/runtimes/index.ts';
import type { ExecResult, Runtime, RuntimeProcess } from '../../src/gateway/runtimes/types.ts';
import { RolloutServer } from '../../src/rollout/server.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { chatCompletionRecord } from '../support/records.ts';
import { taskRequest } from '../support/tasks.ts';

/** One node's engine (a flag) and what its sandboxes did. */
interface Engine { up: boolean; inits: string[]; spawned: string[]; stopped: string[] }
const engine = (up: boolean): Engine => ({ up, inits: [], spawned: [], stopped: [] });

function fakeRuntimes(e: Engine, runMs: number): RuntimeFactory {
  return (_spec, ctx) => {
    const key = ctx.instanceKey;
    const runtime: Runtime = {
      kind: 'fake', workDir: `/fake/${key}/work`, homeDir: `/fake/${key}/home`,
      start: async () => { e.inits.push(key); },
      stop: async () => { e.stopped.push(key); },
      exec: async (): Promise<ExecResult> => ({ exitCode: 0, stdout: '', stderr: '', timedOut: false }),
      spawn: (): RuntimeProcess => {
        e.spawned.push(key);
        let finish!: (v: { exitCode: number | null; signal: string | null }) => void;
        const exited = new Promise<{ exitCode: number | null; signal: string | null }>((r) => { finish = r; });
        const timer = setTimeout(() => finish({ exitCode: e.up ? 0 : 1, signal: null }), runMs);
        return {
          pid: null, exited, stdout: () => '', stderr: () => (e.up ? '' : 'API error 502: engine unreachable'),
          kill: async () => { clearTimeout(timer); finish({ exitCode: null, signal: 'SIGKILL' }); await exited; },
        };
      },
      upload: async () => {}, download: async () => {}, writeFile: async () => {},
    };
    return runtime;
  };
}

const health = (e: Engine) => () => (e.up ? { ok: true, error: null } : { ok: false, error: 'connect ECONNREFUSED 127.0.0.1:30000' });
const task = (id: string, samples: number): TaskRequest =>
  taskRequest(id, { num_samples: samples, timeout_seconds: 30, agent: { command: 'true {{INSTRUCTION}}', model_name: 'm' }, builder: { strategy: 'per_request' } });

let cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await Bun.sleep(10);
  }
}

function node(nodeId: string, e: Engine, store: Store, extra: Partial<ConstructorParameters<typeof GatewayNode>[0]> = {}): GatewayNode {
  const n = new GatewayNode({
    nodeId, store, workRoot: '/nonexistent', runtimeFactory: fakeRuntimes(e, 50), engineHealth: health(e), engineWaitPollMs: 20,
    capacity: { init_workers: 2, ready_buffer: 2, max_run_workers: 2, postrun_workers: 2 }, ...extra,
  });
  cleanup.push(() => n.stop({ graceMs: 100 }));
  return n;
}

test('two nodes, engine of A down: the sessions A holds go back to the server and complete on B, long before engine_wait_s', async () => {
  const store = openStore(':memory:');
  const server = new RolloutServer({ store, tickMs: 50, heartbeatTimeoutMs: 10_000 }).start();
  cleanup.push(() => store.close(), () => server.stop());
  const engineA = engine(true);
  const engineB = engine(true);
  const rollout = { url: server.url, heartbeatIntervalMs: 50 };
  const a = node('A', engineA, store, { rollout, engineWaitMs: 30_000, engineHandbackMs: 300 });
  const dispatchedToA: string[] = [];
  const dispatchA = a.dispatch.bind(a);
  a.dispatch = (raw) => {
    dispatchedToA.push((raw as DispatchSpec).session_id);
    return dispatchA(raw);
  };
  await a.start();
  await until(() => server.listNodes().some((n) => n.node_id === 'A' && n.engine_ok === true), 3000, 'A registered, engine up');
  // A's engine dies before A's next heartbeat can say so: the server still dispatches A all it can take (4 of 6).
  engineA.up = false;
  const t0 = Date.now();
  server.submit(task('t', 6));
  await until(() => dispatchedToA.length === 4, 3000, 'A got 4 sessions');
  const onA = [...dispatchedToA];
  await Bun.sleep(100);
  expect(onA.map((id) => a.get(id)?.status)).toEqual(['REGISTERED', 'REGISTERED', 'REGISTERED', 'REGISTERED']);
  // B joins: it takes the 2 left on the server, then the 4 A hands back.
  const b = node('B', engineB, store, { rollout });
  await b.start();
  await until(() => store.tasks.get('t')?.status === 'COMPLETED', 10_000, 'task t completed');
  const elapsed = Date.now() - t0;
  expect(elapsed).toBeLessThan(10_000); // engine_wait_s on A is 30 s
  const sessions = store.sessions.listByTask('t');
  expect(sessions.map((s) => s.status)).toEqual(Array(6).fill('COMPLETED'));
  expect(sessions.map((s) => s.node_id)).toEqual(Array(6).fill('B'));
  // Same sessions and samples; the handed-back ones run as attempt 1; every stored result is B's current attempt.
  expect(sessions.map((s) => s.sample_index).sort()).toEqual([0, 1, 2, 3, 4, 5]);
  expect(sessions.filter((s) => onA.includes(s.session_id)).map((s) => s.attempt)).toEqual([1, 1, 1, 1]);
  for (const s of sessions) expect(store.results.get(s.session_id)).toMatchObject({ status: 'COMPLETED', node_id: 'B', attempt: s.attempt, error: null });
  // A started nothing, holds nothing, and got no further dispatch while its engine was down.
  expect(engineA.inits).toEqual([]);
  expect(onA.map((id) => a.get(id))).toEqual([null, null, null, null]);
  expect(a.stageCounts()).toEqual({ queued: 0, init: 0, ready: 0, running: 0, postrun: 0 });
  expect(dispatchedToA).toEqual(onA);
  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  expect(metrics).toContain('polar_rollout_sessions_handed_back_total 4');
  // A's engine is back: the server sends it work again (the same session ids would be accepted there: it forgot them).
  engineA.up = true;
  await until(() => server.listNodes().some((n) => n.node_id === 'A' && n.engine_ok === true), 3000, 'A engine up again');
  engineB.up = false;
  await until(() => server.listNodes().some((n) => n.node_id === 'B' && n.engine_ok === false), 3000, 'B engine down');
  server.submit(task('u', 2));
  await until(() => store.tasks.get('u')?.status === 'COMPLETED', 5000, 'task u completed on A');
  expect(store.sessions.listByTask('u').map((s) => s.node_id)).toEqual(['A', 'A']);
});

test('a READY session is handed back with its sandbox torn down; one the server does not take keeps waiting and goes on when the engine is back', async () => {
  const seen: { path: string; body: Record<string, unknown> }[] = [];
  let take: (ids: string[]) => string[] = (ids) => ids;
  const fakeServer = Bun.serve({
    hostname: '127.0.0.1', port: 0,
    fetch: async (req) => {
      const path = new URL(req.url).pathname;
      const body = (await req.json().catch(() => ({}))) as Record<string, unknown>;
      seen.push({ path, body });
      if (path === '/nodes/n/handback') return Response.json({ node_id: 'n', requeued: take(body.session_ids as string[]) });
      return Response.json({ ok: true });
    },
  });
  cleanup.push(() => fakeServer.stop(true));
  const store = openStore(':memory:');
  cleanup.push(() => store.close());
  const e = engine(true);
  const lines: string[] = [];
  const n = new GatewayNode({
    nodeId: 'n', store, workRoot: '/nonexistent', runtimeFactory: fakeRuntimes(e, 60_000), engineHealth: health(e), engineWaitPollMs: 20,
    engineWaitMs: 30_000, engineHandbackMs: 200, capacity: { init_workers: 2, ready_buffer: 2, max_run_workers: 1, postrun_workers: 1 },
    rollout: { url: `http://127.0.0.1:${fakeServer.port}`, heartbeatIntervalMs: 10_000 }, log: (l) => lines.push(l),
  });
  cleanup.push(() => n.stop({ graceMs: 100 }));
  await n.start();
  const handedBack: unknown[] = [];
  n.events.subscribe((ev) => { if (ev.type === 'session_handed_back') handedBack.push(ev.data); });
  const t = task('t', 1);
  for (const id of ['s0', 's1', 's2']) n.dispatch({ session_id: id, task: t, sample_index: Number(id[1]) });
  await until(() => n.get('s1')?.status === 'READY' && n.get('s2')?.status === 'READY', 3000, 's1, s2 READY');
  expect(e.spawned).toEqual(['s0']);
  // s2 captured a model call of its attempt (it must have started work somehow): never handed back.
  store.completions.insert(completionOf('s2'));
  take = (ids) => ids.filter((id) => id !== 's3');
  n.dispatch({ session_id: 's3', task: t, sample_index: 3 });
  e.up = false;
  await until(() => seen.some((s) => s.path === '/nodes/n/handback'), 3000, 'a handback');
  const offer = seen.find((s) => s.path === '/nodes/n/handback')!.body;
  expect(offer.session_ids).toEqual(['s3', 's1']);
  expect(String(offer.reason)).toMatch(/^engine down for [\d.]+ s \(gateway\.engine_handback_s 0\.2\): connect ECONNREFUSED/);
  await until(() => n.get('s1') === null, 3000, 's1 released');
  // s1 left the node: sandbox stopped, no result, no record (a dispatch of it here again is accepted, not a 409).
  expect(e.stopped).toContain('s1');
  expect(store.results.get('s1')).toBeNull();
  expect(handedBack).toEqual([expect.objectContaining({ session_id: 's1', sample_index: 1, attempt: 0, node_id: 'n' })]);
  expect(lines.some((l) => l.startsWith('handed 1 unstarted session(s) back to the rollout server'))).toBe(true);
  // s3 was declined: back in the queue, still waiting; s2 never offered; s0 runs on.
  expect(n.get('s3')?.status).toBe('REGISTERED');
  expect(n.get('s2')?.status).toBe('READY');
  expect(n.stageCounts()).toEqual({ queued: 1, init: 0, ready: 1, running: 1, postrun: 0 });
  expect(n.dispatch({ session_id: 's1', task: t, sample_index: 1, attempt: 1 })).toEqual({ session_id: 's1', status: 'REGISTERED' });
  // The engine is back: what stayed goes on (s3 to INIT; s3 is not offered again meanwhile: the retry waits 10 s).
  e.up = true;
  await until(() => e.inits.includes('s3'), 3000, 's3 starts INIT');
  expect(seen.filter((s) => s.path === '/nodes/n/handback')).toHaveLength(1);
  expect(e.stopped.filter((k) => k === 's1')).toHaveLength(1);
});

function completionOf(sessionId: string) {
  return chatCompletionRecord({
    completion_id: `${sessionId}-c0`, session_id: sessionId, seq: 0, attempt: 0, engine_id: 'fake',
    ir_request: { messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }] } as never, ir_response: null,
    prompt_ids: [1], response_ids: [2], logprobs: [-0.5],
  });
}
