/**
 * Shared pieces of the reliability suite (test/reliability/): real `polar` child processes, tasks whose sessions hold
 * mid-run in a tool call until a marker file exists (so a kill lands while harness processes run), a poison task that
 * fails its own INIT, and the tally every scenario reports and asserts: sessions, completed, lost, duplicated, resumed.
 */
import { Database } from 'bun:sqlite';
import { afterAll } from 'bun:test';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, SHELL_AGENT_COMMAND, SHELL_AGENT_PATHS, writeSimTask } from './polar-cli.ts';

/** A node `runtime` config line whose sandboxes can run the test agent and see `dir` (the release marker). */
export function sandboxRuntimeYaml(dir: string): string {
  return `runtime: {read_only_paths: [${[...SHELL_AGENT_PATHS, dir].join(', ')}]}`;
}

/** `polar run` flags for the same. */
export function sandboxRunFlags(dir: string): string[] {
  return [...SHELL_AGENT_PATHS, dir].flatMap((p) => ['--ro-path', p]);
}

export type Child = Bun.Subprocess<'ignore', 'pipe', 'pipe'>;

/**
 * A scratch directory under the repository's git-ignored out/ (a bwrap-isolated harness sees a private /tmp, and the
 * agents must see the marker), with the processes to SIGKILL and the marker to create before it is removed.
 */
