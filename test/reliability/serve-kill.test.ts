/**
 * SIGKILL of `polar serve` (rollout server and gateway in one process) while four sessions run real harness processes,
 * with a poison task beside them; `polar serve` started again on the same database and work root. The new gateway ends
 * the dead one's process groups and removes its work directories; the server re-dispatches exactly those sessions
 * once; nothing is lost, duplicated or cancelled; the poison task fails alone; each group is served once.
 */
import { expect, test } from 'bun:test';
import { join } from 'node:path';
import {
  alive, openSessions, sandboxRuntimeYaml, pidsMentioning, report, sessionsWithCompletions, startPolarUntil, submitTasks, tally, useReliabilityScratch,
  waitFor, workDirs, writeBlockingTask, writePoisonTask,
} from '../support/reliability.ts';
import { writeFileSync } from 'node:fs';

const { dir, marker, procs } = useReliabilityScratch('reliability-serve-');
const good = ['alpha', 'beta'];

test('SIGKILL of polar serve mid-run: restarted, it resumes every session once and leaks nothing', async () => {
  const db = join(dir, 'polar.db');
  const work = join(dir, 'work');
  const config = join(dir, 'polar.yaml');
  writeFileSync(config, [
    `rollout: {port: 0, db: ${db}}`,
    `gateway: {heartbeat_interval_s: 0.5, nodes: [{node_id: local, port: 0, work_root: ${work}, ${sandboxRuntimeYaml(dir)}}]}`,
    'sim: {port: 0, decode_tps: 0, prefill_tps: 0}',
    '',
  ].join('\n'));
  const tasks = join(dir, 'tasks');
  for (const id of good) writeBlockingTask(tasks, id, marker);
  writePoisonTask(tasks);
  const ready = /rollout server on (http:\/\/\S+?),/;
  const first = await startPolarUntil(['serve', '--config', config, '--with-sim'], procs, ready);
  submitTasks(tasks, first.match[1]!, 2);
  // The second completion is committed before its reply reaches the harness, which only then starts the blocking
  // command: wait for both.
  await waitFor('every good session blocked mid-run', () => sessionsWithCompletions(db, good, 2) === 4 && pidsMentioning(marker).length >= 4);
  const inFlight = openSessions(db, good);
  expect(inFlight.size).toBe(4);
  const blocked = pidsMentioning(marker);
  expect(blocked.length).toBeGreaterThanOrEqual(4);

  first.proc.kill('SIGKILL');
  await first.proc.exited;
  const second = await startPolarUntil(['serve', '--config', config, '--with-sim'], procs, ready);
  const url = second.match[1]!;
  // The restarted gateway ended the dead one's harness process groups before taking new sessions.
  await waitFor('the killed run\'s harness processes are gone', () => blocked.every((pid) => !alive(pid)), 10_000);
  await waitFor('the sessions run again', () => sessionsWithCompletions(db, good, 2) === 4);
  writeFileSync(marker, '');
  await waitFor('both good tasks finish', async () => {
    const views = await Promise.all(good.map(async (id) => (await (await fetch(`${url}/rollout/task/${id}`)).json()) as { polar_status: string }));
    return views.every((v) => v.polar_status !== 'RUNNING');
  });

  const poison = (await (await fetch(`${url}/rollout/task/poison`)).json()) as { polar_status: string; sessions: { status: string; attempt: number; error: string | null }[] };
  expect(poison.polar_status).toBe('FAILED');
  expect(poison.sessions.every((s) => s.status === 'ERROR' && s.error?.includes('poisoned'))).toBe(true);

  const groups = (await (await fetch(`${url}/rollout/groups?ready=1`)).json()) as { groups: { task_id: string; rewards: number[] }[] };
  expect(groups.groups.map((g) => g.task_id).sort()).toEqual(good);
  expect(groups.groups.every((g) => g.rewards.length === 2 && g.rewards.every((r) => r === 1))).toBe(true);
  for (const id of good) await fetch(`${url}/rollout/groups/${id}/ack`, { method: 'POST' });
  expect(((await (await fetch(`${url}/rollout/groups?ready=1`)).json()) as { groups: unknown[] }).groups).toEqual([]);

  second.proc.kill('SIGTERM');
  expect(await second.proc.exited).toBe(0);
  const t = tally('SIGKILL polar serve', db, good, inFlight);
  report(t);
  expect(t).toMatchObject({ sessions: 4, completed: 4, lost: 0, duplicated: 0, resumed: 4, cancelled: 0 });
  expect(workDirs(work)).toEqual([]);
  expect(pidsMentioning(marker)).toEqual([]);
}, 90_000);
