/**
 * `polar run --engine KIND --engine-url URL` checks the engine before anything runs: a dead engine fails the run
 * with exit 1 and a clear message after the bounded wait, and no output directory or session is created.
 */
import { afterAll, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { unusedPort } from '../support/fake-engine.ts';

const root = resolve(import.meta.dir, '..', '..');
const bun = process.execPath;
const scratch = mkdtempSync(join(tmpdir(), 'polar-run-engine-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

test('polar run with an unreachable engine exits 1 before dispatching anything', async () => {
  const port = unusedPort();
  const out = join(scratch, 'out');
  const started = Date.now();
  const proc = Bun.spawn([
    bun, 'src/main.ts', 'run', 'examples/tasks', '--harness', 'shell', '--command', 'true', '--samples', '4',
    '--engine', 'vllm', '--engine-url', `http://127.0.0.1:${port}`, '--engine-wait-s', '1', '--out', out, '--quiet',
  ], { cwd: root, stdout: 'pipe', stderr: 'pipe', timeout: 30_000 });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect(code).toBe(1);
  expect(stderr).toContain(`polar run: engine vllm at http://127.0.0.1:${port} is unreachable (waited 1 s)`);
  expect(stderr).toContain('nothing was run');
  expect(stdout).not.toContain('task(s)'); // the run banner is printed only once sessions are about to be dispatched
  expect(existsSync(out)).toBe(false);
  expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
}, 30_000);

test('--engine-wait-s must be a number', () => {
  const run = Bun.spawnSync([bun, 'src/main.ts', 'run', 'examples/tasks', '--harness', 'pi', '--engine', 'vllm', '--engine-url', 'http://127.0.0.1:9', '--engine-wait-s', 'soon'], { cwd: root });
  expect(run.exitCode).toBe(2);
  expect(run.stderr.toString()).toContain('--engine-wait-s');
});
