/**
 * The loopback tunnel that lets a network-isolated sandbox reach its gateway node, and nothing else.
 *
 * Host side, `GatewaySocket`: an HTTP server on a Unix socket (mode 0666) serving the node's model API (its proxy) and
 * nothing of its session API. The local runtime bind-mounts the socket file into each sandbox; the container runtimes
 * run the tunnel from the host inside the container's network namespace.
 * Sandbox side, `polar tunnel --port P --socket S -- CMD…` (`runTunnel`): listens on 127.0.0.1:P inside the sandbox's
 * own network namespace (only `lo`), forwards each connection to the bind-mounted socket, and runs CMD as its child,
 * exiting with CMD's exit status (128+n for a signal). Because P is the node's own port, the harness uses the same
 * `http://127.0.0.1:P` base URL as it would without isolation. This is how the reference Polar reaches the gateway
 * from a network-isolated Apptainer sandbox.
 *
 * This module imports only `node:` built-ins, so the sandbox can run it with nothing but a Bun binary bound in
 * (see `tunnelCommand`). Sources: https://nodejs.org/api/net.html (IPC paths, `server.listen`),
 * https://man7.org/linux/man-pages/man7/unix.7.html (connect needs write permission on the socket file).
 */
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';

/** Pipe two sockets both ways; an error or close on either ends both. */
function splice(a: Socket, b: Socket): void {
  a.pipe(b);
  b.pipe(a);
  const end = () => { a.destroy(); b.destroy(); };
  a.on('error', end).on('close', end);
  b.on('error', end).on('close', end);
}

/**
 * Paths a sandbox may not use through its socket: the node's session API (`/sessions…`: dispatch, cancel, status and
 * every session's completions), its event stream and the proxy's `/admin/*`. What is left is the model API.
 */
export function sandboxRefuses(pathname: string): boolean {
  let p = pathname;
  try {
    p = decodeURI(pathname);
  } catch {
    // a malformed escape stays as it is
  }
  p = p.replace(/\/{2,}/g, '/').toLowerCase();
  return /^\/(sessions|admin|events)(\/|$)/.test(p);
}

/** The handler behind the socket (the node's proxy: the model API). */
export type SocketHandler = (request: Request, server: Bun.Server<undefined>) => Response | Promise<Response>;

/**
 * The host Unix socket sandboxes reach the gateway node through: an HTTP server on `$TMPDIR/polar-gw-XXXX/gateway.sock`
 * (mode 0666) that answers the model API with the node's proxy and refuses `sandboxRefuses` paths with 403, so a
 * harness cannot dispatch, cancel or read other sessions even on a node without a control-plane token.
 */
export class GatewaySocket {
  /** Absolute path of the socket file. */
  readonly path: string;
  private readonly server: Bun.Server<undefined>;
  private readonly dir: string;

  private constructor(path: string, dir: string, server: Bun.Server<undefined>) {
    this.path = path;
    this.dir = dir;
    this.server = server;
  }

  /** Listen on a fresh socket. @throws Error when the socket cannot be created. */
  static async open(handler: SocketHandler): Promise<GatewaySocket> {
    const dir = mkdtempSync(join(tmpdir(), 'polar-gw-'));
    // The sandbox's user must traverse the directory; the socket is the only thing in it.
    chmodSync(dir, 0o711);
    const path = join(dir, 'gateway.sock');
    const options = {
      unix: path,
      // No idle timeout: a non-streaming completion may take minutes (Bun's default of 10 s would cut it). Bun's types
      // leave idleTimeout out of the unix-socket variant, but the server honours it (test/gateway/sandbox.test.ts).
      idleTimeout: 0,
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      fetch: (request: Request, srv: Bun.Server<undefined>) => sandboxRefuses(new URL(request.url).pathname)
        ? Response.json({ error: 'not available from inside a sandbox' }, { status: 403 })
        : handler(request, srv),
    };
    const server = Bun.serve(options as unknown as Parameters<typeof Bun.serve>[0]) as unknown as Bun.Server<undefined>;
    // A sandbox user that is not the socket's owner needs write permission to connect.
    chmodSync(path, 0o666);
    return new GatewaySocket(path, dir, server);
  }

