/**
 * CLI rough edges: a mistyped flag or command gets commander's "did you mean" and one hint line, not the whole help;
 * `polarCommand` names a command that exists for hints; `isProblem` sends only problem lines of `polar run` to stderr;
 * `polar version` in a binary built without scripts/build.ts (no commit defined) prints "unknown" instead of crashing.
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { polarCommand } from '../../src/cli/common.ts';
import { isProblem } from '../../src/cli/run.ts';
import { REPO_ROOT, runPolar } from '../support/polar-cli.ts';

const scratch = mkdtempSync(join(tmpdir(), 'polar-usage-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

test('a mistyped flag gets "did you mean" and one hint line, exit 2', async () => {
  const out = await runPolar(['run', 'examples/tasks', '--harness', 'shell', '--sample', '2']);
  expect(out.code).toBe(2);
  expect(out.stderr).toContain("unknown option '--sample'");
  expect(out.stderr).toContain('--samples');
  expect(out.stderr.trim().split('\n').length).toBeLessThanOrEqual(3);
  const command = await runPolar(['reslts', '--db', 'x.db']);
  expect(command.code).toBe(2);
  expect(command.stderr).toContain('results');
  expect(command.stderr.trim().split('\n').length).toBeLessThanOrEqual(3);
});

test('polarCommand: npm run polar -- from source; the binary name on PATH, else its path', () => {
  expect(polarCommand('/repo/src/main.ts', '/usr/bin/bun')).toBe('npm run polar --');
  expect(polarCommand('/$bunfs/root/polar', '/usr/local/bin/polar', '/usr/bin:/usr/local/bin')).toBe('polar');
  expect(polarCommand('/$bunfs/root/polar', `${process.cwd()}/dist/polar`, '/usr/bin')).toBe('./dist/polar');
  expect(polarCommand('/$bunfs/root/polar', '/opt/x/polar', '/usr/bin')).toBe('/opt/x/polar');
});

test('isProblem: failures and warnings go to stderr, progress to stdout', () => {
  expect(isProblem('engine probe failed (retried on the first call): refused')).toBe(true);
  expect(isProblem('WARNING: engine sim at http://x is not reachable')).toBe(true);
  expect(isProblem('callback for s1 to http://x failed: gateway stopping')).toBe(true);
  expect(isProblem('engine sim at http://x is reachable again')).toBe(false);
  expect(isProblem('system_messages: in_place (the chat template renders a system message after a user turn)')).toBe(false);
});

test('polar version in a binary built without the build script prints commit unknown', async () => {
  const bin = join(scratch, 'polar-plain');
  const build = Bun.spawnSync([process.execPath, 'build', '--compile', join(REPO_ROOT, 'src/main.ts'), '--outfile', bin], { cwd: REPO_ROOT, stdout: 'pipe', stderr: 'pipe' });
  expect(build.exitCode).toBe(0);
  const run = Bun.spawnSync([bin, 'version'], { cwd: scratch, stdout: 'pipe', stderr: 'pipe' });
  expect(run.stderr.toString()).toBe('');
  expect(run.exitCode).toBe(0);
  expect(run.stdout.toString()).toMatch(/^polar \d+\.\d+\.\d+\S* \(commit unknown, bun \d/);
}, 120_000);
