/**
 * `polar results` and `polar trace show` on a store written by a real `polar run` (shell harness, simulator): the
 * table lists every session with its reward, turns, chains and trainable tokens and fits 100 columns; filters and
 * --json; `trace show` finds a session by id prefix or by --task/--sample and writes the token view with --html.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ResultRow } from '../../src/observe/results.ts';
import { runPolar, SHELL_AGENT_COMMAND, SHELL_AGENT_RUN_FLAGS, writeSimTask } from '../support/polar-cli.ts';

const scratch = mkdtempSync(join(tmpdir(), 'polar-results-'));
const db = join(scratch, 'run.db');
let runOutput: { code: number | null; stdout: string; stderr: string };
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

beforeAll(async () => {
  const script = 'variants:\n  solve: {weight: 0.5, steps: [{shell: "echo ok > out.txt"}, {say: "Created out.txt."}]}\n  give_up: {weight: 0.5, steps: [{say: "No."}]}\n';
  const tasks = join(scratch, 'tasks');
  for (const id of ['alpha', 'beta']) writeSimTask(tasks, id, script);
  const run = await runPolar(['run', tasks, '--harness', 'shell', '--command', SHELL_AGENT_COMMAND, '--samples', '3', ...SHELL_AGENT_RUN_FLAGS, '--db', db, '--out', join(scratch, 'out'), '--quiet'], { timeoutMs: 90_000 });
  expect(run.code).toBe(0);
  runOutput = run;
}, 120_000);

test('polar run: a successful run writes nothing to stderr (no red lines, no callback race) and its hints name commands that exist', async () => {
  expect(runOutput.stderr).toBe('');
  // From source (npm start, npm run polar) the hint is npm run polar --; the hinted command runs.
  const hint = /^list:\s+(npm run polar -- results --db \S+)$/m.exec(runOutput.stdout);
  expect(hint).not.toBeNull();
  expect(/^export:\s+npm run polar -- export --db /m.test(runOutput.stdout)).toBe(true);
  const listed = await runPolar(hint![1]!.replace('npm run polar -- ', '').split(' '));
  expect(listed.code).toBe(0);
  expect(runOutput.stdout).toMatch(/^alpha\s+[01] [01] [01]\s/m); // the per-task table of the summary
  // The summary fits 100 columns (lines naming this test's temporary paths aside).
  for (const line of runOutput.stdout.split('\n')) if (!line.includes(scratch)) expect(line.length).toBeLessThanOrEqual(100);
});

test('polar results --json: one row per session with reward, turns, chains, trainable tokens', async () => {
  const out = await runPolar(['results', '--db', db, '--json']);
  expect(out.code).toBe(0);
  const rows = JSON.parse(out.stdout) as ResultRow[];
  expect(rows.map((r) => [r.task_id, r.sample_index])).toEqual([['alpha', 0], ['alpha', 1], ['alpha', 2], ['beta', 0], ['beta', 1], ['beta', 2]]);
  for (const r of rows) {
    expect(r.status).toBe('COMPLETED');
    // The solve variant makes 2 model calls and earns 1; give_up makes 1 and earns 0.
    expect([[2, 1], [1, 0]] as (number | null)[][]).toContainEqual([r.turns, r.reward]);
    expect(r.completions).toBe(r.turns);
    expect(r.chains).toBe(1);
    expect(r.trainable_tokens!).toBeGreaterThan(0);
    expect(r.rerendered_joins).toBe(0);
    expect(r.duration_s!).toBeGreaterThan(0);
  }
  const failed = await runPolar(['results', '--db', db, '--json', '--failed']);
  expect(JSON.parse(failed.stdout)).toEqual([]);
  const beta = JSON.parse((await runPolar(['results', '--db', db, '--json', '--task', 'be'])).stdout) as ResultRow[];
  expect(beta.map((r) => r.task_id)).toEqual(['beta', 'beta', 'beta']);
}, 60_000);

test('polar results: a table of at most 100 columns with a totals line', async () => {
  const out = await runPolar(['results', '--db', db]);
  expect(out.code).toBe(0);
  const lines = out.stdout.trimEnd().split('\n');
  expect(lines[0]).toMatch(/^task\s+#\s+session\s+status\s+reward\s+turns\s+compl\s+chains\s+train tok\s+rerend\s+time\s+error$/);
  expect(lines).toHaveLength(8);
  for (const line of lines) expect(line.length).toBeLessThanOrEqual(100);
  expect(lines[7]).toMatch(/^6 session\(s\): 6 completed, 0 error, 0 timeout; mean reward \d\.\d{3} over 6 evaluated$/);
  // A filter that matches nothing says so; it does not claim the store is empty.
  const none = await runPolar(['results', '--db', db, '--failed', '--task', 'al']);
  expect(none.code).toBe(0);
  expect(none.stdout.trimEnd()).toBe('no sessions matched --task al --failed (6 session(s) in this store)');
  const bad = await runPolar(['results', '--db', join(scratch, 'nope.db')]);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain('no such file');
}, 60_000);

test('trace show: by id prefix, by --task/--sample, --html writes the token view; ambiguity and misses are usage errors', async () => {
  const rows = JSON.parse((await runPolar(['results', '--db', db, '--json'])).stdout) as ResultRow[];
  const target = rows.find((r) => r.task_id === 'beta' && r.sample_index === 1)!;
  const others = rows.map((r) => r.session_id).filter((id) => id !== target.session_id);
  let n = 4;
  while (others.some((id) => id.startsWith(target.session_id.slice(0, n)))) n++;
  const byPrefix = await runPolar(['trace', 'show', '--db', db, '--session', target.session_id.slice(0, n), '--ids']);
  expect(byPrefix.code).toBe(0);
  expect(byPrefix.stdout).toContain(`session ${target.session_id} `);
  const byTask = await runPolar(['trace', 'show', '--db', db, '--task', 'beta', '--sample', '1', '--ids']);
  expect(byTask.code).toBe(0);
  expect(byTask.stdout).toBe(byPrefix.stdout);

  const ambiguous = await runPolar(['trace', 'show', '--db', db, '--session', 'ps_']);
  expect(ambiguous.code).toBe(2);
  expect(ambiguous.stderr).toContain('is ambiguous');
  const noSample = await runPolar(['trace', 'show', '--db', db, '--task', 'beta']);
  expect(noSample.code).toBe(2);
  expect(noSample.stderr).toContain('add --sample N');

  const html = join(scratch, 'session.html');
  const written = await runPolar(['trace', 'show', '--db', db, '--task', 'beta', '--sample', '1', '--html', html]);
  expect(written.code).toBe(0);
  const page = readFileSync(html, 'utf8');
  const embedded = JSON.parse(/window\.POLAR_SESSION = (.*?);<\/script>/.exec(page)![1]!) as { result: { session_id: string; trajectory: { traces: { response_ids: number[] }[] } }; token_texts: string[][] };
  expect(embedded.result.session_id).toBe(target.session_id);
  expect(embedded.token_texts[0]).toHaveLength(embedded.result.trajectory.traces[0]!.response_ids.length);
  expect(embedded.token_texts[0]!.join('')).toContain(target.reward === 1 ? 'Created out.txt.' : 'No.');
}, 60_000);
