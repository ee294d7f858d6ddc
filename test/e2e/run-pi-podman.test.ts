/**
 * `polar run <tasks> --harness pi --runtime podman`: a copy of two of the example tasks of test/e2e/run-pi.test.ts,
 * each session in a podman container (the local busybox test image with the host's `/usr` bound read-only for node and
 * python3; network gateway: the container has no network but the tunnel to the gateway). The rewards follow the
 * sessions' scripted variants exactly as on the local runtime: solve → 1, wrong_fix / give_up → 0. In the copy each
 * task plays one variant of its script (range-sum solves, word-count gives up), so both rewards occur. (Two tasks
 * keep it short; run-pi.test.ts runs all five on the local runtime.)
 * Runs only inside a loopback-only network namespace (`npm test`) and with podman installed.
 */
import { afterAll, expect, test } from 'bun:test';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { rewardOf } from '../../src/rollout/server.ts';
import { loadTaskDir } from '../../src/rollout/task-file.ts';
import { chooseVariant, parseBehaviourScript } from '../../src/sim/script.ts';
import { openStore } from '../../src/store/index.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';
import { HOST_USR, PODMAN_SKIP, podmanReady, TEST_IMAGE } from '../support/podman.ts';

const root = resolve(import.meta.dir, '../..');
const out = mkdtempSync(join(tmpdir(), 'polar-run-pi-podman-'));
const tasksDir = mkdtempSync(join(tmpdir(), 'polar-run-pi-podman-tasks-'));
afterAll(() => {
  rmSync(out, { recursive: true, force: true });
  rmSync(tasksDir, { recursive: true, force: true });
});
const skipReason = !networkIsolated() ? NEEDS_ISOLATION : !podmanReady() ? PODMAN_SKIP : null;
const SAMPLES = 2;

/** Make the copied task `taskId` play only `variant` of its script (the steps as shipped). */
function pinVariant(taskId: string, variant: string): void {
  const file = join(tasksDir, taskId, 'sim.yaml');
  const script = parseBehaviourScript(readFileSync(file, 'utf8'));
  writeFileSync(file, JSON.stringify({ variants: { [variant]: { weight: 1, steps: script.variants[variant]!.steps } } }));
}

test.skipIf(skipReason !== null)(`polar run --runtime podman: every session completes and rewards follow the variants as on local ${skipReason ?? ''}`.trim(), async () => {
  // The variant of a session is drawn by hashing its random id: unpinned, the sessions could all solve or all fail,
  // and "both rewards occurred" below would fail. Two pinned tasks make it certain.
  for (const name of ['range-sum', 'word-count']) cpSync(join(root, 'examples/tasks', name), join(tasksDir, name), { recursive: true });
  pinVariant('range-sum', 'solve');
  pinVariant('word-count', 'give_up');
  const args = ['run', tasksDir, '--harness', 'pi', '--samples', String(SAMPLES), '--out', out, '--quiet',
    '--runtime', 'podman', '--image', TEST_IMAGE, ...HOST_USR.map((a) => `--runtime-arg=${a}`)];
  const proc = Bun.spawn([process.execPath, 'src/main.ts', ...args], { cwd: root, env: { ...process.env }, stdout: 'pipe', stderr: 'pipe', timeout: 400_000, killSignal: 'SIGKILL' });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) console.error(stdout.slice(-3000), stderr.slice(-3000));
  expect(code).toBe(0);
  expect(stdout).toContain('sandbox: podman container, network gateway');
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as { all_completed: boolean; sandbox: unknown };
  expect(summary.all_completed).toBe(true);
  expect(summary.sandbox).toEqual({ kind: 'podman', isolation: 'podman', network: 'gateway', limits: null });

  const tasks = loadTaskDir(tasksDir);
  const store = openStore(join(out, 'results.db'));
  try {
    const rewards = new Set<number>();
    for (const t of tasks) {
      const script = parseBehaviourScript(t.simScript);
      const rows = store.sessions.listByTask(t.task.task_id);
      expect(rows).toHaveLength(SAMPLES);
      for (const s of rows) {
        const result = store.results.get(s.session_id);
        expect(result?.status).toBe('COMPLETED');
        const variant = chooseVariant(script, s.session_id);
        const reward = rewardOf(result!);
        rewards.add(reward!);
        expect({ task: t.task.task_id, variant, reward }).toEqual({ task: t.task.task_id, variant, reward: variant === 'solve' ? 1 : 0 });
        expect(store.completions.listBySession(s.session_id).length).toBeGreaterThanOrEqual(2);
      }
    }
    // Both outcomes occurred (range-sum always solves, word-count never does), so a runtime that scored everything alike would fail.
    expect([...rewards].sort()).toEqual([0, 1]);
  } finally {
    store.close();
  }
}, 420_000);
