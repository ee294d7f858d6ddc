/**
 * `polar run` under faults, with real harness processes and a poison task beside the good ones:
 * - SIGKILL mid-run, then the same command again: the unfinished sessions resume (re-dispatched once), no task stays
 *   RUNNING, no work directory or harness process is left; the poison task fails alone.
 * - Another request into the same --out is refused with exit 2 saying what differs.
 * - SIGINT: the running sessions are interrupted (not cancelled: no result, queued again as attempt 1), their process
 *   groups end, the summary so far is written and the exit code is 130; the same command again resumes and completes
 *   them.
 */
import { expect, test } from 'bun:test';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, SHELL_AGENT_COMMAND } from '../support/polar-cli.ts';
import {
  alive, openSessions, sandboxRunFlags, pidsMentioning, readDb, report, sessionsWithCompletions, tally, useReliabilityScratch, waitFor, workDirs,
  writeBlockingTask, writePoisonTask, type Child,
} from '../support/reliability.ts';

const { dir, marker: markerBase, procs } = useReliabilityScratch('reliability-run-');
const marker = (name: string) => `${markerBase}-${name}`;

function polarRun(tasks: string, out: string, extra: string[] = []): Child {
  const proc = Bun.spawn([process.execPath, 'src/main.ts', 'run', tasks, '--harness', 'shell', '--command', SHELL_AGENT_COMMAND, '--samples', '2', '--out', out, '--quiet', ...sandboxRunFlags(dir), ...extra], {
    cwd: REPO_ROOT, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe',
  });
  procs.add(proc);
  return proc;
}

function statuses(db: string): Record<string, string> {
  return Object.fromEntries(readDb(db, (d) => (d.query('SELECT task_id, status FROM tasks').all() as { task_id: string; status: string }[]).map((r) => [r.task_id, r.status]), []));
}

test('SIGKILL of polar run, then the same command: unfinished sessions resume once; nothing stays RUNNING or on disk', async () => {
  const name = 'kill';
  const tasks = join(dir, name, 'tasks');
  const out = join(dir, name, 'out');
  const good = ['k-alpha', 'k-beta'];
  for (const id of good) writeBlockingTask(tasks, id, marker(name));
  writePoisonTask(tasks, 'k-poison');
  const db = join(out, 'results.db');
  const first = polarRun(tasks, out);
  // The second completion is committed before its reply reaches the harness, which only then starts the blocking
  // command: wait for both.
  await waitFor('every good session blocked mid-run', () => sessionsWithCompletions(db, good, 2) === 4 && pidsMentioning(marker(name)).length >= 4);
  const inFlight = openSessions(db, good);
  const blocked = pidsMentioning(marker(name));
  first.kill('SIGKILL');
  await first.exited;

  // A different request into the same --out is refused before anything runs.
  const other = polarRun(tasks, out, ['--samples', '3']);
  expect(await other.exited).toBe(2);
  expect(await new Response(other.stderr).text()).toContain('num_samples 2 there, 3 now');

  const second = polarRun(tasks, out);
  await waitFor('the dead run\'s harness processes are gone', () => blocked.every((pid) => !alive(pid)), 15_000);
  await waitFor('the sessions run again', () => sessionsWithCompletions(db, good, 2) === 4);
  writeFileSync(marker(name), '');
  const [stdout, stderr, code] = await Promise.all([new Response(second.stdout).text(), new Response(second.stderr).text(), second.exited]);
  // The poison task's sessions failed, so the run reports "not every session completed" (exit 1), nothing else.
  expect({ code, resumed: /resuming \d unfinished task/.test(stdout + stderr) }).toEqual({ code: 1, resumed: true });
  expect(stdout).toContain('summary:');
  expect(statuses(db)).toEqual({ 'k-alpha': 'COMPLETED', 'k-beta': 'COMPLETED', 'k-poison': 'FAILED' });
  const t = tally('SIGKILL polar run', db, good, inFlight);
  report(t);
  expect(t).toMatchObject({ sessions: 4, completed: 4, lost: 0, duplicated: 0, resumed: 4, cancelled: 0 });
  expect(workDirs(join(out, 'work'))).toEqual([]);
  expect(pidsMentioning(marker(name))).toEqual([]);
}, 90_000);

test('SIGINT on polar run: running sessions are interrupted, not cancelled; harness processes end, summary written, exit 130; the same command resumes them', async () => {
  const name = 'sigint';
  const tasks = join(dir, name, 'tasks');
  const out = join(dir, name, 'out');
  writeBlockingTask(tasks, 'i-alpha', marker(name));
  const db = join(out, 'results.db');
  const run = polarRun(tasks, out);
  await waitFor('both sessions blocked mid-run', () => sessionsWithCompletions(db, ['i-alpha'], 2) === 2 && pidsMentioning(marker(name)).length >= 2);
  const blocked = pidsMentioning(marker(name));
  expect(blocked.length).toBeGreaterThanOrEqual(2);
  const inFlight = openSessions(db, ['i-alpha']);
  run.kill('SIGINT');
  const [stderr, code] = await Promise.all([new Response(run.stderr).text(), run.exited]);
  expect(code).toBe(130);
  expect(stderr).toContain('SIGINT: stopping');
  expect(stderr).toContain('run again with the same --out to resume them');
  expect(blocked.filter(alive)).toEqual([]);
  expect(statuses(db)).toEqual({ 'i-alpha': 'RUNNING' });
  expect(readDb(db, (d) => d.query('SELECT COUNT(*) AS n FROM results').get() as { n: number }, { n: -1 }).n).toBe(0);
  expect(readDb(db, (d) => d.query('SELECT status, attempt FROM sessions').all(), [])).toEqual([{ status: 'REGISTERED', attempt: 1 }, { status: 'REGISTERED', attempt: 1 }]);
  expect(existsSync(join(out, 'summary.json'))).toBe(true);
  expect(workDirs(join(out, 'work'))).toEqual([]);

  writeFileSync(marker(name), '');
  const again = polarRun(tasks, out);
  const [stdout2, stderr2, code2] = await Promise.all([new Response(again.stdout).text(), new Response(again.stderr).text(), again.exited]);
  expect({ code: code2, resumed: /resuming 1 unfinished task/.test(stdout2 + stderr2) }).toEqual({ code: 0, resumed: true });
  expect(statuses(db)).toEqual({ 'i-alpha': 'COMPLETED' });
  const t = tally('SIGINT polar run, then the same command', db, ['i-alpha'], inFlight);
  report(t);
  expect(t).toMatchObject({ sessions: 2, completed: 2, lost: 0, duplicated: 0, resumed: 2, cancelled: 0 });
}, 90_000);
