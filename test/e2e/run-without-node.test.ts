/**
 * Every harness that has a package, run by `polar run` on one example task with one sample against the built-in
 * simulator, with a PATH that holds no `node`, `npm`, `npx` or `corepack`: JavaScript CLIs run on polar's own Bun
 * (the `node` shim of src/gateway/harnesses/install.ts), native ones as they are. Each needs its install in the harness
 * cache (test/support/install-harnesses.ts puts them there before `npm test` enters the loopback-only namespace).
 * CLIs known not to run on Bun would be listed in their adapter's `js.bun` with the reason; none is today.
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { HARNESS_ADAPTERS } from '../../src/gateway/harnesses/index.ts';
import { defaultHarnessCache, harnessPaths } from '../../src/gateway/harnesses/install.ts';
import { loadTaskDir } from '../../src/rollout/task-file.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';
import { expectCompletedToolLoop } from '../support/run-checks.ts';

const root = resolve(import.meta.dir, '../..');
const out = mkdtempSync(join(tmpdir(), 'polar-run-without-node-'));
// The PATH dir must not live under /tmp: a bubblewrap session gets a private /tmp and would not see it.
const pathDir = mkdtempSync(join(homedir(), '.polar-path-without-node-'));
afterAll(() => {
  rmSync(out, { recursive: true, force: true });
  rmSync(pathDir, { recursive: true, force: true });
});
const NODE_TOOLS = new Set(['node', 'nodejs', 'npm', 'npx', 'corepack']);
for (const dir of (process.env.PATH ?? '/usr/bin:/bin').split(':')) {
  let names: string[] = [];
  try {
    names = readdirSync(dir);
  } catch {
    continue;
  }
  for (const name of names) {
    if (NODE_TOOLS.has(name)) continue;
    try {
      symlinkSync(join(dir, name), join(pathDir, name));
    } catch {
      // an earlier PATH entry already provides this name
    }
  }
}
mkdirSync(pathDir, { recursive: true });
const taskDir = join(root, 'examples/tasks/mean-empty');
const task = loadTaskDir(taskDir)[0]!.task;

test('the PATH used below has no node or npm', () => {
  expect(Bun.which('node', { PATH: pathDir })).toBeNull();
  expect(Bun.which('npm', { PATH: pathDir })).toBeNull();
  expect(Bun.which('sh', { PATH: pathDir })).not.toBeNull();
});

for (const [name, adapter] of Object.entries(HARNESS_ADAPTERS)) {
  if (!adapter.package) continue;
  const installed = harnessPaths(defaultHarnessCache(), adapter.package).installed;
  test.skipIf(!networkIsolated() || !installed)(
    `polar run --harness ${name} with no node or npm on PATH completes its tool loop ${NEEDS_ISOLATION} (and needs ${adapter.package.name} in the harness cache)`,
    async () => {
      const dir = join(out, name);
      const proc = Bun.spawn([process.execPath, 'src/main.ts', 'run', taskDir, '--harness', name, '--samples', '1', '--out', dir, '--quiet', '--timeout-s', '140'], {
        cwd: root, env: { ...process.env, PATH: pathDir }, stdout: 'pipe', stderr: 'pipe', timeout: 150_000, killSignal: 'SIGKILL',
      });
      const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
      if (code !== 0) console.error(stdout.slice(-3000), stderr.slice(-3000));
      expect(code).toBe(0);
      expectCompletedToolLoop(dir, task.task_id);
    },
    160_000,
  );
}
