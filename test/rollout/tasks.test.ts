/**
 * The example bug-fix tasks and their loader: every task's repo fails its tests as shipped, the scripted `solve`
 * commands make them pass, and the `wrong_fix` / `give_up` variants leave them failing.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { loadTaskDir, toTaskRequest } from '../../src/rollout/task-file.ts';

const root = resolve(import.meta.dir, '..', '..');
const scratch = mkdtempSync(join(tmpdir(), 'polar-tasks-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const tasks = loadTaskDir(join(root, 'examples/tasks'));

function runUnittest(cwd: string): number {
  return Bun.spawnSync(['python3', '-m', 'unittest', '-q'], { cwd, stdout: 'ignore', stderr: 'ignore' }).exitCode;
}

test('loads at least five tasks with absolute paths and a behaviour script', () => {
  expect(tasks.length).toBeGreaterThanOrEqual(5);
  for (const t of tasks) {
    const prepare = (t.task.runtime as unknown as { prepare: { upload_dir?: { src: string } }[] }).prepare;
    expect(isAbsolute(prepare[0]!.upload_dir!.src)).toBe(true);
    expect(t.simScript?.variants.solve?.weight).toBeCloseTo(0.5);
    expect(Object.keys(t.simScript!.variants).sort()).toEqual(['give_up', 'solve', 'wrong_fix']);
    expect(t.task.evaluator?.strategy).toBe('test_on_output');
  }
});

describe.each(tasks.map((t) => [t.task.task_id, t] as const))('task %s', (taskId, t) => {
  const repo = (t.task.runtime as unknown as { prepare: { upload_dir: { src: string } }[] }).prepare[0]!.upload_dir.src;
  const apply = (variant: string) => {
    const dir = join(scratch, `${taskId}-${variant}`);
    cpSync(repo, dir, { recursive: true });
    for (const step of t.simScript!.variants[variant]!.steps) {
      if ('shell' in step) Bun.spawnSync(['bash', '-c', step.shell], { cwd: dir, stdout: 'ignore', stderr: 'ignore' });
    }
    return runUnittest(dir);
  };
  test('ships failing', () => expect(runUnittest(repo)).not.toBe(0));
  test('solve fixes it', () => expect(apply('solve')).toBe(0));
  test('wrong_fix does not', () => expect(apply('wrong_fix')).not.toBe(0));
  test('give_up does not', () => expect(apply('give_up')).not.toBe(0));
});

test('toTaskRequest fills the flag-given fields and validates', () => {
  const req = toTaskRequest(tasks[0]!, { num_samples: 3, agent: { harness: 'pi', model_name: 'sim' } });
  expect(req.num_samples).toBe(3);
  expect(req.builder.strategy).toBe('prefix_merging');
  expect(() => toTaskRequest(tasks[0]!, {})).toThrow(/agent/);
});

test('a single task.yaml path loads one task', () => {
  expect(loadTaskDir(tasks[0]!.file).map((t) => t.task.task_id)).toEqual([tasks[0]!.task.task_id]);
});

test('bad task files give clear errors', () => {
  const dir = join(scratch, 'bad');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'task.yaml'), 'task_id: x\ninstruction: y\ntimeout_seconds: -1\n');
  expect(() => loadTaskDir(dir)).toThrow(/timeout_seconds/);
  writeFileSync(join(dir, 'task.yaml'), 'task_id: x\ninstruction: y\ntimeout_seconds: 5\nsim_script: missing.yaml\n');
  expect(() => loadTaskDir(dir)).toThrow(/missing\.yaml/);
  writeFileSync(join(dir, 'task.yaml'), 'task_id: [unclosed\n');
  expect(() => loadTaskDir(dir)).toThrow(/cannot parse/);
  expect(() => loadTaskDir(join(scratch, 'nope'))).toThrow(/not found/);
});

test('a task file\'s sim_script uses the same schema as `polar sim --scripts`: seed kept, weight 0 and a missing weight accepted', async () => {
  const { parseBehaviourScript } = await import('../../src/sim/script.ts');
  const dir = join(scratch, 'script-schema');
  mkdirSync(dir, { recursive: true });
  const script = 'seed: 42\nvariants:\n  solve:\n    steps:\n      - say: done\n  never:\n    weight: 0\n    steps:\n      - shell: "false"\n';
  writeFileSync(join(dir, 'sim.yaml'), script);
  writeFileSync(join(dir, 'task.yaml'), 'task_id: s\ninstruction: y\ntimeout_seconds: 5\nsim_script: sim.yaml\n');
  const [loaded] = loadTaskDir(dir);
  expect(loaded!.simScript).toEqual(parseBehaviourScript(script));
  expect(loaded!.simScript!.seed).toBe(42);
  expect(loaded!.simScript!.variants.solve!.weight).toBe(1);
  expect(loaded!.simScript!.variants.never!.weight).toBe(0);
  const request = toTaskRequest(loaded!, { agent: { harness: 'pi', model_name: 'm' } });
  expect((request.metadata?.sim_script as { seed: number }).seed).toBe(42);
});
