/**
 * A gateway node keeps its last `keepFinishedSessions` finished sessions whole in memory; older ones whose result is
 * stored and delivered leave it (a long-running node used to keep every trajectory it produced). What is left still
 * answers `get`, `wait` and a repeated dispatch (409), and rides the heartbeat for 10 minutes; a session whose result
 * could not be delivered stays whole.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nodeSettingsFromConfig } from '../../src/cli/from-config.ts';
import { gatewayNodeSchema } from '../../src/config/sections/gateway.ts';
import { DispatchError } from '../../src/core/contracts/index.ts';
import type { TaskRequest } from '../../src/core/records.ts';
import { GatewayNode } from '../../src/gateway/node.ts';
import { openStore, type Store } from '../../src/store/index.ts';

const root = mkdtempSync(join(tmpdir(), 'polar-gw-retention-'));
const heartbeats: Record<string, string>[] = [];
const delivered: string[] = [];
const rollout = Bun.serve({
  hostname: '127.0.0.1', port: 0,
  fetch: async (req) => {
    const path = new URL(req.url).pathname;
    const text = await req.text(); // the node's drain notice on stop has no body
    const body = (text === '' ? {} : JSON.parse(text)) as Record<string, unknown>;
    if (path.endsWith('/heartbeat')) heartbeats.push(body.sessions as Record<string, string>);
    if (path === '/callbacks/session_result') delivered.push(body.session_id as string);
    // A callback the server refuses (400 is not retried): its session must stay whole on the node.
    if (path === '/refuse') return Response.json({ error: 'no' }, { status: 400 });
    return Response.json({ ok: true });
  },
});
const base = `http://127.0.0.1:${rollout.port}`;
let offsetMs = 0;
let store: Store;
let node: GatewayNode;

beforeAll(async () => {
  store = openStore(':memory:');
  node = new GatewayNode({
    nodeId: 'keep', store, workRoot: join(root, 'work'), harnessLogDir: null, runtimeDefaults: { isolation: 'none' }, keepFinishedSessions: 2,
    clock: () => Date.now() + offsetMs, rollout: { url: base, heartbeatIntervalMs: 30 }, callbackRetry: { attempts: 1 },
  });
  await node.start();
});
afterAll(async () => {
  await node.stop();
  rollout.stop(true);
  store.close();
  rmSync(root, { recursive: true, force: true });
});

const task = (id: string): TaskRequest => ({
  task_id: id, instruction: 'x', num_samples: 1, timeout_seconds: 30, agent: { command: 'true', model_name: 'm' }, builder: { strategy: 'per_request' },
});
async function run(sessionId: string, callback: string, sampleIndex = 0): Promise<void> {
  node.dispatch({ session_id: sessionId, task: task(`task-${sessionId}`), sample_index: sampleIndex, attempt: 1, callback_url: `${base}${callback}` });
  await node.wait(sessionId);
  for (let i = 0; i < 200 && !delivered.includes(sessionId) && callback !== '/refuse'; i++) await Bun.sleep(5);
}
/** Sessions held whole in memory (a departed one is listed without its result), once the deliveries have settled. */
async function wholeOnes(expected: string[]): Promise<string[]> {
  const whole = () => node.list().filter((v) => v.result !== null).map((v) => v.session_id);
  for (let i = 0; i < 200 && JSON.stringify(whole()) !== JSON.stringify(expected); i++) await Bun.sleep(10);
  return whole();
}
const nextHeartbeat = async () => {
  const seen = heartbeats.length;
  while (heartbeats.length <= seen + 1) await Bun.sleep(10);
  return heartbeats.at(-1)!;
};

