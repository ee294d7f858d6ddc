/**
 * The local runtime's bubblewrap sandbox for real: what a sandboxed command can see, the three network modes (the
 * gateway one through the `polar tunnel` bridge to a host Unix socket), and cgroup resource limits.
 * Needs bubblewrap (`apt-get install bubblewrap`).
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalRuntime } from '../../src/gateway/runtimes/local.ts';
import { parseMemory } from '../../src/gateway/runtimes/limits.ts';
import { GatewaySocket, parseTunnelArgs } from '../../src/gateway/runtimes/tunnel.ts';

const root = mkdtempSync(join(tmpdir(), 'polar-sandbox-'));
const secret = join(root, 'secret.txt');
writeFileSync(secret, 'top secret\n');
let server: ReturnType<typeof Bun.serve>;
let socket: GatewaySocket;
beforeAll(async () => {
  server = Bun.serve({
    hostname: '127.0.0.1', port: 0, idleTimeout: 0,
    fetch: async (req) => {
      const path = new URL(req.url).pathname;
      if (path === '/slow') await Bun.sleep(11_000); // longer than Bun's default idle timeout of 10 s
      return new Response(`gateway saw ${path}`);
    },
  });
  socket = await GatewaySocket.open((req) => server.fetch(req));
});
afterAll(async () => {
  await socket.close();
  server.stop(true);
  rmSync(root, { recursive: true, force: true });
});

const gateway = () => ({ port: server.port!, socket: socket.path });
const fetchScript = (port: number) => `python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:${port}/probe', timeout=3).read().decode())"`;

test('sandbox: sees its own dirs, /usr and its own PID namespace; not other host files, the host /proc or host env', async () => {
  process.env.POLAR_TEST_HOST_SECRET = 'leaked';
  const rt = new LocalRuntime({ sessionId: 'see', workRoot: join(root, 'w') });
  await rt.start();
  const r = await rt.exec(`id -u; cat ${secret} 2>&1; ls /proc | grep -c '^[0-9]'; env; touch /usr/x 2>&1; touch ${root}/escape 2>&1; echo ok > out.txt; python3 -c "print(6*7)"`);
  delete process.env.POLAR_TEST_HOST_SECRET;
  expect(r.exitCode).toBe(0);
  const lines = r.stdout.split('\n');
  expect(lines[0]).toBe('1000');
  expect(r.stdout).toContain('No such file or directory');
  expect(r.stdout).not.toContain('top secret');
  expect(Number(lines[2])).toBeLessThanOrEqual(4); // bwrap's init, sh, ls, grep: nothing of the host
  expect(r.stdout).not.toContain('POLAR_TEST_HOST_SECRET');
  expect(r.stdout).toMatch(/touch: .*\/usr\/x.*Read-only file system/);
  expect(r.stdout).toContain('42');
  expect(await Bun.file(join(rt.workDir, 'out.txt')).text()).toBe('ok\n');
  expect(await Bun.file(join(root, 'escape')).exists()).toBe(false);
  await rt.stop();
});

test('network gateway: the harness reaches the gateway at 127.0.0.1:<its port> through the tunnel and nothing else', async () => {
  const rt = new LocalRuntime({ sessionId: 'gw', workRoot: join(root, 'w'), gateway: gateway() });
  await rt.start();
  const proc = rt.spawn(['sh', '-c', `${fetchScript(server.port!)} && exit 5`]);
  expect((await proc.exited).exitCode).toBe(5); // the command's own status comes back through the tunnel
  expect(proc.stdout()).toContain('gateway saw /probe');
  // exec (prepare, evaluators) has no tunnel: only loopback, nothing listening.
  const exec = await rt.exec(fetchScript(server.port!));
  expect(exec.exitCode).not.toBe(0);
  expect(exec.stderr).toMatch(/Connection refused/);
  await rt.stop();
});

test('through the socket a sandbox gets the model API, never the session API, events or admin paths', async () => {
  const rt = new LocalRuntime({ sessionId: 'api', workRoot: join(root, 'w'), gateway: gateway() });
  await rt.start();
  const code = (path: string) => `python3 -c "import urllib.request,urllib.error
try: print(urllib.request.urlopen('http://127.0.0.1:${server.port}${path}', timeout=3).status)
except urllib.error.HTTPError as e: print(e.code)"`;
  const paths = ['/v1/models', '/sessions', '/sessions/other/completions', '//sessions/x', '/%73essions/x', '/admin/inference/pause', '/events'];
  const proc = rt.spawn(['sh', '-c', paths.map(code).join('; ')]);
  expect((await proc.exited).exitCode).toBe(0);
  expect(proc.stdout().trim().split('\n')).toEqual(['200', '403', '403', '403', '403', '403', '403']);
  await rt.stop();
});

test('a reply slower than 10 s still comes back through the socket (no idle timeout)', async () => {
  const rt = new LocalRuntime({ sessionId: 'slow', workRoot: join(root, 'w'), gateway: gateway() });
  await rt.start();
  const proc = rt.spawn(['sh', '-c', `python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:${server.port}/slow', timeout=30).read().decode())"`]);
  expect((await proc.exited).exitCode).toBe(0);
  expect(proc.stdout()).toContain('gateway saw /slow');
  await rt.stop();
});

test('network none has no tunnel; network host shares the host loopback', async () => {
  const none = new LocalRuntime({ sessionId: 'none', workRoot: join(root, 'w'), gateway: gateway(), network: 'none' });
  await none.start();
  const blocked = none.spawn(['sh', '-c', fetchScript(server.port!)]);
  expect((await blocked.exited).exitCode).not.toBe(0);
  expect(blocked.stderr()).toMatch(/Connection refused/);
  await none.stop();
  const host = new LocalRuntime({ sessionId: 'host', workRoot: join(root, 'w'), network: 'host' });
  await host.start();
  const r = await host.exec(fetchScript(server.port!));
  expect(r.stdout).toContain('gateway saw /probe');
  await host.stop();
});

test('limits: memory beyond the limit is killed, pids beyond the limit cannot fork; stop removes what is left', async () => {
  const rt = new LocalRuntime({ sessionId: 'lim', workRoot: join(root, 'w'), limits: { memoryBytes: parseMemory('128m'), pids: 32, cpus: 1 } });
  await rt.start();
  const mem = await rt.exec(`python3 -c "x = bytearray(400*1024*1024); print('allocated')"`);
  expect(mem.exitCode).toBe(137);
  expect(mem.stdout).not.toContain('allocated');
  const small = await rt.exec(`python3 -c "x = bytearray(20*1024*1024); print('allocated')"`);
  expect(small.stdout).toContain('allocated');
  const forks = await rt.exec('for i in $(seq 1 60); do sleep 1 & done; wait; echo forked all', { timeoutMs: 20_000 });
  expect(forks.stdout).not.toContain('forked all');
  expect(forks.stderr).toMatch(/fork/i);
  await rt.stop();
  const unlimited = new LocalRuntime({ sessionId: 'nolim', workRoot: join(root, 'w') });
  await unlimited.start();
  expect((await unlimited.exec('for i in $(seq 1 60); do sleep 0.2 & done; wait; echo forked all')).stdout).toContain('forked all');
  await unlimited.stop();
});

test('parseMemory and parseTunnelArgs: sizes and bad input', () => {
  expect(parseMemory('512m')).toBe(512 * 1024 ** 2);
  expect(parseMemory('2GiB')).toBe(2 * 1024 ** 3);
  expect(parseMemory(1000)).toBe(1000);
  expect(() => parseMemory('lots')).toThrow(/not a size/);
  expect(parseTunnelArgs(['--port', '8090', '--socket', socket.path, '--', 'pi', '-p'])).toEqual({ port: 8090, socket: socket.path, argv: ['pi', '-p'] });
  expect(() => parseTunnelArgs(['--port', '0', '--socket', socket.path])).toThrow(/--port/);
  expect(() => parseTunnelArgs(['--port', '80', '--socket', '/nonexistent.sock'])).toThrow(/does not exist/);
});
