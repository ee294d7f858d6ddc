/**
 * CPU profile of `polar proxy --engine vllm` serving N sequential 100 KB Claude-Code-shaped Messages calls against
 * the instant mock engine (or small ones): where our own per-call cost goes. Writes Bun's markdown CPU profile
 * (`--cpu-prof-md`) to DIR and prints its head. With CONNECTIONS > 1 the calls are not sequential: autocannon
 * (bench/lib/load.mjs) keeps that many in flight for N seconds, which shows what concurrency adds (GC, queues).
 * Usage: bun bench/lib/profile-proxy.ts [DIR] [N=300] [large|small] [CONNECTIONS=1]
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { messagesBodies } from './requests.ts';
import { runLoad } from './load.ts';
import { startMockAndProxy, stopAll, type ServerProcess } from './servers.ts';

const outDir = resolve(process.argv[2] ?? mkdtempSync(join(tmpdir(), 'polar-profile-')));
const calls = Number(process.argv[3] ?? 300);
const size = process.argv[4] ?? 'large';
const connections = Number(process.argv[5] ?? 1);
if (!Number.isInteger(calls) || calls < 1 || (size !== 'large' && size !== 'small') || !Number.isInteger(connections) || connections < 1) {
  console.error('usage: bun bench/lib/profile-proxy.ts [DIR] [N] [large|small] [CONNECTIONS]');
  process.exit(2);
}
mkdirSync(outDir, { recursive: true });
const servers: ServerProcess[] = [];
try {
  const { proxy } = await startMockAndProxy(servers, join(outDir, 'polar.db'), ['--cpu-prof-md', `--cpu-prof-dir=${outDir}`]);
  const body = JSON.stringify({ ...messagesBodies()[size], stream: false });
  if (connections > 1) {
    const spec = { url: `${proxy.url}/v1/messages`, headers: { 'content-type': 'application/json', 'x-api-key': 'profile' }, body, connections, durationS: calls };
    console.log(JSON.stringify(await runLoad(outDir, 'profile-load', spec)));
  } else {
    for (let i = 0; i < calls; i++) {
      const response = await fetch(`${proxy.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': 'profile' }, body });
      if (response.status !== 200) throw new Error(`proxy answered ${response.status}: ${(await response.text()).slice(0, 300)}`);
      await response.arrayBuffer();
    }
  }
} finally {
  await stopAll(servers);
}
const profile = readdirSync(outDir).find((f) => f.endsWith('.md'));
if (!profile) {
  console.error(`no profile written to ${outDir}`);
  process.exit(1);
}
console.log(`profile: ${join(outDir, profile)}`);
console.log(readFileSync(join(outDir, profile), 'utf8').split('\n').slice(0, 60).join('\n'));
