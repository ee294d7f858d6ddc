/**
 * The main job's CI check (`npm start`): `polar run examples/tasks --harness pi --samples 4`, spawned as a process, with the
 * real pi CLI against the in-process simulator. Every session completes, each reward follows the session's scripted
 * variant (solve → 1, wrong_fix / give_up → 0), each group's rewards are its sessions' (so the groups with reward
 * variance are the ones whose draws mixed), `polar trace verify --all` is clean, prefix_merging needs fewer trainer
 * tokens than per_request, and `polar export` reads the results file.
 * Runs only inside a loopback-only network namespace (`node scripts/test.mjs test/e2e/run-pi.test.ts`).
 */
import { afterAll, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { rewardOf } from '../../src/trace/groups.ts';
import { loadTaskDir } from '../../src/rollout/task-file.ts';
import type { RunSummary } from '../../src/stack/run-summary.ts';
import { chooseVariant, parseBehaviourScript } from '../../src/sim/script.ts';
import { openStore } from '../../src/store/index.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';

const root = resolve(import.meta.dir, '../..');
const bun = process.execPath;
const out = mkdtempSync(join(tmpdir(), 'polar-run-pi-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

async function polar(args: string[], timeoutMs: number): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn([bun, 'src/main.ts', ...args], { cwd: root, stdout: 'pipe', stderr: 'pipe', timeout: timeoutMs, killSignal: 'SIGKILL' });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

test.skipIf(!networkIsolated())(`polar run examples/tasks --harness pi --samples 4: completed, variant rewards, variance, verify, fewer prefix_merging tokens ${NEEDS_ISOLATION}`, async () => {
  const run = await polar(['run', 'examples/tasks', '--harness', 'pi', '--samples', '4', '--out', out], 150_000);
  if (run.code !== 0) console.error(run.stdout.slice(-3000), run.stderr.slice(-3000));
  expect(run.code).toBe(0);
  const db = join(out, 'results.db');
  expect(run.stdout).toContain(db);
  expect(run.stdout).toMatch(/pass@1/);

  const tasks = loadTaskDir(join(root, 'examples/tasks'));
  const store = openStore(db);
  let withVariance = 0;
  try {
    let sessions = 0;
    const variants = new Set<string>();
    for (const t of tasks) {
      const script = parseBehaviourScript(t.simScript);
      const rows = store.sessions.listByTask(t.task.task_id).sort((a, b) => a.sample_index - b.sample_index);
      expect(rows).toHaveLength(4);
      const drawn: number[] = [];
      for (const s of rows) {
        sessions++;
        const result = store.results.get(s.session_id);
        expect(result?.status).toBe('COMPLETED');
        const variant = chooseVariant(script, s.session_id);
        variants.add(variant);
        // Only the solve variant fixes the bug, so only it passes the task's unit tests.
        expect({ task: t.task.task_id, variant, reward: rewardOf(result!) }).toEqual({ task: t.task.task_id, variant, reward: variant === 'solve' ? 1 : 0 });
        expect(store.completions.listBySession(s.session_id).length).toBeGreaterThanOrEqual(2);
        drawn.push(variant === 'solve' ? 1 : 0);
      }
      const group = store.groups.get(t.task.task_id);
      expect(group?.status).toBe('EVALUATED');
      // The group (what a GRPO trainer reads) has its sessions' rewards in sample order. Which groups have reward
      // variance is up to the draw, made by hashing random session ids: "at least one group has variance" failed when
      // each task's four sessions all solved or all failed, (1/8)^5, one run in 33000. So the count is checked as drawn.
      expect({ task: t.task.task_id, rewards: (group!.data as { rewards: number[] }).rewards }).toEqual({ task: t.task.task_id, rewards: drawn });
      if (drawn.some((r) => r !== drawn[0])) withVariance++;
    }
    expect(sessions).toBe(tasks.length * 4);
    // Guards against a vacuous pass of the solve → 1 check; all 20 sessions miss solve one run in 10^6 (0.5^20).
    expect(variants.has('solve')).toBe(true);
  } finally {
    store.close();
  }

  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as RunSummary & { all_completed: boolean };
  expect(summary.all_completed).toBe(true);
  const pi = summary.harnesses.find((h) => h.harness === 'pi')!;
  expect(pi.completed).toBe(tasks.length * 4);
  expect(pi.groups_with_reward_variance).toBe(withVariance);
  expect(pi.trainer_tokens.prefix_merging).toBeLessThan(pi.trainer_tokens.per_request);
  expect(pi.traces.prefix_merging).toBeLessThan(pi.traces.per_request);

  const verify = await polar(['trace', 'verify', '--db', db, '--all'], 60_000);
  if (verify.code !== 0) console.error(verify.stdout.slice(-3000), verify.stderr);
  expect(verify.code).toBe(0);

  const jsonl = join(out, 'traces.jsonl');
  const exported = await polar(['export', '--db', db, '--format', 'jsonl', '--out', jsonl], 60_000);
  expect(exported.code).toBe(0);
  expect(existsSync(jsonl)).toBe(true);
  const lines = readFileSync(jsonl, 'utf8').trim().split('\n');
  expect(lines.length).toBe(pi.traces.prefix_merging);
}, 180_000);
