/**
 * The many-host form on one box: `polar sim`, `polar rollout` and `polar gateway` as separate processes sharing one
 * database, four sessions running real harness processes beside a poison task.
 * - SIGKILL of `polar rollout` alone: restarted on the same port and database, it asks the gateway what it holds
 *   (`GET /sessions`) and adopts every running session: nothing is dispatched twice, nothing cancelled.
 * - SIGKILL of `polar gateway` alone: restarted on the same port and work root, it ends the dead one's process groups
 *   and removes its work directories; the server re-dispatches exactly those sessions once.
 */
import { expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { unusedPort } from '../support/fake-engine.ts';
import {
  alive, openSessions, sandboxRuntimeYaml, pidsMentioning, readDb, report, sessionsWithCompletions, startPolarUntil, submitTasks, tally,
  useReliabilityScratch, waitFor, workDirs, writeBlockingTask, writePoisonTask, type Child,
} from '../support/reliability.ts';

const { dir, marker: markerBase, procs } = useReliabilityScratch('reliability-split-');
/** One release marker per scenario, so one scenario's release never frees the other's sessions. */
const marker = (name: string) => `${markerBase}-${name}`;

interface Deployment { db: string; work: string; config: string; server: string; tasks: string; good: string[] }

async function deploy(name: string, good: string[]): Promise<Deployment & { rollout: Child; gateway: Child }> {
  const base = join(dir, name);
  const db = join(base, 'polar.db');
  const work = join(base, 'work');
  const tasks = join(base, 'tasks');
  for (const id of good) writeBlockingTask(tasks, id, marker(name));
  writePoisonTask(tasks, `${name}-poison`);
  const sim = await startPolarUntil(['sim', '--port', '0', '--decode-tps', '0', '--prefill-tps', '0'], procs, /on (http:\/\/\S+)/);
  const port = unusedPort();
  const config = join(base, 'polar.yaml');
  writeFileSync(config, [
    `rollout: {port: ${port}, db: ${db}}`,
    `store: {path: ${db}}`,
    `engine: {kind: sim, url: ${sim.match[1]}}`,
    `gateway: {rollout_url: http://127.0.0.1:${port}, heartbeat_interval_s: 0.5, nodes: [{node_id: g1, port: ${unusedPort()}, work_root: ${work}, ${sandboxRuntimeYaml(dir)}}]}`,
    '',
  ].join('\n'));
  const rollout = await startPolarUntil(['rollout', '--config', config], procs, /listening on (http:\/\/\S+)/);
  const gateway = await startPolarUntil(['gateway', '--config', config, '--node-id', 'g1'], procs, /listening on (http:\/\/\S+)/);
  const server = rollout.match[1]!;
  await waitFor('the gateway registered', async () => ((await (await fetch(`${server}/nodes`)).json()) as unknown[]).length === 1);
  submitTasks(tasks, server, 2);
  // The second completion is committed before its reply reaches the harness, which only then starts the blocking
  // command: wait for both.
  await waitFor('every good session blocked mid-run', () => sessionsWithCompletions(db, good, 2) === 4 && pidsMentioning(marker(name)).length >= 4);
  return { db, work, config, server, tasks, good, rollout: rollout.proc, gateway: gateway.proc };
}

async function finish(d: Deployment, name: string, poisonId: string): Promise<void> {
  writeFileSync(marker(name), '');
  await waitFor('the good tasks finish', async () => {
    const views = await Promise.all(d.good.map(async (id) => (await (await fetch(`${d.server}/rollout/task/${id}`)).json()) as { polar_status: string }));
    return views.every((v) => v.polar_status !== 'RUNNING');
  });
  const poison = (await (await fetch(`${d.server}/rollout/task/${poisonId}`)).json()) as { polar_status: string; sessions: { status: string }[] };
  expect(poison.polar_status).toBe('FAILED');
  expect(poison.sessions.map((s) => s.status)).toEqual(['ERROR', 'ERROR']);
  const groups = (await (await fetch(`${d.server}/rollout/groups?ready=1`)).json()) as { groups: { task_id: string; rewards: number[] }[] };
  expect(groups.groups.map((g) => g.task_id).sort()).toEqual([...d.good].sort());
  expect(groups.groups.every((g) => g.rewards.join() === '1,1')).toBe(true);
  for (const id of d.good) await fetch(`${d.server}/rollout/groups/${id}/ack`, { method: 'POST' });
  expect(((await (await fetch(`${d.server}/rollout/groups?ready=1`)).json()) as { groups: unknown[] }).groups).toEqual([]);
}

test('SIGKILL of polar rollout alone: the restarted server adopts what the gateway runs; nothing runs twice', async () => {
  const name = 'rollout';
  const d = await deploy(name, ['r-alpha', 'r-beta']);
  const inFlight = openSessions(d.db, d.good);
  d.rollout.kill('SIGKILL');
  await d.rollout.exited;
  await Bun.sleep(500);
  const again = await startPolarUntil(['rollout', '--config', d.config], procs, /listening on (http:\/\/\S+)/);
  expect(again.match[1]).toBe(d.server);
  await finish(d, name, `${name}-poison`);
  const attempts = readDb(d.db, (x) => (x.query(`SELECT attempt FROM sessions WHERE task_id IN ('r-alpha','r-beta')`).all() as { attempt: number }[]).map((r) => r.attempt), []);
  expect(attempts).toEqual([0, 0, 0, 0]);
  const t = tally('SIGKILL polar rollout', d.db, d.good, inFlight);
  report(t);
  expect(t).toMatchObject({ sessions: 4, completed: 4, lost: 0, duplicated: 0, resumed: 4, cancelled: 0 });
  again.proc.kill('SIGTERM');
  d.gateway.kill('SIGTERM');
  expect(await d.gateway.exited).toBe(0);
  expect(workDirs(d.work)).toEqual([]);
}, 90_000);

test('SIGKILL of polar gateway alone: restarted, it reaps the dead sandboxes and the server re-dispatches them once', async () => {
  const name = 'gateway';
  const d = await deploy(name, ['g-alpha', 'g-beta']);
  const inFlight = openSessions(d.db, d.good);
  const blocked = pidsMentioning(marker(name));
  expect(blocked.length).toBeGreaterThanOrEqual(4);
  d.gateway.kill('SIGKILL');
  await d.gateway.exited;
  const again = await startPolarUntil(['gateway', '--config', d.config, '--node-id', 'g1'], procs, /listening on (http:\/\/\S+)/);
  await waitFor('the dead gateway\'s harness processes are gone', () => blocked.every((pid) => !alive(pid)), 10_000);
  await waitFor('the sessions run again', () => sessionsWithCompletions(d.db, d.good, 2) === 4);
  await finish(d, name, `${name}-poison`);
  const attempts = readDb(d.db, (x) => (x.query(`SELECT attempt FROM sessions WHERE task_id IN ('g-alpha','g-beta')`).all() as { attempt: number }[]).map((r) => r.attempt), []);
  expect(attempts).toEqual([1, 1, 1, 1]);
  const t = tally('SIGKILL polar gateway', d.db, d.good, inFlight);
  report(t);
  expect(t).toMatchObject({ sessions: 4, completed: 4, lost: 0, duplicated: 0, resumed: 4, cancelled: 0 });
  again.proc.kill('SIGTERM');
  expect(await again.proc.exited).toBe(0);
  d.rollout.kill('SIGTERM');
  expect(workDirs(d.work)).toEqual([]);
  expect(pidsMentioning(marker(name))).toEqual([]);
}, 90_000);