test('the oldest delivered sessions leave memory; get, wait and dispatch still know them; an undelivered one stays', async () => {
  await run('s1', '/callbacks/session_result', 3);
  await run('refused', '/refuse');
  for (const id of ['s2', 's3', 's4']) await run(id, '/callbacks/session_result');
  // Kept whole: the two most recent delivered ones and the one whose callback was refused.
  expect(await wholeOnes(['refused', 's3', 's4'])).toEqual(['refused', 's3', 's4']);
  // The departed ones are still listed (the rollout server's reconcile adopts them), without their result: after
  // those in memory, most recently departed first, so a page always holds the sessions in memory.
  expect(node.list().map((v) => [v.session_id, v.status, v.result === null])).toEqual([
    ['refused', 'COMPLETED', false], ['s3', 'COMPLETED', false], ['s4', 'COMPLETED', false], ['s2', 'COMPLETED', true], ['s1', 'COMPLETED', true],
  ]);
  expect(node.list({ limit: 4 }).map((v) => v.session_id)).toEqual(['refused', 's3', 's4', 's2']);
  expect(node.list({ taskId: 'task-s1', status: 'COMPLETED' }).map((v) => v.session_id)).toEqual(['s1']);
  expect(node.list({ status: 'RUNNING' })).toEqual([]);
  const page = (await (await fetch(`${node.url}/sessions?limit=2`)).json()) as { sessions: { session_id: string; result?: unknown }[] };
  expect(page.sessions.map((v) => v.session_id)).toEqual(['refused', 's3']);
  expect(page.sessions.every((v) => !('result' in v))).toBe(true);

  const gone = node.get('s1')!;
  expect(gone).toMatchObject({ session_id: 's1', task_id: 'task-s1', sample_index: 3, attempt: 1, status: 'COMPLETED', node_id: 'keep', error: null });
  expect(gone.result?.session_id).toBe('s1'); // read back from the store
  expect(gone.result?.trajectory.status).toBe('COMPLETED');
  expect((await node.wait('s1')).session_id).toBe('s1');
  let refusal: unknown;
  try {
    node.dispatch({ session_id: 's1', task: task('task-s1'), sample_index: 3, attempt: 2 });
  } catch (error) {
    refusal = error;
  }
  expect(refusal).toBeInstanceOf(DispatchError);
  expect((refusal as DispatchError).status).toBe(409);
  expect((refusal as DispatchError).details).toMatchObject({ session_id: 's1', attempt: 1, status: 'COMPLETED' });
  expect(node.get('never-seen')).toBeNull();
  // A later attempt's result in the store is not passed off as this attempt's.
  store.results.put({ ...(await node.wait('s2')), attempt: 2, status: 'ERROR' });
  expect(node.get('s2')).toMatchObject({ attempt: 1, status: 'COMPLETED', result: null });

  // The heartbeat carries departed sessions for 10 minutes, then only what is in memory.
  expect(Object.keys(await nextHeartbeat()).sort()).toEqual(['refused', 's1', 's2', 's3', 's4']);
  offsetMs = 11 * 60_000;
  expect(Object.keys(await nextHeartbeat()).sort()).toEqual(['refused', 's3', 's4']);
  // Dispatched again (a server adopting it after a lost dispatch answer): it rides the heartbeat 10 minutes more.
  expect(() => node.dispatch({ session_id: 's1', task: task('task-s1'), sample_index: 3, attempt: 2 })).toThrow(DispatchError);
  expect(Object.keys(await nextHeartbeat()).sort()).toEqual(['refused', 's1', 's3', 's4']);
});

test('config: gateway.nodes[].keep_finished_sessions reaches the node (default 256); a node keeping none answers from the store', async () => {
  expect(nodeSettingsFromConfig(gatewayNodeSchema.parse({}), '/srv').keepFinishedSessions).toBe(256);
  const settings = nodeSettingsFromConfig(gatewayNodeSchema.parse({ node_id: 'none-kept', keep_finished_sessions: 0, runtime: { isolation: 'none' } }), root);
  expect(settings.keepFinishedSessions).toBe(0);
  expect(() => gatewayNodeSchema.parse({ keep_finished_sessions: -1 })).toThrow();
  const own = openStore(':memory:');
  const bare = new GatewayNode({ ...settings, store: own, port: 0, harnessLogDir: null });
  await bare.start();
  try {
    bare.dispatch({ session_id: 'z1', task: task('task-z1'), sample_index: 0 });
    await bare.wait('z1');
    expect(bare.list().map((v) => [v.session_id, v.result])).toEqual([['z1', null]]);
    expect(bare.get('z1')?.result?.session_id).toBe('z1');
  } finally {
    await bare.stop();
    own.close();
  }
});
