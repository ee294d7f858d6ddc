/**
 * The podman runtime with real containers (a local busybox image, no registry: test/support/podman.ts): the work dir
 * exists in any image, exit statuses through `exec` are the command's own, timeouts and kills reach the whole tree,
 * teardown is immediate, network none/gateway (tunnel) and resource limits hold; the CLI runs in the runtime's own host
 * directory (removed on stop).
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRuntime, parseRuntimeSpec } from '../../src/gateway/runtimes/index.ts';
import type { ContainerRuntime } from '../../src/gateway/runtimes/container.ts';
import { GatewaySocket } from '../../src/gateway/runtimes/tunnel.ts';
import { HOST_USR, PODMAN_SKIP, podmanReady, TEST_IMAGE } from '../support/podman.ts';

const ok = podmanReady();
const name = (what: string) => (ok ? what : `${what} ${PODMAN_SKIP}`);
const root = mkdtempSync(join(tmpdir(), 'polar-podman-'));
let server: ReturnType<typeof Bun.serve>;
let socket: GatewaySocket;
beforeAll(async () => {
  server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: (req) => new Response(`gateway saw ${new URL(req.url).pathname}`) });
  socket = await GatewaySocket.open((req) => server.fetch(req));
});
afterAll(async () => {
  await socket.close();
  server.stop(true);
  rmSync(root, { recursive: true, force: true });
});

let n = 0;
function podman(node: Record<string, unknown> = {}): ContainerRuntime {
  const spec = parseRuntimeSpec({ kind: 'podman', image: TEST_IMAGE, run_args: HOST_USR }, node);
  return createRuntime(spec, { instanceKey: `podman-test-${process.pid}-${++n}`, workRoot: root, toolDirs: [], gateway: { port: server.port!, socket: socket.path } }) as ContainerRuntime;
}
const exists = (container: string) => spawnSync('podman', ['container', 'exists', container]).status === 0;

test.skipIf(!ok)(name('podman: the work dir exists in an image without it; exit statuses are the command\'s own; files go both ways'), async () => {
  const rt = podman();
  await rt.start();
  try {
    expect(await rt.exec('pwd')).toMatchObject({ exitCode: 0, stdout: '/workspace\n' });
    expect((await rt.exec('exit 3')).exitCode).toBe(3);
    expect((await rt.exec(['false'])).exitCode).toBe(1);
    const started = Date.now();
    const slow = await rt.exec('sleep 1; echo done; exit 2');
    expect(slow).toMatchObject({ exitCode: 2, stdout: 'done\n' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(900); // ran to its end, not forked away by setsid
    const host = join(root, 'in.txt');
    writeFileSync(host, 'payload\n');
    await rt.upload(host, 'sub/in.txt');
    await rt.writeFile('notes/a.txt', 'written\n');
    expect((await rt.exec('cat sub/in.txt notes/a.txt')).stdout).toBe('payload\nwritten\n');
    expect((await rt.exec('python3 -c "print(6*7)"')).stdout).toBe('42\n');
    await rt.download('/workspace/notes/a.txt', join(root, 'out.txt'));
    expect(readFileSync(join(root, 'out.txt'), 'utf8')).toBe('written\n');
  } finally {
    await rt.stop();
  }
});

test.skipIf(!ok)(name('podman: a timeout kills the command tree; a killed harness takes its children; teardown is immediate and reaps'), async () => {
  const rt = podman();
  await rt.start();
  const timed = await rt.exec('sleep 30 & sleep 30; echo never', { timeoutMs: 500 });
  expect(timed).toMatchObject({ exitCode: null, timedOut: true });
  const proc = rt.spawn(['sh', '-c', '(sleep 60 &); sleep 60']);
  await Bun.sleep(500);
  await proc.kill();
  const left = await rt.exec('ps -o pid,args | grep -e "sleep [36]0" | grep -v grep || echo none');
  expect(left.stdout.trim()).toBe('none');
  const zombies = await rt.exec("ps -o stat | grep -c '^Z' || true");
  expect(zombies.stdout.trim()).toBe('0');
  const started = Date.now();
  await rt.stop();
  expect(Date.now() - started).toBeLessThan(5_000);
  expect(exists(rt.name)).toBe(false);
});

test.skipIf(!ok)(name('podman network gateway: the harness reaches the gateway through the tunnel; exec and network none reach nothing'), async () => {
  const probe = `python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:${server.port}/probe', timeout=3).read().decode())"`;
  const rt = podman();
  await rt.start();
  try {
    const proc = rt.spawn(['sh', '-c', probe]);
    expect((await proc.exited).exitCode).toBe(0);
    expect(proc.stdout()).toContain('gateway saw /probe');
    const outside = await rt.exec('python3 -c "import socket; socket.create_connection((\'10.255.255.1\', 80), timeout=2)"');
    expect(outside.exitCode).not.toBe(0);
    expect(outside.stderr).toMatch(/unreachable|timed out|Network/i);
  } finally {
    await rt.stop();
  }
  const none = podman({ network: 'none' });
  await none.start();
  try {
    const r = await none.exec(probe);
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toMatch(/Connection refused/);
  } finally {
    await none.stop();
  }
});

test.skipIf(!ok)(name('podman limits: memory beyond the limit is killed, pids beyond the limit cannot fork'), async () => {
  const rt = podman({ limits: { memory: '128m', pids: 32, cpus: 1 } });
  const cwdOom = join(process.cwd(), 'oom');
  const before = existsSync(cwdOom) ? statSync(cwdOom).mtimeMs : null;
  await rt.start();
  try {
    const mem = await rt.exec(`python3 -c "x = bytearray(400*1024*1024); print('allocated')"`);
    expect(mem.exitCode).toBe(137);
    // conmon's empty `oom` marker lands in the runtime's own host directory, not in the gateway's working directory.
    expect(rt.hostDir!.startsWith(root)).toBe(true);
    expect(existsSync(join(rt.hostDir!, 'oom'))).toBe(true);
    expect(existsSync(cwdOom) ? statSync(cwdOom).mtimeMs : null).toBe(before);
    const forks = await rt.exec('for i in $(seq 1 60); do sleep 1 & done; wait; echo forked all', { timeoutMs: 20_000 });
    expect(forks.stdout).not.toContain('forked all');
  } finally {
    await rt.stop();
  }
  expect(existsSync(rt.hostDir!)).toBe(false);
});
