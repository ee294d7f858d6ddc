/**
 * The newcomer's reproduction, end to end: `polar run` (shell harness: test/support/run-shell-agent.ts making real model calls
 * to the simulator) is SIGKILLed while its sessions are mid-run with completions captured; `polar run --db` on the
 * same database resumes them as attempt 1. Every session's trajectory must hold one trace per chain of its final
 * attempt only, the dead attempt's completions stay stored under attempt 0, and `polar trace verify --all` is clean.
 */
import { Database } from 'bun:sqlite';
import { afterAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openStore } from '../../src/store/index.ts';
import { buildTrajectory } from '../../src/trace/index.ts';
import { REPO_ROOT as root, runPolarSync, SHELL_AGENT_COMMAND as agent, SHELL_AGENT_RUN_FLAGS, writeSimTask } from '../support/polar-cli.ts';

const bun = process.execPath;
// Under the repository (git-ignored out/), not /tmp: a bwrap-isolated harness sees a private /tmp, and the agents
// must see the marker file.
mkdirSync(join(root, 'out'), { recursive: true });
const scratch = mkdtempSync(join(root, 'out', 'test-attempts-resume-'));
const marker = join(scratch, 'release');
const procs = new Set<ReturnType<typeof Bun.spawn>>();

afterAll(() => {
  writeFileSync(marker, ''); // lets any agent orphaned by the kill finish (its gateway is gone, so it exits)
  for (const p of procs) p.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

/** One task whose scripted run captures two completions, then blocks in a tool call until the marker exists. */
function writeTask(dir: string): string {
  return writeSimTask(dir, 'resume-me', [
    'variants:',
    '  solve:',
    '    weight: 1',
    '    steps:',
    '      - {shell: "echo ok > out.txt"}',
    `      - {shell: "while [ ! -e ${marker} ]; do sleep 0.1; done"}`,
    '      - {say: "Created out.txt."}',
    '',
  ].join('\n'));
}

function polarRun(tasks: string, db: string, out: string) {
  const proc = Bun.spawn([bun, 'src/main.ts', 'run', tasks, '--harness', 'shell', '--command', agent, '--samples', '2', '--db', db, '--out', out, '--quiet', ...SHELL_AGENT_RUN_FLAGS, '--ro-path', scratch], {
    cwd: root, stdout: 'pipe', stderr: 'pipe', timeout: 45_000, killSignal: 'SIGKILL',
  });
  procs.add(proc);
  return proc;
}

function countCompletions(db: string): number {
  try {
    const raw = new Database(db, { readonly: true });
    try {
      return (raw.query('SELECT COUNT(*) AS n FROM completions').get() as { n: number }).n;
    } finally {
      raw.close();
    }
  } catch {
    return 0; // not created or not migrated yet
  }
}

test('a run killed mid-session and resumed with --db: trajectories hold the final attempt only; trace verify --all is clean', async () => {
  const tasks = writeTask(join(scratch, 'tasks'));
  const db = join(scratch, 'results.db');

  const first = polarRun(tasks, db, join(scratch, 'out1'));
  const deadline = Date.now() + 30_000;
  // Both sessions have made their two calls and sit in the blocking tool call.
  while (countCompletions(db) < 4 && Date.now() < deadline && first.exitCode === null) await Bun.sleep(50);
  expect(countCompletions(db)).toBe(4);
  first.kill('SIGKILL');
  await first.exited;

  writeFileSync(marker, '');
  const second = polarRun(tasks, db, join(scratch, 'out2'));
  const [stdout, stderr, code] = await Promise.all([new Response(second.stdout).text(), new Response(second.stderr).text(), second.exited]);
  expect({ code, stderr: code === 0 ? '' : `${stdout}\n${stderr}` }).toEqual({ code: 0, stderr: '' });

  const store = openStore(db);
  try {
    const sessions = store.sessions.listByTask('resume-me');
    expect(sessions).toHaveLength(2);
    for (const s of sessions) {
      expect(s.status).toBe('COMPLETED');
      expect(s.attempt).toBeGreaterThanOrEqual(1);
      const records = store.completions.listBySession(s.session_id);
      const final = records.filter((r) => r.attempt === s.attempt);
      const earlier = records.filter((r) => r.attempt !== s.attempt);
      // The killed attempt's two calls are still stored, apart; the final attempt made all three of its own.
      expect(earlier.map((r) => r.attempt)).toEqual([0, 0]);
      expect(final).toHaveLength(3);
      const result = store.results.get(s.session_id)!;
      expect(result.trajectory.metadata.attempt).toBe(s.attempt);
      expect(result.trajectory.metadata.reconstruction_stats).toMatchObject({ completions: 3, other_attempt_completions: 2 });
      const traceIds = result.trajectory.traces.flatMap((t) => t.metadata.completion_ids).sort();
      expect(traceIds).toEqual(final.map((r) => r.completion_id).sort());
      const chains = buildTrajectory(final, { strategy: 'prefix_merging', session_id: s.session_id, task_id: 'resume-me', harness: 'shell', status: 'COMPLETED' });
      expect(result.trajectory.traces).toHaveLength(chains.traces.length);
      expect(result.trajectory.traces.every((t) => t.reward === 1 && t.loss_mask.includes(1))).toBe(true);
    }
  } finally {
    store.close();
  }

  const verify = runPolarSync(['trace', 'verify', '--db', db, '--all']);
  expect(verify.stderr.toString()).toBe('');
  expect(verify.exitCode).toBe(0);
  expect(verify.stdout.toString()).toContain('2/2 session(s) verified clean');
  expect(verify.stdout.toString().match(/\(2 of other attempts left out\)/g)).toHaveLength(2);

  const out = join(scratch, 'traces.jsonl');
  expect(runPolarSync(['export', '--db', db, '--format', 'jsonl', '--out', out]).exitCode).toBe(0);
  const rows = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { metadata: { attempt: number } });
  expect(rows.length).toBeGreaterThanOrEqual(2);
  expect(rows.every((r) => r.metadata.attempt >= 1)).toBe(true);
}, 60_000);
