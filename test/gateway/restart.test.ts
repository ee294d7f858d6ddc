/**
 * What a gateway offers for restart safety: `GET /sessions` lists what it holds (with each session's attempt) and a
 * repeated dispatch answers 409 naming the held attempt, so a restarted rollout server adopts instead of dispatching
 * twice; and a gateway starting on a work root where a dead one left sandboxes ends their process groups and removes
 * their directories (src/gateway/runtimes/local.ts `reapOrphanSessions`), leaving live owners' alone.
 */
import { afterAll, expect, test } from 'bun:test';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GatewayNode } from '../../src/gateway/node.ts';
import { reapOrphanSessions } from '../../src/gateway/runtimes/local.ts';
import { openStore } from '../../src/store/index.ts';
import { taskRequest } from '../support/tasks.ts';

const root = mkdtempSync(join(tmpdir(), 'polar-gw-restart-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

test('GET /sessions lists held sessions with their attempt; a repeated dispatch is 409 with the held attempt', async () => {
  const store = openStore(':memory:');
  const node = new GatewayNode({ nodeId: 'g1', store, workRoot: join(root, 'w1'), harnessLogDir: null });
  await node.start();
  try {
    const task = taskRequest('t', { agent: { harness: 'shell', command: 'sleep 30', model_name: 'm' } });
    const post = (attempt: number) => fetch(`${node.url}/sessions`, { method: 'POST', body: JSON.stringify({ session_id: 's1', task, sample_index: 0, attempt }) });
    expect((await post(2)).status).toBe(202);
    const again = await post(3);
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ session_id: 's1', attempt: 2 });
    const list = (await (await fetch(`${node.url}/sessions`)).json()) as { sessions: { session_id: string; attempt: number; task_id: string }[] };
    expect(list.sessions).toEqual([expect.objectContaining({ session_id: 's1', attempt: 2, task_id: 't' })]);
  } finally {
    await node.stop();
    store.close();
  }
});

test('a dead owner\'s sandboxes are reaped at start: process groups killed, directories removed; a live owner\'s kept', async () => {
  const workRoot = join(root, 'w2');
  // A dead pid: a process that already exited.
  const gone = Bun.spawn(['true']);
  await gone.exited;
  // An orphaned harness: its own process group, still running.
  const orphan = Bun.spawn(['setsid', 'sleep', '60']);
  await Bun.sleep(100);
  const dead = join(workRoot, 's-dead');
  mkdirSync(join(dead, '.pgids'), { recursive: true });
  writeFileSync(join(dead, '.owner'), String(gone.pid));
  writeFileSync(join(dead, '.pgids', String(orphan.pid)), '');
  const live = join(workRoot, 's-live');
  mkdirSync(live, { recursive: true });
  writeFileSync(join(live, '.owner'), String(process.pid));
  expect(reapOrphanSessions(workRoot)).toEqual({ dirs: 1, groups: 1 });
  expect(await orphan.exited).not.toBe(0);
  expect(existsSync(dead)).toBe(false);
  expect(existsSync(live)).toBe(true);
});