  async close(): Promise<void> {
    await this.server.stop(true);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Options of `runTunnel`. */
export interface TunnelOptions {
  /** Loopback TCP port to listen on inside the sandbox. */
  port: number;
  /** Unix socket to forward to. */
  socket: string;
  /** The command to run once the port listens; empty = forward until killed (the container runtimes' mode). */
  argv: string[];
}

/**
 * Listen on 127.0.0.1:`port`, forward to `socket`, run `argv` (inheriting stdio and env) and resolve with its exit
 * status (128+signal number when it was killed). Termination signals are passed on to the command. With an empty
 * `argv`, print `listening` once bound and forward until SIGTERM/SIGINT/SIGHUP (resolves 0).
 * @throws Error when the port cannot be bound.
 */
export async function runTunnel(opts: TunnelOptions): Promise<number> {
  const [file, ...args] = opts.argv;
  const server = createServer((client) => splice(client, connect(opts.socket)));
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) => reject(new Error(`polar tunnel: cannot listen on 127.0.0.1:${opts.port}: ${error.message}`)));
    server.listen(opts.port, '127.0.0.1', () => resolve());
  });
  if (file === undefined) {
    process.stdout.write('listening\n');
    return await new Promise<number>((resolve) => {
      for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => { server.close(); resolve(0); });
    });
  }
  const child = spawn(file, args, { stdio: 'inherit' });
  const forward = (signal: NodeJS.Signals) => () => { child.kill(signal); };
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, forward(signal));
  return await new Promise<number>((resolve) => {
    child.once('error', (error) => {
      process.stderr.write(`polar tunnel: cannot run ${file}: ${error.message}\n`);
      resolve(127);
    });
    child.once('exit', (code, signal) => {
      server.close();
      resolve(code ?? 128 + (signal ? (signalNumbers[signal] ?? 1) : 1));
    });
  });
}

const signalNumbers: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGALRM: 14, SIGTERM: 15 };

/** Where the gateway socket appears inside every sandbox. */
export const SANDBOX_GATEWAY_SOCKET = '/run/polar/gateway.sock';

/**
 * How a sandbox starts the tunnel: host files to bind read-only (host path → sandbox path) and the argv prefix
 * (`… --port P --socket S -- CMD` follows). A compiled `polar` binary runs its own `tunnel` subcommand; from source,
 * the Bun binary runs this file directly (it needs nothing but `node:` built-ins).
 */
export function tunnelCommand(): { binds: Array<[string, string]>; argv: string[] } {
  if (isCompiled()) return { binds: [[process.execPath, '/run/polar/polar']], argv: ['/run/polar/polar', 'tunnel'] };
  return {
    binds: [[process.execPath, '/run/polar/bun'], [selfPath(), '/run/polar/tunnel.ts']],
    argv: ['/run/polar/bun', '/run/polar/tunnel.ts'],
  };
}

/** The same command as run on the host (the container runtimes enter the container's network namespace with it). */
export function hostTunnelCommand(): string[] {
  return isCompiled() ? [process.execPath, 'tunnel'] : [process.execPath, selfPath()];
}

function isCompiled(): boolean {
  return Bun.main.startsWith('/$bunfs/') || basename(process.execPath) === 'polar';
}

function selfPath(): string {
  return join(dirname(new URL(import.meta.url).pathname), 'tunnel.ts');
}

/** Parse `--port P --socket S [--] CMD…` (the argv of `polar tunnel` and of this file run directly). */
export function parseTunnelArgs(args: string[]): TunnelOptions {
  let port: number | null = null;
  let socket: string | null = null;
  let i = 0;
  for (; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--port') port = Number(args[++i]);
    else if (a === '--socket') socket = args[++i] ?? null;
    else if (a === '--') { i++; break; } else break;
  }
  if (port === null || !Number.isInteger(port) || port < 1 || port > 65535) throw new Error('polar tunnel: --port must be a TCP port (1-65535)');
  if (!socket) throw new Error('polar tunnel: --socket PATH is required');
  if (!existsSync(socket)) throw new Error(`polar tunnel: socket ${socket} does not exist`);
  return { port, socket, argv: args.slice(i) };
}

if (import.meta.main) {
  try {
    process.exit(await runTunnel(parseTunnelArgs(process.argv.slice(2))));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exit(125);
  }
}
