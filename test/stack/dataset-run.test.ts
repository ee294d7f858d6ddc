/**
 * examples/swe/data.jsonl (SWE-bench-shaped rows with local checkouts) through `runTasks` on the simulator with the
 * shell agent (test/support/run-shell-agent.ts): swebench_harness applies each row's test_patch and judges
 * FAIL_TO_PASS/PASS_TO_PASS from `unittest -v`; every session's reward follows its scripted variant.
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { loadDataset } from '../../src/rollout/datasets.ts';
import { chooseVariant, parseBehaviourScript } from '../../src/sim/script.ts';
import { runTasks } from '../../src/stack/run-tasks.ts';
import { openStore } from '../../src/store/index.ts';
import { rewardOf } from '../../src/trace/groups.ts';
import { SHELL_AGENT_COMMAND, SHELL_AGENT_PATHS } from '../support/polar-cli.ts';

const scratch = mkdtempSync(join(tmpdir(), 'polar-dataset-run-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

test('examples/swe: rewards follow the variants (solve 1; a broken PASS_TO_PASS, a wrong fix or giving up 0)', async () => {
  const tasks = await loadDataset(resolve(import.meta.dir, '../../examples/swe/data.jsonl'), { format: 'swebench' });
  const expected: Record<string, number> = { solve: 1, break_mul: 0, give_up: 0, wrong_fix: 0 };
  const store = openStore(join(scratch, 'swe.db'));
  try {
    const report = await runTasks({
      tasks, harness: 'shell', command: SHELL_AGENT_COMMAND, runtime: { read_only_paths: SHELL_AGENT_PATHS }, samples: 3, modelName: 'polar-sim', builder: 'prefix_merging', store,
      concurrency: 3, workRoot: join(scratch, 'work'), progressIntervalMs: 200,
    });
    expect(report.statuses).toEqual({ COMPLETED: 6 });
    let checked = 0;
    for (const t of tasks) {
      const script = parseBehaviourScript(t.simScript);
      for (const s of store.sessions.listByTask(t.task.task_id)) {
        const variant = chooseVariant(script, s.session_id);
        const result = store.results.get(s.session_id)!;
        expect(rewardOf(result)).toBe(expected[variant]!);
        expect(result.trajectory.metadata.evaluation?.details).toMatchObject({ evaluator: 'swebench_harness', log_parser: 'unittest', patch_applied: true });
        checked++;
      }
    }
    expect(checked).toBe(6);
  } finally {
    store.close();
  }
}, 120_000);
