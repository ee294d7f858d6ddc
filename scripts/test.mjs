#!/usr/bin/env node
// The README's test command (`npm test`). Real harness CLIs must never reach past this machine, so the whole suite runs
// inside a loopback-only network namespace (`unshare -n` as root, `unshare -rn` otherwise). Pinned harness CLIs that the
// end-to-end tests use are installed first, while the registry is still reachable (POLAR_E2E=0 skips that).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const bunOnPath = spawnSync('bun', ['--version'], { stdio: 'ignore' }).status === 0;
const bun = bunOnPath ? 'bun' : join(root, 'node_modules', '.bin', 'bun');
// Integration tests start servers and real CLIs on a 2-core box: 5 s (Bun's default) is too tight under load.
const userArgs = process.argv.slice(2);
const args = userArgs.some((a) => a.startsWith('--timeout')) ? userArgs : ['--timeout', '120000', ...userArgs];

if (process.env.POLAR_E2E !== '0') {
  const install = spawnSync(bun, [join(root, 'test', 'support', 'install-harnesses.ts')], { stdio: 'inherit', cwd: root });
  if (install.status !== 0) console.error('warning: installing harness CLIs for end-to-end tests failed; those tests will fail');
}

// /proc/self/net/dev is per network namespace (/sys/class/net is not, until sysfs is remounted).
const onlyLoopback = () => {
  try {
    const names = readFileSync('/proc/self/net/dev', 'utf8').split('\n').slice(2).filter((l) => l.includes(':')).map((l) => l.split(':')[0].trim());
    return names.length > 0 && names.every((name) => name === 'lo');
  } catch { return false; }
};
const inner = `ip link set lo up 2>/dev/null || true; exec "${bun}" test ${args.map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ')}`;
let result = { status: null };
if (onlyLoopback()) {
  result = spawnSync(bun, ['test', ...args], { stdio: 'inherit', cwd: root });
} else {
  for (const flags of [['-n'], ['-rn']]) {
    if (spawnSync('unshare', [...flags, 'true'], { stdio: 'ignore' }).status !== 0) continue;
    result = spawnSync('unshare', [...flags, 'sh', '-c', inner], { stdio: 'inherit', cwd: root, env: { ...process.env, POLAR_NET_ISOLATED: '1' } });
    break;
  }
  if (result.status === null) {
    console.error('warning: no loopback-only network namespace available (unshare); tests that run real harness CLIs will be skipped');
    result = spawnSync(bun, ['test', ...args], { stdio: 'inherit', cwd: root });
  }
}
process.exit(result.status ?? 1);
