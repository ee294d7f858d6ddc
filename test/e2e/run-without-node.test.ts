/**
 * `polar run` with a PATH that holds no `node`, `npm`, `npx` or `corepack`: JavaScript CLIs run on polar's own Bun
 * (the `node` shim of src/gateway/harnesses/install.ts), native ones as they are. Each needs its install in the harness
 * cache (test/support/install-harnesses.ts puts them there before `npm test` enters the loopback-only namespace).
 * - JavaScript CLIs: one example task, one sample, against the built-in simulator; the runs go at once (most of a
 *   CLI's run is its own start-up and waiting). Continue and Kilo Code are run this way in token mode by
 *   run-new-harnesses.test.ts, so not again here.
 * - Native CLIs: their bin is an executable, not a script for an interpreter, so the PATH cannot matter to them; their
 *   runs are in run-harnesses.test.ts and run-new-harnesses.test.ts.
 * CLIs known not to run on Bun would be listed in their adapter's `js.bun` with the reason; none is today.
 */
import { afterAll, expect, test } from 'bun:test';
import { closeSync, mkdtempSync, openSync, readSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { HARNESS_ADAPTERS } from '../../src/gateway/harnesses/index.ts';
import { defaultHarnessCache, harnessPaths, harnessRuntime } from '../../src/gateway/harnesses/install.ts';
import { loadTaskDir } from '../../src/rollout/task-file.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';
import { expectCompletedToolLoop } from '../support/run-checks.ts';
import { pathWithoutNode } from '../support/without-node.ts';

const root = resolve(import.meta.dir, '../..');
const out = mkdtempSync(join(tmpdir(), 'polar-run-without-node-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));
const pathDir = pathWithoutNode();
const taskDir = join(root, 'examples/tasks/mean-empty');
const task = loadTaskDir(taskDir)[0]!.task;
/** Run without node in token mode by run-new-harnesses.test.ts. */
const ELSEWHERE = new Set(['continue', 'kilo']);

test('the PATH used below has no node or npm', () => {
  expect(Bun.which('node', { PATH: pathDir })).toBeNull();
  expect(Bun.which('npm', { PATH: pathDir })).toBeNull();
  expect(Bun.which('sh', { PATH: pathDir })).not.toBeNull();
});

for (const [name, adapter] of Object.entries(HARNESS_ADAPTERS)) {
  const pkg = adapter.package;
  if (!pkg) continue;
  const paths = harnessPaths(defaultHarnessCache(), pkg);
  if (pkg.js === 'native') {
    test.skipIf(!paths.installed)(`${name}: a native CLI, run as it is without node on PATH; its bin is an ELF executable (needs ${pkg.name} in the harness cache)`, () => {
      expect(harnessRuntime(pkg, pathDir).runtime).toBe('native');
      const head = new Uint8Array(4);
      const fd = openSync(realpathSync(paths.bin), 'r');
      try {
        readSync(fd, head, 0, 4, 0);
      } finally {
        closeSync(fd);
      }
      expect([...head]).toEqual([0x7f, 0x45, 0x4c, 0x46]);
    });
    continue;
  }
  if (ELSEWHERE.has(name)) continue;
  test.concurrent.skipIf(!networkIsolated() || !paths.installed)(
    `polar run --harness ${name} with no node or npm on PATH completes its tool loop ${NEEDS_ISOLATION} (and needs ${pkg.name} in the harness cache)`,
    async () => {
      expect(harnessRuntime(pkg, pathDir).runtime).toBe(pkg.runtime ? 'node' : 'bun');
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
