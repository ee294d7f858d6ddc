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
import { HARNESS_ADAPTERS } from '../../src/gateway/harnesses/index.ts';
import { defaultHarnessCache, harnessPaths } from '../../src/gateway/harnesses/install.ts';
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

test('polar results --status with an unknown status exits 2 and lists the statuses (any case of a known one is fine)', async () => {
  const bad = await runPolar(['results', '--db', ':memory:', '--status', 'BOGUS']);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain('--status BOGUS: not a session status; one of REGISTERED');
  expect(bad.stderr).toContain('CAPTURED');
  const ok = await runPolar(['results', '--db', ':memory:', '--status', 'completed']);
  expect(ok.code).toBe(0);
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

test('polar harness install: NAME or --all, not both, not neither', async () => {
  const both = await runPolar(['harness', 'install', 'pi', '--all']);
  expect(both.code).toBe(2);
  expect(both.stderr).toContain('give a harness NAME or --all');
  const neither = await runPolar(['harness', 'install']);
  expect(neither.code).toBe(2);
  const unknown = await runPolar(['harness', 'install', 'vim']);
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toContain('unknown harness "vim"');
});

// Filling a fresh directory downloads ~2 GB from npm, so the test runs --all against the harness cache the other
// tests fill (`npm test` installs every harness first); there it must be a no-op that lists each package once.
const cache = defaultHarnessCache();
const packages = [...new Set(Object.values(HARNESS_ADAPTERS).filter((a) => a.package).map((a) => `${a.package!.name}@${a.package!.version}`))];
const allInstalled = Object.values(HARNESS_ADAPTERS).every((a) => !a.package || harnessPaths(cache, a.package).installed);
test.skipIf(!allInstalled)(`polar harness install --all --to DIR: every package once, already installed${allInstalled ? '' : ' (skipped: the harness cache is not filled yet)'}`, async () => {
  const out = await runPolar(['harness', 'install', '--all', '--to', cache]);
  expect(out.code).toBe(0);
  const lines = out.stdout.trim().split('\n');
  expect(lines.filter((l) => l.startsWith('already installed: ')).map((l) => l.split(' ')[2])).toEqual(packages);
  expect(lines.at(-1)).toBe(`harness cache: ${cache} (copy it to the same path on the target box, or point $POLAR_HARNESS_CACHE at it)`);
}, 60_000);

test('polar run refuses flags that would have no effect: engine flags without --engine, simulator flags with it, --restore-reasoning in token mode', async () => {
  const base = ['run', 'examples/tasks', '--harness', 'shell', '--command', 'true', '--out', join(scratch, 'noeffect'), '--quiet'];
  const simOnly = await runPolar([...base, '--served-model', 'x', '--system-messages', 'merge']);
  expect(simOnly.code).toBe(2);
  expect(simOnly.stderr).toContain('--served-model, --system-messages apply to an external engine');
  const engine = await runPolar([...base, '--engine', 'vllm', '--engine-url', 'http://127.0.0.1:9', '--decode-tps', '5']);
  expect(engine.code).toBe(2);
  expect(engine.stderr).toContain('--decode-tps sets the built-in simulator');
  const token = await runPolar([...base, '--mode', 'token', '--restore-reasoning']);
  expect(token.code).toBe(2);
  expect(token.stderr).toContain('--restore-reasoning applies to --mode chat only');
});

test('polar submit refuses --json and --poll-interval without --wait (before submitting anything)', async () => {
  // Port 9 answers nothing: a refused flag must fail before any submit is tried.
  const base = ['submit', 'examples/tasks', '--server', 'http://127.0.0.1:9', '--harness', 'shell', '--command', 'true'];
  const json = await runPolar([...base, '--json']);
  expect(json.code).toBe(2);
  expect(json.stderr).toContain('--json applies to --wait');
  const poll = await runPolar([...base, '--poll-interval', '5', '--json']);
  expect(poll.code).toBe(2);
  expect(poll.stderr).toContain('--poll-interval, --json apply to --wait');
});
