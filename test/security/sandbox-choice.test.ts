/**
 * The containment choice is explicit and visible: `polar run` prints it in its header and summary (and summary.json),
 * refuses to run without bubblewrap unless told `--no-sandbox` (runtime.isolation: none), and its flags reach the
 * runtime spec.
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { assertSandboxAvailable, describeSandbox, sandboxLine } from '../../src/gateway/runtimes/index.ts';

const repo = resolve(import.meta.dir, '../..');
const scratch = mkdtempSync(join(tmpdir(), 'polar-sandbox-choice-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

test('without bubblewrap the local runtime is refused unless isolation none is chosen; containers do not need it', () => {
  const missing = () => null;
  expect(() => assertSandboxAvailable({}, missing)).toThrow(/bubblewrap \(bwrap\) is not installed.*apt-get install bubblewrap.*runtime\.isolation: none.*--no-sandbox/);
  expect(() => assertSandboxAvailable({ kind: 'local', isolation: 'none' }, missing)).not.toThrow();
  expect(() => assertSandboxAvailable({ kind: 'podman', image: 'x' }, missing)).not.toThrow();
  expect(() => assertSandboxAvailable({}, () => '/usr/bin/bwrap')).not.toThrow();
  expect(describeSandbox({})).toEqual({ kind: 'local', isolation: 'bwrap', network: 'gateway', limits: null });
  expect(describeSandbox({ isolation: 'none', network: 'none' }).network).toBe('host');
  expect(sandboxLine(describeSandbox({ limits: { memory: '2g', pids: 100 } }))).toBe('bubblewrap sandbox, network gateway, limits memory=2g pids=100');
  expect(sandboxLine(describeSandbox({ isolation: 'none' }))).toMatch(/^NONE/);
});

function run(out: string, extra: string[]) {
  return Bun.spawnSync([process.execPath, 'src/main.ts', 'run', 'examples/tasks/range-sum', '--harness', 'shell', '--command', 'echo hi', '--quiet', '--out', out, ...extra], {
    cwd: repo, stdout: 'pipe', stderr: 'pipe', timeout: 120_000,
  });
}

test('polar run shows the sandbox in its header, summary and summary.json; --no-sandbox and --network change it', () => {
  const sandboxed = run(join(scratch, 'a'), ['--network', 'none']);
  expect(sandboxed.stdout.toString()).toContain('polar run: sandbox: bubblewrap sandbox, network none');
  expect(sandboxed.stdout.toString()).toMatch(/\nsandbox: bubblewrap sandbox, network none/);
  expect(JSON.parse(readFileSync(join(scratch, 'a', 'summary.json'), 'utf8')).sandbox).toEqual({ kind: 'local', isolation: 'bwrap', network: 'none', limits: null });
  const open = run(join(scratch, 'b'), ['--no-sandbox']);
  expect(open.stdout.toString()).toContain('polar run: sandbox: NONE');
  expect(JSON.parse(readFileSync(join(scratch, 'b', 'summary.json'), 'utf8')).sandbox.isolation).toBe('none');
  const bad = run(join(scratch, 'c'), ['--runtime', 'podman']);
  expect(bad.exitCode).toBe(2);
  expect(bad.stderr.toString()).toContain('runtime.image: the podman runtime needs an image');
  const badNet = run(join(scratch, 'd'), ['--network', 'bridge']);
  expect(badNet.exitCode).toBe(2);
  expect(badNet.stderr.toString()).toMatch(/network/);
});
