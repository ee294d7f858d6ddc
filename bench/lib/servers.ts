/**
 * Contender processes for benchmarks: start a server in its own process on 127.0.0.1, wait until it answers, and
 * stop it (and any children it spawned) by PID. Every wait is bounded.
 */
import { join } from 'node:path';
import type { Subprocess } from 'bun';
import { killTree } from './proc.ts';

/** A free TCP port on 127.0.0.1 (bound and released at once; another process could take it in between). */
export function freePort(): number {
  const server = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
  const port = server.port;
  server.stop(true);
  return port;
}

export interface ServerProcess {
  name: string;
  pid: number;
  /** Base URL, e.g. `http://127.0.0.1:43123`. */
  url: string;
  /** Stops the process tree (SIGTERM, then SIGKILL after 2 s) and waits for the root to exit. */
  stop(): Promise<void>;
  /** Everything the process wrote to stdout/stderr so far (for error messages). */
  output(): string;
}

export interface StartOptions {
  name: string;
  cmd: string[];
  port: number;
  env?: Record<string, string | undefined>;
  cwd?: string;
  /** Path polled until it answers any HTTP status (default `/`). */
  readyPath?: string;
  /** Give up after this many ms (default 30 000). */
  timeoutMs?: number;
}

/**
 * Starts `cmd` and resolves once `http://127.0.0.1:<port><readyPath>` answers.
 * @throws Error with the process's output when it exits early or does not answer in time (the process is killed).
 */
export async function startServer(opts: StartOptions): Promise<ServerProcess> {
  const chunks: string[] = [];
  const proc: Subprocess<'ignore', 'pipe', 'pipe'> = Bun.spawn(opts.cmd, {
    cwd: opts.cwd,
    env: { ...process.env, ...opts.env } as Record<string, string>,
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const drain = async (stream: ReadableStream<Uint8Array>) => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) {
      chunks.push(decoder.decode(chunk));
      if (chunks.length > 200) chunks.splice(0, chunks.length - 200); // keep the tail only
    }
  };
  void drain(proc.stdout);
  void drain(proc.stderr);
  const url = `http://127.0.0.1:${opts.port}`;
  const server: ServerProcess = {
    name: opts.name,
    pid: proc.pid,
    url,
    output: () => chunks.join(''),
    async stop() {
      killTree(proc.pid, 'SIGTERM');
      const exited = await Promise.race([proc.exited.then(() => true), Bun.sleep(2000).then(() => false)]);
      if (!exited) {
        killTree(proc.pid, 'SIGKILL');
        await proc.exited;
      }
    },
  };
  const deadline = performance.now() + (opts.timeoutMs ?? 30_000);
  while (performance.now() < deadline) {
    if (proc.exitCode !== null || proc.signalCode !== null) {
      throw new Error(`${opts.name} exited (${proc.exitCode ?? proc.signalCode}) before listening:\n${server.output().slice(-2000)}`);
    }
    try {
      await fetch(`${url}${opts.readyPath ?? '/'}`, { signal: AbortSignal.timeout(1000) });
      return server;
    } catch {
      await Bun.sleep(100);
    }
  }
  await server.stop();
  throw new Error(`${opts.name} did not answer on ${url} within ${opts.timeoutMs ?? 30_000} ms:\n${server.output().slice(-2000)}`);
}

/** Stops every server, ignoring ones already stopped. */
export async function stopAll(servers: (ServerProcess | undefined)[]): Promise<void> {
  await Promise.all(servers.map((s) => s?.stop().catch(() => undefined)));
}

const ROOT = join(import.meta.dir, '..', '..');

/** Starts the instant mock engine (bench/lib/mock-engine.ts: OpenAI Chat with vLLM-style token ids) on a free port. */
export function startMockEngine(): Promise<ServerProcess> {
  const port = freePort();
  return startServer({ name: 'mock', cmd: [process.execPath, join(import.meta.dir, 'mock-engine.ts'), '--port', String(port)], port, readyPath: '/health' });
}

/**
 * The instant mock engine and `polar proxy` in front of it (startMockEngine, startPolarProxy), each pushed onto
 * `servers` as soon as it runs, so one `stopAll(servers)` ends whichever started.
 */
export async function startMockAndProxy(servers: ServerProcess[], dbPath: string, bunArgs: string[] = []): Promise<{ mock: ServerProcess; proxy: ServerProcess }> {
  const mock = await startMockEngine();
  servers.push(mock);
  const proxy = await startPolarProxy(mock.url, dbPath, bunArgs);
  servers.push(proxy);
  return { mock, proxy };
}

/**
 * Starts `polar proxy --engine vllm` from this checkout on a free port, in front of `engineUrl`, with its SQLite store
 * at `dbPath` (capture and the durable record included, as in production). `bunArgs` go before the script (e.g.
 * `--cpu-prof-md`).
 */
export function startPolarProxy(engineUrl: string, dbPath: string, bunArgs: string[] = []): Promise<ServerProcess> {
  const port = freePort();
  return startServer({
    name: 'polar proxy',
    cmd: [process.execPath, ...bunArgs, join(ROOT, 'src/main.ts'), 'proxy', '--port', String(port), '--engine', 'vllm', '--engine-url', engineUrl, '--db', dbPath],
    port,
  });
}
