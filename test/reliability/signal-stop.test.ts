/**
 * SIGTERM of `polar serve` and of a separate `polar gateway` while four sessions run real harness processes: each
 * stops dispatching, ends the harness process groups it started, records the interrupted sessions as CANCELLED with
 * the reason ("interrupted: SIGTERM") on the rollout server, and exits 0.
 */
import { expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { unusedPort } from '../support/fake-engine.ts';
import {
  alive, pidsMentioning, readDb, sandboxRuntimeYaml, sessionsWithCompletions, startPolarUntil, submitTasks, useReliabilityScratch,
  waitFor, writeBlockingTask,
} from '../support/reliability.ts';

const { dir, marker: markerBase, procs } = useReliabilityScratch('reliability-signal-');
const good = ['alpha', 'beta'];

function sessionRows(db: string): { status: string; error: string | null }[] {
  return readDb(db, (d) => d.query("SELECT s.status AS status, json_extract(r.result, '$.error') AS error FROM sessions s LEFT JOIN results r USING (session_id) ORDER BY session_id").all() as { status: string; error: string | null }[], []);
}

test('SIGTERM of polar serve: running sessions end CANCELLED "interrupted: SIGTERM", their process groups end, exit 0', async () => {
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

  serve.proc.kill('SIGTERM');
  expect(await serve.proc.exited).toBe(0);
  expect(blocked.filter(alive)).toEqual([]);
  const rows = sessionRows(db);
  expect(rows.length).toBe(4);
  for (const r of rows) expect(r).toMatchObject({ status: 'CANCELLED', error: expect.stringContaining('interrupted: SIGTERM') });
  const taskStatuses = readDb(db, (d) => d.query('SELECT status FROM tasks').all() as { status: string }[], []);
  expect(taskStatuses.map((t) => t.status)).toEqual(['CANCELLED', 'CANCELLED']);
}, 90_000);

test('SIGTERM of a separate polar gateway: it sends the CANCELLED results with the reason before exiting 0', async () => {
  const base = join(dir, 'split');
  const marker = `${markerBase}-split`;
  const db = join(base, 'polar.db');
  const tasks = join(base, 'tasks');
  for (const id of good) writeBlockingTask(tasks, id, marker);
  const sim = await startPolarUntil(['sim', '--port', '0', '--decode-tps', '0', '--prefill-tps', '0'], procs, /on (http:\/\/\S+)/);
  const port = unusedPort();
  const config = join(dir, 'split.yaml');
  // Each process its own database: the server can learn the outcome only from the gateway's callbacks.
  writeFileSync(config, [
    `rollout: {port: ${port}, db: ${db}}`,
    `store: {path: ${join(base, 'gateway.db')}}`,
    `engine: {kind: sim, url: ${sim.match[1]}}`,
    `gateway: {rollout_url: http://127.0.0.1:${port}, heartbeat_interval_s: 0.5, nodes: [{node_id: g1, port: ${unusedPort()}, work_root: ${join(base, 'work')}, ${sandboxRuntimeYaml(dir)}}]}`,
    '',
  ].join('\n'));
  const rollout = await startPolarUntil(['rollout', '--config', config], procs, /listening on (http:\/\/\S+)/);
  const gateway = await startPolarUntil(['gateway', '--config', config, '--node-id', 'g1'], procs, /listening on (http:\/\/\S+)/);
  const server = rollout.match[1]!;
  await waitFor('the gateway registered', async () => ((await (await fetch(`${server}/nodes`)).json()) as unknown[]).length === 1);
  submitTasks(tasks, server, 2);
  await waitFor('every session blocked mid-run', () => pidsMentioning(marker).length >= 4);
  const blocked = pidsMentioning(marker);

  gateway.proc.kill('SIGTERM');
  expect(await gateway.proc.exited).toBe(0);
  expect(blocked.filter(alive)).toEqual([]);
  for (const id of good) {
    const view = (await (await fetch(`${server}/rollout/task/${id}`)).json()) as { sessions: { status: string; error: string | null }[] };
    expect(view.sessions.length).toBe(2);
    for (const s of view.sessions) expect(s).toMatchObject({ status: 'CANCELLED', error: expect.stringContaining('interrupted: SIGTERM') });
  }
  rollout.proc.kill('SIGTERM');
  expect(await rollout.proc.exited).toBe(0);
}, 90_000);
