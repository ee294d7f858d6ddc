/**
 * Starts test/support/uvicorn_engine.py (a stand-in engine on a REAL uvicorn, the HTTP server vLLM and SGLang use) for
 * the HTTP/1.1 client tests and bench/uvicorn-http1.ts. Needs a python3 that can `import uvicorn` (Debian:
 * python3-uvicorn; python3-httptools for the httptools parser).
 */
import { spawnSync, type Subprocess } from 'bun';
import { join } from 'node:path';

const SCRIPT = join(import.meta.dir, 'uvicorn_engine.py');

/**
 * The first python3 that imports uvicorn (and, with `httptools`, httptools): `$POLAR_TEST_PYTHON`, `python3` on PATH,
 * `/usr/bin/python3`. @returns its path, or null when none does.
 */
export function pythonWithUvicorn(httptools = false): string | null {
  const candidates = [process.env.POLAR_TEST_PYTHON, 'python3', '/usr/bin/python3'].filter((c): c is string => !!c);
  for (const python of candidates) {
    try {
      const probe = spawnSync([python, '-c', `import uvicorn${httptools ? ', httptools' : ''}`], { stdout: 'ignore', stderr: 'ignore' });
      if (probe.exitCode === 0) return python;
    } catch {
      // not installed: try the next
    }
  }
  return null;
}

/** One running uvicorn engine: its port, its process, and `stop()` (SIGKILL; resolves once it exited). */
export interface UvicornEngine {
  port: number;
  url: string;
  process: Subprocess;
  stop(): Promise<void>;
}

/**
 * Start the stand-in engine. @param options.port a fixed port (to restart on the same one), 0 = a free one;
 * `http`: uvicorn's HTTP parser (`h11`, or `httptools` as vLLM installs it); `keepAliveS`: --timeout-keep-alive.
 * @throws Error when it does not print its port within 15 s.
 */
export async function startUvicornEngine(python: string, options: { port?: number; http?: 'h11' | 'httptools'; keepAliveS?: number } = {}): Promise<UvicornEngine> {
  const args = [python, SCRIPT, '--port', String(options.port ?? 0), '--http', options.http ?? 'h11', '--timeout-keep-alive', String(options.keepAliveS ?? 5)];
  const process = Bun.spawn(args, { stdout: 'pipe', stderr: 'inherit' });
  const reader = process.stdout.getReader();
  let text = '';
  const deadline = Date.now() + 15_000;
  while (!/PORT (\d+)\n/.test(text)) {
    const next = await Promise.race([reader.read(), Bun.sleep(Math.max(0, deadline - Date.now())).then(() => null)]);
    if (next === null || next.done) {
      process.kill(9);
      throw new Error(`${SCRIPT} did not report its port within 15 s (output: ${JSON.stringify(text.slice(0, 400))})`);
    }
    text += new TextDecoder().decode(next.value);
  }
  reader.releaseLock();
  const port = Number(/PORT (\d+)\n/.exec(text)![1]);
  // The port is printed just before uvicorn starts serving on the socket: wait until it answers.
  for (let i = 0; i < 200; i++) {
    const ok = await fetch(`http://127.0.0.1:${port}/pid`).then((r) => r.ok, () => false);
    if (ok) break;
    await Bun.sleep(25);
  }
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    process,
    async stop() {
      process.kill(9);
      await process.exited;
    },
  };
}
