/**
 * Harbor task directories through `runTasks` on the built-in simulator with the `harbor` evaluator:
 * - a task written the way Harbor's docs show (task.toml, instruction.md, environment/Dockerfile, tests/test.sh,
 *   solution/solve.sh) plus a behaviour script, in a solving and a failing copy, run by the real pi CLI (only in a
 *   loopback-only network namespace): reward 1 and 0, the verifier's provenance on the stored result;
 * - examples/harbor with the shell agent (test/support/run-shell-agent.ts): every session's reward follows its
 *   scripted variant, reward.json's mean included.
 */
import { afterAll, expect, test } from 'bun:test';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { loadTaskDir } from '../../src/rollout/task-file.ts';
import { chooseVariant, parseBehaviourScript } from '../../src/sim/script.ts';
import { runTasks } from '../../src/stack/run-tasks.ts';
import { openStore } from '../../src/store/index.ts';
import { rewardOf } from '../../src/trace/groups.ts';
import { HARNESS_CACHE } from '../support/install-harnesses.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';
import { SHELL_AGENT_COMMAND, SHELL_AGENT_PATHS } from '../support/polar-cli.ts';

const scratch = mkdtempSync(join(tmpdir(), 'polar-harbor-run-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A Harbor task as a newcomer writes it from Harbor's docs; `steps` is the one variant the simulator plays. */
function newcomerTask(parent: string, name: string, steps: string): void {
  const dir = join(parent, name);
  for (const sub of ['environment', 'tests', 'solution']) mkdirSync(join(dir, sub), { recursive: true });
  writeFileSync(join(dir, 'task.toml'), [
    'version = "1.0"', '', '[metadata]', 'author_name = "A. Newcomer"', 'difficulty = "easy"', 'category = "data"', 'tags = ["csv"]', '',
    '[verifier]', 'timeout_sec = 60.0', '', '[agent]', 'timeout_sec = 90.0', '',
    '[environment]', 'build_timeout_sec = 600.0', 'cpus = 1', 'memory_mb = 2048', 'storage_mb = 10240', '',
  ].join('\n'));
  writeFileSync(join(dir, 'instruction.md'), 'Write `/app/total.py`: it prints the sum of the `amount` column of `/app/sales.csv`.\n');
  writeFileSync(join(dir, 'environment', 'Dockerfile'), 'FROM python:3.12-slim\nWORKDIR /app\nCOPY sales.csv /app/sales.csv\n');
  writeFileSync(join(dir, 'environment', 'sales.csv'), 'item,amount\napple,10\npear,20\nplum,30\n');
  writeFileSync(join(dir, 'tests', 'test.sh'), [
    '#!/bin/bash',
    'mkdir -p /logs/verifier',
    'cd /app',
    'out=$(python3 total.py)',
    'echo "total.py printed: $out"',
    'if [ "$out" = "60" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi',
    '',
  ].join('\n'));
  writeFileSync(join(dir, 'solution', 'solve.sh'), '#!/bin/bash\necho \'import csv; print(sum(int(r["amount"]) for r in csv.DictReader(open("/app/sales.csv"))))\' > /app/total.py\n');
  writeFileSync(join(dir, 'sim.yaml'), `variants:\n  only:\n    steps:\n${steps}`);
}

const isolated = networkIsolated();

test.skipIf(!isolated)(`pi on the simulator: a newcomer's Harbor task gives reward 1 solved and 0 failed, with the verifier's provenance ${NEEDS_ISOLATION}`, async () => {
  const parent = join(scratch, 'newcomer');
  newcomerTask(parent, 'csv-total-solve', [
    '      - shell: cat sales.csv',
    `      - shell: "echo 'import csv; print(sum(int(r[\\"amount\\"]) for r in csv.DictReader(open(\\"sales.csv\\"))))' > total.py"`,
    '      - say: total.py prints the sum. done',
    '',
  ].join('\n'));
  newcomerTask(parent, 'csv-total-fail', [
    `      - shell: "echo 'print(3)' > total.py"`,
    '      - say: total.py prints the number of rows. done',
    '',
  ].join('\n'));
  const tasks = loadTaskDir(parent);
  expect(tasks.map((t) => t.task.task_id)).toEqual(['csv-total-fail', 'csv-total-solve']);
  const store = openStore(join(scratch, 'newcomer.db'));
  try {
    const report = await runTasks({
      tasks, harness: 'pi', samples: 1, modelName: 'polar-sim', builder: 'prefix_merging', store, concurrency: 2,
      workRoot: join(scratch, 'newcomer-work'), harnessCacheDir: HARNESS_CACHE, progressIntervalMs: 200,
    });
    expect(report.statuses).toEqual({ COMPLETED: 2 });
    for (const [id, want, printed] of [['csv-total-solve', 1, '60'], ['csv-total-fail', 0, '3']] as const) {
      const [session] = store.sessions.listByTask(id);
      const result = store.results.get(session!.session_id)!;
      expect(rewardOf(result)).toBe(want);
      const evaluation = result.trajectory.metadata.evaluation!;
      expect(evaluation.details).toMatchObject({ evaluator: 'harbor', exit_code: 0, reward_source: 'reward.txt', reward_raw: String(want), config: { workdir: '/app', timeout_s: 60 } });
      expect(String(evaluation.details!.output_tail)).toContain(`total.py printed: ${printed}`);
    }
  } finally {
    store.close();
  }
}, 150_000);

test('examples/harbor with the shell agent: each session reward follows its variant (reward.txt; reward.json mean)', async () => {
  const dir = join(scratch, 'examples');
  cpSync(resolve(import.meta.dir, '../../examples/harbor'), dir, { recursive: true });
  const tasks = loadTaskDir(dir);
  expect(tasks.map((t) => t.task.task_id)).toEqual(['fix-fizzbuzz', 'write-greeting']);
  const expected: Record<string, Record<string, number>> = {
    'fix-fizzbuzz': { solve: 1, wrong_fix: 0 },
    'write-greeting': { solve: 1, wrong_text: 0.5, give_up: 0 },
  };
  const store = openStore(join(scratch, 'examples.db'));
  try {
    const report = await runTasks({
      tasks, harness: 'shell', command: SHELL_AGENT_COMMAND, runtime: { read_only_paths: SHELL_AGENT_PATHS }, samples: 4, modelName: 'polar-sim', builder: 'prefix_merging', store,
      concurrency: 4, workRoot: join(scratch, 'examples-work'), progressIntervalMs: 200,
    });
    expect(report.statuses).toEqual({ COMPLETED: 8 });
    const seen = new Set<string>();
    for (const t of tasks) {
      const script = parseBehaviourScript(t.simScript);
      for (const s of store.sessions.listByTask(t.task.task_id)) {
        const variant = chooseVariant(script, s.session_id);
        seen.add(`${t.task.task_id}/${variant}`);
        expect(rewardOf(store.results.get(s.session_id)!)).toBe(expected[t.task.task_id]![variant]!);
      }
    }
    // Guards against a vacuous pass: sessions of both tasks were checked.
    expect([...seen].some((v) => v.startsWith('fix-fizzbuzz/')) && [...seen].some((v) => v.startsWith('write-greeting/'))).toBe(true);
  } finally {
    store.close();
  }
}, 120_000);
