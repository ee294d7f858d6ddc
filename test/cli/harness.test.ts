/** `polar harness pack` / `install --from` through the CLI, and its usage errors (exit 2). */
import { afterAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { getHarnessAdapter } from '../../src/gateway/harnesses/index.ts';
import { harnessPaths } from '../../src/gateway/harnesses/install.ts';

const root = resolve(import.meta.dir, '../..');
const dir = mkdtempSync(join(tmpdir(), 'polar-cli-harness-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function polar(args: string[], env?: Record<string, string | undefined>): { code: number; stdout: string; stderr: string } {
  const r = Bun.spawnSync([process.execPath, 'src/main.ts', ...args], { cwd: root, stdout: 'pipe', stderr: 'pipe', ...(env ? { env } : {}) });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

test('pack pi from one cache, install --from into another: the CLI reports each step; offline, nothing is fetched', () => {
  const pkg = getHarnessAdapter('pi').package!;
  const source = join(dir, 'source');
  const paths = harnessPaths(source, pkg);
  mkdirSync(paths.binDir, { recursive: true });
  writeFileSync(join(paths.nodeModules, 'cli.js'), 'console.log(1)\n');
  symlinkSync('../cli.js', paths.bin);
  writeFileSync(join(paths.prefix, '.installed'), 'now');
  const out = join(dir, 'h.tar.zst');
  const packed = polar(['harness', 'pack', 'pi', '--cache', source, '--out', out]);
  expect(packed.stdout).toBe(`packed ${pkg.name}@${pkg.version} (3 files) → ${out}\n`);
  const target = join(dir, 'target');
  const installed = polar(['harness', 'install', '--from', out, '--cache', target]);
  expect({ code: installed.code, stdout: installed.stdout }).toEqual({ code: 0, stdout: `installed: ${pkg.name}@${pkg.version} (from ${out})\n` });
  expect(harnessPaths(target, pkg).installed).toBe(true);
});

test('usage errors exit 2 and say what is wrong', () => {
  expect(polar(['harness', 'install', 'pi', '--from', 'x.tar.zst'])).toMatchObject({ code: 2, stderr: expect.stringContaining('either harness names or --from') });
  expect(polar(['harness', 'install'])).toMatchObject({ code: 2, stderr: expect.stringContaining('name a harness to install') });
  expect(polar(['harness', 'install', 'pi', '--installer', 'yarn', '--cache', join(dir, 'c')])).toMatchObject({ code: 2, stderr: expect.stringContaining('--installer must be npm or bun') });
  expect(polar(['doctor', '--mode', 'tokens'])).toMatchObject({ code: 2, stderr: expect.stringContaining('--mode must be chat or token') });
});

test('--to and --cache name the cache install reads and fills; --installer chooses the installer; --installer with --from is refused', () => {
  const pkg = getHarnessAdapter('pi').package!;
  const filled = join(dir, 'filled');
  const paths = harnessPaths(filled, pkg);
  mkdirSync(paths.binDir, { recursive: true });
  writeFileSync(join(paths.nodeModules, 'cli.js'), 'console.log(1)\n');
  symlinkSync('../cli.js', paths.bin);
  writeFileSync(join(paths.prefix, '.installed'), 'now');
  for (const flag of ['--to', '--cache']) {
    const r = polar(['harness', 'install', 'pi', flag, filled]);
    expect(r.code).toBe(0);
    expect(r.stdout).toStartWith(`already installed: ${pkg.name}@${pkg.version} → ${paths.bin} `);
  }
  expect(polar(['harness', 'install', 'pi', '--to', filled, '--cache', join(dir, 'other')])).toMatchObject({ code: 2, stderr: expect.stringContaining('--to and --cache name the same directory') });
  // npm asked for on a PATH without it: the flag is read before anything is fetched (install and pack alike).
  const noNpm = { ...process.env, PATH: join(dir, 'no-such-dir'), POLAR_HARNESS_INSTALLER: undefined };
  const install = polar(['harness', 'install', 'pi', '--installer', 'npm', '--cache', join(dir, 'empty')], noNpm);
  expect(install).toMatchObject({ code: 1, stderr: expect.stringContaining('installer npm was asked for but npm is not on PATH') });
  const pack = polar(['harness', 'pack', 'pi', '--installer', 'npm', '--cache', join(dir, 'empty'), '--out', join(dir, 'never.tar.zst')], noNpm);
  expect(pack).toMatchObject({ code: 1, stderr: expect.stringContaining('installer npm was asked for but npm is not on PATH') });
  // A pack install runs no installer.
  expect(polar(['harness', 'install', '--from', join(dir, 'h.tar.zst'), '--installer', 'bun', '--cache', join(dir, 'c')])).toMatchObject({ code: 2, stderr: expect.stringContaining('--installer applies to installs from the registry') });
});
