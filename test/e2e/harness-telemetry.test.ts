/**
 * The telemetry switches the adapters set are the ones the real CLI reads: run the installed CLI with the adapter's
 * launch (its files under a private HOME) inside a nested loopback-only namespace whose default route points at `lo`,
 * so a DNS query the CLI sends is written to a socket (and seen by strace) instead of failing before it leaves the
 * process. The model endpoint is a closed loopback port: the run only has to get as far as its first call.
 * Runs only inside a loopback-only network namespace (`npm test`), with strace on PATH.
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { getHarnessAdapter } from '../../src/gateway/harnesses/index.ts';
import { defaultHarnessCache, harnessPaths } from '../../src/gateway/harnesses/install.ts';
import type { HarnessLaunch } from '../../src/gateway/harnesses/types.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';

const out = mkdtempSync(join(tmpdir(), 'polar-harness-telemetry-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));
const hasStrace = Bun.which('strace') !== null;

/** Host names in the DNS queries a launch sends within `seconds` (from strace's dump of its UDP sends). */
async function dnsQueries(name: string, launch: HarnessLaunch, home: string, seconds: number): Promise<string[]> {
  for (const f of launch.files) {
    mkdirSync(dirname(f.path), { recursive: true });
    writeFileSync(f.path, f.content);
  }
  const trace = join(out, `${name}.strace`);
  const quoted = launch.argv.map((a) => `'${a.replaceAll("'", `'\\''`)}'`).join(' ');
  const script = `ip link set lo up; ip route add default dev lo; exec strace -f -qq -s 300 -e trace=sendto,sendmmsg -o ${trace} timeout -s KILL ${seconds} ${quoted}`;
  const proc = Bun.spawn(['unshare', '-n', 'sh', '-c', script], {
    cwd: home, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, ...launch.env }, stdout: 'ignore', stderr: 'ignore',
  });
  await proc.exited;
  const names = new Set<string>();
  // A DNS question is length-prefixed labels; strace prints the length bytes as octal escapes.
  for (const m of readFileSync(trace, 'latin1').matchAll(/iov_base="([^"]*)"/g)) {
    const labels = m[1]!.replace(/\\\d{1,3}|\\[a-z]/g, '.').match(/[a-z0-9-]+(\.[a-z0-9-]+)+/gi);
    for (const l of labels ?? []) if (/[a-z]/i.test(l)) names.add(l.toLowerCase());
  }
  return [...names];
}

const cline = getHarnessAdapter('cline');
const clineInstalled = harnessPaths(defaultHarnessCache(), cline.package!).installed;

test.skipIf(!networkIsolated() || !hasStrace || !clineInstalled)(
  `cline: with the adapter's global-settings.json (telemetryOptOut) and E2E_TEST=true the CLI looks up no host; without them it resolves its telemetry and feature-flag hosts (skipped without strace or an installed cline) ${NEEDS_ISOLATION}`,
  async () => {
    const paths = harnessPaths(defaultHarnessCache(), cline.package!);
    const launchFor = (name: string) => {
      const home = join(out, name);
      mkdirSync(home, { recursive: true });
      const launch = cline.launch({
        sessionId: 'ps_telemetry', instruction: 'say hello to me please', modelName: 'qwen3-sim', gatewayUrl: 'http://127.0.0.1:9',
        home, workDir: home, binPath: paths.bin, installDir: paths.nodeModules, settings: {},
      });
      return { home, launch };
    };
    const on = launchFor('cline-adapter');
    const off = launchFor('cline-without-switches');
    off.launch.files = off.launch.files.filter((f) => !f.path.endsWith('global-settings.json'));
    delete off.launch.env.E2E_TEST;
    const [adapterNames, bareNames] = await Promise.all([dnsQueries('on', on.launch, on.home, 20), dnsQueries('off', off.launch, off.home, 20)]);
    // Telemetry (OpenTelemetry) and feature flags (PostHog) without the switches; nothing with them.
    expect(bareNames).toContain('otel.cline.bot');
    expect(bareNames).toContain('data.cline.bot');
    expect(adapterNames).toEqual([]);
  },
  60_000,
);
