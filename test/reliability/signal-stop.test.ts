/**
 * SIGTERM of `polar serve` and of a separate `polar gateway` while four sessions run real harness processes (what
 * `systemctl stop/restart` and a rolling update send). Nothing is cancelled because a process stopped: each stops
 * dispatching, ends the harness process groups it started, sends no result for the interrupted sessions, and exits 0;
 * the rollout server queues them again as attempt 1 (the separate gateway's leave notice makes that immediate, well
 * inside the 30 s heartbeat timeout), and they complete on the next start (`polar serve` again on the same database)
 * or on another gateway.
 */
import { expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { unusedPort } from '../support/fake-engine.ts';
import {
  alive, openSessions, pidsMentioning, readDb, report, sandboxRuntimeYaml, sessionsWithCompletions, startPolarUntil, submitTasks, tally,
  useReliabilityScratch, waitFor, writeBlockingTask,
} from '../support/reliability.ts';

const { dir, marker: markerBase, procs } = useReliabilityScratch('reliability-signal-');
const good = ['alpha', 'beta'];

function sessionRows(db: string): { status: string; attempt: number; result: string | null }[] {
  return readDb(db, (d) => d.query('SELECT s.status AS status, s.attempt AS attempt, r.status AS result FROM sessions s LEFT JOIN results r USING (session_id) ORDER BY session_id').all() as { status: string; attempt: number; result: string | null }[], []);
}
const taskStatuses = (db: string) => readDb(db, (d) => (d.query('SELECT status FROM tasks ORDER BY task_id').all() as { status: string }[]).map((t) => t.status), []);

test('SIGTERM of polar serve: running sessions are interrupted (process groups end), not cancelled; the next serve completes them', async () => {
  const base = join(dir, 'serve');
  const marker = `${markerBase}-serve`;
  const db = join(base, 'polar.db');
  const tasks = join(base, 'tasks');
  for (const id of good) writeBlockingTask(tasks, id, marker);
  const config = join(dir, 'serve.yaml');
  writeFileSync(config, [
    `rollout: {port: 0, db: ${db}}`,
    `gateway: {heartbeat_interval_s: 0.5, nodes: [{node_id: local, port: 0, work_root: ${join(base, 'work')}, ${sandboxRuntimeYaml(dir)}}]}`,
    'sim: {port: 0, decode_tps: 0, prefill_tps: 0}',
    '',
  ].join('\n'));
  const serve = await startPolarUntil(['serve', '--config', config, '--with-sim'], procs, /rollout server on (http:\/\/\S+?),/);
  submitTasks(tasks, serve.match[1]!, 2);
  // The second completion is committed before its reply reaches the harness, which only then starts the blocking
  // command: wait for both.
  await waitFor('every session blocked mid-run', () => sessionsWithCompletions(db, good, 2) === 4 && pidsMentioning(marker).length >= 4);
  const blocked = pidsMentioning(marker);
  expect(blocked.length).toBeGreaterThanOrEqual(4);
  const inFlight = openSessions(db, good);

  serve.proc.kill('SIGTERM');
  expect(await serve.proc.exited).toBe(0);
  expect(blocked.filter(alive)).toEqual([]);
  expect(sessionRows(db)).toEqual(Array.from({ length: 4 }, () => ({ status: 'REGISTERED', attempt: 1, result: null })));
  expect(taskStatuses(db)).toEqual(['RUNNING', 'RUNNING']);

  writeFileSync(marker, '');
  const again = await startPolarUntil(['serve', '--config', config, '--with-sim'], procs, /rollout server on (http:\/\/\S+?),/);
  await waitFor('both tasks completed after the restart', () => taskStatuses(db).every((s) => s === 'COMPLETED'), 60_000);
  const t = tally('SIGTERM polar serve, then serve again', db, good, inFlight);
  report(t);
  expect(t).toMatchObject({ sessions: 4, completed: 4, lost: 0, duplicated: 0, resumed: 4, cancelled: 0 });
  again.proc.kill('SIGTERM');
  expect(await again.proc.exited).toBe(0);
}, 120_000);

test('SIGTERM of a separate polar gateway: its sessions are queued again at once (leave notice) and another gateway completes them', async () => {
  const base = join(dir, 'split');
  const marker = `${markerBase}-split`;
  const db = join(base, 'polar.db');
  const tasks = join(base, 'tasks');
  for (const id of good) writeBlockingTask(tasks, id, marker);
  const sim = await startPolarUntil(['sim', '--port', '0', '--decode-tps', '0', '--prefill-tps', '0'], procs, /on (http:\/\/\S+)/);
  const port = unusedPort();
  const config = join(dir, 'split.yaml');
  const node = (id: string) => `{node_id: ${id}, port: ${unusedPort()}, work_root: ${join(base, `work-${id}`)}, ${sandboxRuntimeYaml(dir)}}`;
  // Each process its own database: the server can learn the outcome only from the gateways' callbacks.
  writeFileSync(config, [
    `rollout: {port: ${port}, db: ${db}}`,
    `store: {path: ${join(base, 'gateway.db')}}`,
    `engine: {kind: sim, url: ${sim.match[1]}}`,
    `gateway: {rollout_url: http://127.0.0.1:${port}, heartbeat_interval_s: 0.5, nodes: [${node('g1')}, ${node('g2')}]}`,
    '',
  ].join('\n'));
  const rollout = await startPolarUntil(['rollout', '--config', config], procs, /listening on (http:\/\/\S+)/);
  const gateway = await startPolarUntil(['gateway', '--config', config, '--node-id', 'g1'], procs, /listening on (http:\/\/\S+)/);
  const server = rollout.match[1]!;
  await waitFor('the gateway registered', async () => ((await (await fetch(`${server}/nodes`)).json()) as unknown[]).length === 1);
  submitTasks(tasks, server, 2);
  await waitFor('every session blocked mid-run', () => pidsMentioning(marker).length >= 4);
  const blocked = pidsMentioning(marker);

  const stoppedAt = Date.now();
  gateway.proc.kill('SIGTERM');
  expect(await gateway.proc.exited).toBe(0);
  expect(blocked.filter(alive)).toEqual([]);
  await waitFor('the server queued the interrupted sessions again', () => sessionRows(db).every((r) => r.status === 'REGISTERED' && r.attempt === 1), 10_000);
  expect(Date.now() - stoppedAt).toBeLessThan(25_000); // the heartbeat timeout (30 s) did not have to pass
  expect(sessionRows(db).filter((r) => r.result !== null)).toEqual([]);

  writeFileSync(marker, '');
  await startPolarUntil(['gateway', '--config', config, '--node-id', 'g2'], procs, /listening on (http:\/\/\S+)/);
  for (const id of good) {
    await waitFor(`${id} completed on the other gateway`, async () => ((await (await fetch(`${server}/rollout/task/${id}`)).json()) as { polar_status: string }).polar_status === 'COMPLETED', 60_000);
    const view = (await (await fetch(`${server}/rollout/task/${id}`)).json()) as { sessions: { status: string }[] };
    expect(view.sessions.map((s) => s.status)).toEqual(['COMPLETED', 'COMPLETED']);
  }
  rollout.proc.kill('SIGTERM');
  expect(await rollout.proc.exited).toBe(0);
}, 150_000);