export function useReliabilityScratch(prefix: string): { dir: string; marker: string; procs: Set<Child> } {
  mkdirSync(join(REPO_ROOT, 'out'), { recursive: true });
  const dir = mkdtempSync(join(REPO_ROOT, 'out', prefix));
  const marker = join(dir, 'release');
  const procs = new Set<Child>();
  afterAll(() => {
    writeFileSync(marker, ''); // anything still blocked finishes instead of lingering
    for (const p of procs) p.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  return { dir, marker, procs };
}

/** Start `polar ...args` in the background and wait until its stdout has a line matching `ready`. */
export async function startPolarUntil(args: string[], procs: Set<Child>, ready: RegExp, timeoutMs = 20_000): Promise<{ proc: Child; match: RegExpMatchArray }> {
  const proc = Bun.spawn([process.execPath, 'src/main.ts', ...args], { cwd: REPO_ROOT, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' });
  procs.add(proc);
  const reader = proc.stdout.getReader();
  let out = '';
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const match = out.match(ready);
    if (match) {
      reader.releaseLock();
      return { proc, match };
    }
    const next = await Promise.race([reader.read(), Bun.sleep(Math.max(1, deadline - Date.now())).then(() => null)]);
    if (next === null || next.done) {
      proc.kill('SIGKILL');
      throw new Error(`polar ${args[0]} did not print ${ready} (${next === null ? 'timeout' : 'exited'}): ${out}\n${await new Response(proc.stderr).text()}`);
    }
    out += new TextDecoder().decode(next.value);
  }
}

/** Task `taskId`: its scripted agent writes out.txt, then blocks in a tool call until `marker` exists, then answers. */
export function writeBlockingTask(dir: string, taskId: string, marker: string): void {
  writeSimTask(dir, taskId, [
    'variants:',
    '  solve:',
    '    steps:',
    '      - {shell: "echo ok > out.txt"}',
    `      - {shell: "while [ ! -e ${marker} ]; do sleep 0.1; done"}`,
    '      - {say: "Created out.txt."}',
    '',
  ].join('\n'));
}

/** A poison task: valid at submit, its prepare action fails, so each of its sessions ends ERROR in INIT. */
export function writePoisonTask(dir: string, taskId = 'poison'): void {
  mkdirSync(join(dir, taskId), { recursive: true });
  writeFileSync(join(dir, taskId, 'task.yaml'), [
    `task_id: ${taskId}`,
    'instruction: this task cannot be prepared',
    'timeout_seconds: 60',
    'runtime: {kind: local, prepare: [{exec: {command: "echo poisoned >&2; exit 3"}}]}',
    '',
  ].join('\n'));
}

/** `polar submit DIR --server URL` with the test agent and `samples`; throws with stderr on failure. */
export function submitTasks(dir: string, server: string, samples: number): void {
  const r = Bun.spawnSync([process.execPath, 'src/main.ts', 'submit', dir, '--server', server, '--harness', 'shell', '--command', SHELL_AGENT_COMMAND, '--samples', String(samples)], { cwd: REPO_ROOT, stdout: 'pipe', stderr: 'pipe' });
  if (r.exitCode !== 0) throw new Error(`polar submit failed: ${r.stderr.toString()}`);
}

/** Read-only look at the database while the processes run (WAL lets readers in). */
export function readDb<T>(db: string, fn: (d: Database) => T, fallback: T): T {
  try {
    const d = new Database(db, { readonly: true });
    try {
      return fn(d);
    } finally {
      d.close();
    }
  } catch {
    return fallback;
  }
}

/** Sessions of `taskIds` with at least `n` completions of their current attempt. */
export function sessionsWithCompletions(db: string, taskIds: string[], n: number): number {
  const marks = taskIds.map(() => '?').join(',');
  return readDb(db, (d) => (d.query(
    `SELECT COUNT(*) AS k FROM sessions s WHERE s.task_id IN (${marks}) AND (SELECT COUNT(*) FROM completions c WHERE c.session_id = s.session_id AND c.attempt = s.attempt) >= ?`,
  ).get(...taskIds, n) as { k: number }).k, 0);
}

/** Pids of processes whose command line holds `needle` (the blocked tool calls name the marker). */
export function pidsMentioning(needle: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(needle)) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Session directories left in a gateway work root. */
export function workDirs(workRoot: string): string[] {
  return existsSync(workRoot) ? readdirSync(workRoot).filter((n) => n.startsWith('s-')) : [];
}

export async function waitFor(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await Bun.sleep(100);
  }
}

/** One row of the reliability table. */
export interface Tally {
  scenario: string;
  sessions: number;
  completed: number;
  /** Sessions of the good tasks that did not end COMPLETED with a stored result of their final attempt. */
  lost: number;
  /** Sessions whose work ran to its end (all three scripted calls) in more than one attempt. */
  duplicated: number;
  /** Sessions that were running at the kill and finished afterwards (re-dispatched or adopted). */
  resumed: number;
  /** Sessions CANCELLED or ERROR "cancelled" (nobody cancelled anything in these scenarios). */
  cancelled: number;
}

/** The tally of the good tasks `taskIds` from the database. `inFlightAtKill`: session ids running when the kill landed. */
export function tally(scenario: string, db: string, taskIds: string[], inFlightAtKill: ReadonlySet<string>): Tally {
  return readDb(db, (d) => {
    const marks = taskIds.map(() => '?').join(',');
    const rows = d.query(`SELECT s.session_id, s.status, s.attempt, r.status AS result_status, json_extract(r.result, '$.error') AS error,
        json_extract(r.result, '$.attempt') AS result_attempt FROM sessions s LEFT JOIN results r ON r.session_id = s.session_id
        WHERE s.task_id IN (${marks})`).all(...taskIds) as { session_id: string; status: string; attempt: number; result_status: string | null; error: string | null; result_attempt: number | null }[];
    const full = d.query(`SELECT session_id, COUNT(*) AS attempts FROM (SELECT session_id, attempt FROM completions GROUP BY session_id, attempt HAVING COUNT(*) >= 3) GROUP BY session_id`).all() as { session_id: string; attempts: number }[];
    const fullBy = new Map(full.map((f) => [f.session_id, f.attempts]));
    const completed = rows.filter((r) => r.status === 'COMPLETED' && r.result_status === 'COMPLETED' && (r.result_attempt ?? 0) === r.attempt).length;
    return {
      scenario,
      sessions: rows.length,
      completed,
      lost: rows.length - completed,
      duplicated: rows.filter((r) => (fullBy.get(r.session_id) ?? 0) > 1).length,
      resumed: rows.filter((r) => inFlightAtKill.has(r.session_id) && r.status === 'COMPLETED').length,
      cancelled: rows.filter((r) => r.status === 'CANCELLED' || r.error?.startsWith('cancelled') === true).length,
    };
  }, { scenario, sessions: 0, completed: 0, lost: 0, duplicated: 0, resumed: 0, cancelled: 0 });
}

/** Print a row of the table (the suite's output documents its numbers). */
export function report(t: Tally): void {
  console.log(`reliability | ${t.scenario} | sessions ${t.sessions} | completed ${t.completed} | lost ${t.lost} | duplicated ${t.duplicated} | resumed ${t.resumed} | cancelled ${t.cancelled}`);
}

/** Session ids of `taskIds` not final yet. */
export function openSessions(db: string, taskIds: string[]): Set<string> {
  const marks = taskIds.map(() => '?').join(',');
  return new Set(readDb(db, (d) => (d.query(`SELECT session_id FROM sessions WHERE task_id IN (${marks}) AND status NOT IN ('COMPLETED','ERROR','TIMEOUT','CANCELLED')`).all(...taskIds) as { session_id: string }[]).map((r) => r.session_id), []));
}
