/**
 * The node's HTTP surface (shapes: src/core/contracts/dispatch.ts) on one Bun.serve: the session API as `routes`, and the proxy (hono app from
 * `createProxyApp`) as the `fetch` fallback, so a harness's base URL is the gateway itself.
 * `POST /sessions` → 202 {session_id, status}; `GET|DELETE /sessions/:id`; `GET /health`; `GET /events` (SSE).
 * With a control-plane token, the session API and /events need `authorization: Bearer <token>` (/health stays open),
 * and so do the proxy's control paths (`/admin/*`, `GET /sessions/{id}/completions`): they are checked here too, before
 * the fallback, because harnesses in the sandboxes reach this port and must not pause inference, re-stamp policy
 * versions or read captures, whatever proxy the node was given.
 * Bun routes: https://bun.com/docs/api/http#routing
 */
import { bearerMatches } from '../proxy/admin-access.ts';
import { DispatchError } from '../core/contracts/index.ts';
import type { FetchHandler, SessionHost } from './node-types.ts';

export type { FetchHandler } from './node-types.ts';

export interface SessionServerOptions {
  host: string;
  /** 0 = a free port. */
  port: number;
  token: string | null;
  /** Everything that is not the session API (the proxy). Default: 404 JSON. */
  fallback?: FetchHandler;
}

const json = (body: unknown, status = 200) => Response.json(body, { status });

/**
 * The proxy's control paths: `/admin/...` and `/sessions/{id}/completions`, also when spelled with `//` or
 * percent-escapes (hono's router decodes the path the same way before it matches).
 */
function isControlPath(pathname: string): boolean {
  let p = pathname;
  try {
    p = decodeURI(pathname);
  } catch {
    // a malformed escape: hono leaves it undecoded too
  }
  p = p.replace(/\/{2,}/g, '/');
  return p === '/admin' || p.startsWith('/admin/') || /^\/sessions\/[^/]+\/completions\/?$/.test(p);
}

/** Start the server for `node`. Throws when the port is taken. */
export function startSessionServer(node: SessionHost, opts: SessionServerOptions): Bun.Server<undefined> {
  const authorized = (req: Request) => opts.token === null || bearerMatches(req.headers.get('authorization'), opts.token);
  const fallback: FetchHandler = opts.fallback ?? (() => json({ error: 'not found' }, 404));
  const guardedFallback: FetchHandler = (req, server) =>
    opts.token !== null && isControlPath(new URL(req.url).pathname) && !authorized(req)
      ? json({ error: 'missing or wrong control-plane token' }, 401)
      : fallback(req, server);
  const guard = (handler: (req: Bun.BunRequest) => Response | Promise<Response>) => (req: Bun.BunRequest) =>
    authorized(req) ? handler(req) : json({ error: 'missing or wrong control-plane token' }, 401);
  return Bun.serve({
    hostname: opts.host,
    port: opts.port,
    idleTimeout: 255,
    routes: {
      '/sessions': {
        POST: guard(async (req) => {
          let body: unknown;
          try {
            body = await req.json();
          } catch {
            return json({ error: 'body must be JSON' }, 400);
          }
          try {
            return json(node.dispatch(body), 202);
          } catch (error) {
            if (error instanceof DispatchError) return json({ error: error.message }, error.status);
            throw error;
          }
        }),
      },
      '/sessions/:id': {
        GET: guard((req) => {
          const view = node.get((req as Bun.BunRequest<'/sessions/:id'>).params.id);
          return view ? json(view) : json({ error: 'unknown session' }, 404);
        }),
        DELETE: guard((req) => {
          const id = (req as Bun.BunRequest<'/sessions/:id'>).params.id;
          const view = node.get(id);
          if (!view) return json({ error: 'unknown session' }, 404);
          const cancelled = node.cancel(id);
          return json({ session_id: id, cancelled, status: node.get(id)?.status ?? view.status });
        }),
      },
      '/health': {
        GET: () => {
          const engine = node.engineHealth();
          return json({ node_id: node.nodeId, ok: true, stages: node.stageCounts(), capacity: node.capacity, ...(engine ? { engine } : {}) });
        },
      },
      '/events': {
        GET: guard((req) => node.events.sseResponse(req.signal)),
      },
    },
    fetch: guardedFallback,
    error: (error) => json({ error: `internal error: ${error.message}` }, 500),
  });
}
