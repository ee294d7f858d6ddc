/**
 * `polar train-demo` end to end, short: 2 synchronous then 2 asynchronous GRPO steps × G=2 over two of examples/tasks
 * (`--tasks`, a copy of two task directories) with the real pi CLI and the simulator, into one output directory. Checks the table and steps.jsonl against the store
 * (pass@1 recomputed from the stored rewards of each step's tasks), that the policy moved toward the solving variant,
 * that every trajectory verifies with the exported policy and not without it (the choice's logprob is in the tokens),
 * and that the plot has both runs. The full 10-step run is a documented command (README), not a test.
 */
import { afterAll, expect, test } from 'bun:test';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rewardOf } from '../../src/rollout/server.ts';
import type { PolicyExport } from '../../src/sim/variant-policy.ts';
import { logSoftmax } from '../../src/sim/variant-policy.ts';
import { openStore } from '../../src/store/index.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';
import { runPolar } from '../support/polar-cli.ts';

const out = mkdtempSync(join(tmpdir(), 'polar-train-demo-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));
// Two tasks keep the test short (each step runs tasks × G pi sessions); the README's command runs all five.
const TASKS = ['mean-empty', 'word-count'];
const tasksDir = join(out, 'tasks');
for (const name of TASKS) cpSync(join(import.meta.dir, '../../examples/tasks', name), join(tasksDir, name), { recursive: true });

type Row = { step: number; mode: string; policy_version: string | string[]; pass_at_1: number; mean_reward: number; sessions: number; groups_used: number; stale_groups_dropped: number; wall_s: number };
const rows = (file: string) => readFileSync(join(out, file), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Row);

test.skipIf(!networkIsolated())(`polar train-demo: sync then async steps learn, verify and plot ${NEEDS_ISOLATION}`, async () => {
  const sync = await runPolar(['train-demo', '--steps', '2', '--samples', '2', '--tasks', tasksDir, '--out', out], { timeoutMs: 400_000 });
  if (sync.code !== 0) console.error(sync.stdout.slice(-3000), sync.stderr.slice(-3000));
  expect(sync.code).toBe(0);
  expect(sync.stdout).toMatch(/step\s+policy_version\s+pass@1\s+mean reward\s+groups used\s+stale dropped\s+wall s/);
  const used = JSON.parse(readFileSync(join(out, 'used-sessions.json'), 'utf8')) as unknown[];
  expect(sync.stdout).toContain(`trace verify: ${used.length}/${used.length} used trajectories clean`);
  const syncRows = rows('steps-sync.jsonl');
  expect(syncRows.map((r) => [r.step, r.mode, r.policy_version])).toEqual([[1, 'sync', '0'], [2, 'sync', '1']]);

  // pass@1 per step, recomputed from the store: the rewards of the step's tasks (task_id ends in -s<step>).
  // Also the groups the trainer learnt from whose rewards differ: GRPO moves the policy on those only.
  let groupsWithVariance = 0;
  const store = openStore(join(out, 'results-sync.db'));
  try {
    for (const row of syncRows) {
      const tasks = store.tasks.list({}).filter((t) => t.task.task_id.endsWith(`-s${row.step}`));
      expect(tasks.map((t) => t.task.task_id.replace(/@.*$/, '')).sort()).toEqual(TASKS);
      const rewards = tasks.flatMap((t) => store.sessions.listByTask(t.task.task_id).map((s) => store.results.get(s.session_id)).map((r) => (r ? rewardOf(r) : 0)));
      expect(rewards).toHaveLength(row.sessions);
      expect(row.pass_at_1).toBeCloseTo(rewards.filter((r) => r >= 1).length / rewards.length, 9);
      for (const t of tasks) {
        const group = (store.groups.get(t.task.task_id)?.data ?? { rewards: [] }) as { rewards: number[] };
        if (group.rewards.some((r) => r !== group.rewards[0])) groupsWithVariance++;
      }
    }
  } finally {
    store.close();
  }

  // The update only ever raises the solving variant's probability (GRPO advantages sum to 0 in a group), and raises
  // it when some group's rewards differed. Variants are drawn by hashing random session ids: a G=2 group is mixed with
  // probability 1/2 under the initial weights, so all 4 groups of both steps came out alike (and the logits stayed
  // put) one run in 16; "the policy moved" is checked against the groups as drawn.
  const policy = JSON.parse(readFileSync(join(out, 'sim-policy-sync.json'), 'utf8')) as PolicyExport;
  const first = policy.versions[0]!.logits;
  const last = policy.versions.at(-1)!.logits;
  expect(policy.versions.map((v) => v.version)).toEqual(['0', '1', '2']);
  let gain = 0;
  for (const key of Object.keys(first)) {
    const names = Object.keys(first[key]!);
    const before = Math.exp(logSoftmax(names, first[key]!).solve!);
    const after = Math.exp(logSoftmax(names, last[key]!).solve!);
    expect(after).toBeGreaterThanOrEqual(before - 1e-12);
    gain += after - before;
  }
  expect({ groupsWithVariance, moved: gain > 0 }).toEqual({ groupsWithVariance, moved: groupsWithVariance > 0 });

  const verify = await runPolar(['trace', 'verify', '--db', join(out, 'results-sync.db'), '--all', '--sim-policy', join(out, 'sim-policy-sync.json')]);
  expect(verify.code).toBe(0);
  expect(verify.stdout).toMatch(/(\d+)\/\1 session\(s\) verified clean/);
  const plain = await runPolar(['trace', 'verify', '--db', join(out, 'results-sync.db'), '--all']);
  expect(plain.code).toBe(1);
  expect(plain.stderr).toContain('pass --sim-policy');

  const asyncRun = await runPolar(['train-demo', '--steps', '2', '--samples', '2', '--tasks', tasksDir, '--async', '--out', out], { timeoutMs: 400_000 });
  if (asyncRun.code !== 0) console.error(asyncRun.stdout.slice(-3000), asyncRun.stderr.slice(-3000));
  expect(asyncRun.code).toBe(0);
  const asyncRows = rows('steps-async.jsonl');
  expect(asyncRows.map((r) => [r.step, r.mode])).toEqual([[1, 'async'], [2, 'async']]);
  // Step 2 was submitted before the first update, so it was sampled (at least partly) under version 0.
  expect([asyncRows[1]!.policy_version].flat()).toContain('0');
  const svg = readFileSync(join(out, 'pass_at_1.svg'), 'utf8');
  expect(svg.match(/<polyline /g)).toHaveLength(2);
  expect(svg).toContain('>sync<');
  expect(svg).toContain('>async (K=1)<');
}, 900_000);
