/**
 * The Python client (clients/python) in `npm test`: its unittest suite (client against a stand-in rollout server,
 * to_samples on recorded group payloads, weight_sync, staleness, the slime and verl bridges) must pass, and the
 * package must install with pip into a fresh virtual environment (`pip install ./clients/python`).
 */
import { expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const dir = resolve(import.meta.dir, '..', '..', 'clients', 'python');
const python = process.env.POLAR_PYTHON ?? 'python3';
/** Whether pip can get the build backend (setuptools) here: from its configured index, local or remote. */
function canGetSetuptools(): boolean {
  const scratch = mkdtempSync(join(tmpdir(), 'polar-pipdl-'));
  try {
    return Bun.spawnSync([python, '-m', 'pip', 'download', '--no-deps', '-q', '-d', scratch, 'setuptools>=61'], { timeout: 60_000 }).exitCode === 0;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
const buildBackendReachable = canGetSetuptools();

test('python3 -m unittest: every test of the Python client passes', () => {
  const run = Bun.spawnSync([python, '-m', 'unittest', 'discover', '-s', 'tests', '-t', '.', '-v'], { cwd: dir, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
  const output = run.stderr.toString() + run.stdout.toString();
  if (run.exitCode !== 0) console.error(output.slice(-4000));
  expect(run.exitCode).toBe(0);
  const ran = Number(output.match(/Ran (\d+) tests?/)?.[1] ?? 0);
  expect(ran).toBeGreaterThanOrEqual(29);
  expect(output).toMatch(/\nOK\b/);
  expect(output).not.toMatch(/skipped/);
});

test.skipIf(!buildBackendReachable)('pip install ./clients/python into a fresh venv; the installed package imports with its bridges (skipped when pip cannot get setuptools: offline without a local index)', () => {
  const venv = mkdtempSync(join(tmpdir(), 'polar-venv-'));
  try {
    expect(Bun.spawnSync([python, '-m', 'venv', venv]).exitCode).toBe(0);
    const pip = Bun.spawnSync([join(venv, 'bin', 'python'), '-m', 'pip', 'install', '--no-deps', dir], { env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: '1' } });
    if (pip.exitCode !== 0) console.error(pip.stdout.toString().slice(-2000), pip.stderr.toString().slice(-2000));
    expect(pip.exitCode).toBe(0);
    // Run from elsewhere so the import comes from site-packages, not the source tree.
    const check = Bun.spawnSync([join(venv, 'bin', 'python'), '-c', 'import polar_client, polar_client.bridges.slime, polar_client.bridges.verl, importlib.resources as r; print(polar_client.__file__); print(r.files("polar_client").joinpath("py.typed").is_file())'], { cwd: venv });
    const [file, typed] = check.stdout.toString().trim().split('\n');
    expect(check.exitCode).toBe(0);
    expect(file).toContain(join(venv, 'lib'));
    expect(typed).toBe('True');
  } finally {
    rmSync(venv, { recursive: true, force: true });
  }
});
