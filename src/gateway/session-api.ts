/**
 * The node's HTTP surface (shapes: src/core/contracts/dispatch.ts) on one Bun.serve: the session API as `routes`, and the proxy (hono app from
 * `createProxyApp`) as the `fetch` fallback, so a harness's base URL is the gateway itself.
 * `POST /sessions` → 202 {session_id, status} (409 with the held `attempt` when the id is known);
 * `GET /sessions?status&task_id&limit` (what the node holds, for restart adoption); `GET|DELETE /sessions/:id`; `GET /health`; `GET /events` (SSE);
 * `GET /metrics` (Prometheus, open like /health).
 * With a control-plane token, the session API and /events need `authorization: Bearer <token>` (/health stays open),
 * and so do the proxy's control paths (`/admin/*`, `GET /sessions/{id}/completions`): they are checked here too, before
 * the fallback, because harnesses in the sandboxes reach this port and must not pause inference, re-stamp policy
 * versions or read captures, whatever proxy the node was given.
 * Bun routes: https://bun.com/docs/api/http#routing
 */
import { controlTokenMatches } from '../core/control-token.ts';
import { DispatchError, SESSION_STATUSES } from '../core/contracts/index.ts';
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

/** `GET /health`'s pause state: the node's proxy's (POST /admin/inference/pause until /resume), else not paused. */
export interface InferencePauseView {
  inference_paused: boolean;
  /** ms epoch, null while not paused. */
  paused_since: number | null;
}

/** A host that can report its proxy's pause state (GatewayNode `inferencePause`, from its proxy's ProxyMetrics). */
type PauseReporting = { inferencePause?(): InferencePauseView | null };

function inferencePauseOf(node: SessionHost & PauseReporting): InferencePauseView {
  return node.inferencePause?.() ?? { inference_paused: false, paused_since: null };
}

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
export function startSessionServer(node: SessionHost & PauseReporting, opts: SessionServerOptions): Bun.Server<undefined> {
  const authorized = (req: Request) => opts.token === null || controlTokenMatches(req.headers, opts.token);
  const fallback: FetchHandler = opts.fallback ?? (() => json({ error: 'not found' }, 404));
  const guardedFallback: FetchHandler = (req, server) => {
    if (opts.token !== null && isControlPath(new URL(req.url).pathname) && !authorized(req)) return json({ error: 'missing or wrong control-plane token' }, 401);
    // Model calls may wait minutes on a busy engine before their first byte (a Gemini or Chat stream sends nothing,
    // not even its status, until the engine answers): no idle cut for them. https://bun.com/docs/api/http#server-timeout-request-seconds
    server.timeout(req, 0);
    return fallback(req, server);
  };
  const guard = (handler: (req: Bun.BunRequest) => Response | Promise<Response>) => (req: Bun.BunRequest) =>
    authorized(req) ? handler(req) : json({ error: 'missing or wrong control-plane token' }, 401);
  return Bun.serve({
    hostname: opts.host,
    port: opts.port,
    idleTimeout: 255,
    routes: {
      '/sessions': {
        // The Python Polar gateway's listing (src/polar/gateway/server.py `list_sessions`): ?status, ?task_id,
        // ?limit (1..1000, default 200) → {sessions, node_id}; each entry without its (large) result.
        GET: guard((req) => {
          const query = new URL(req.url).searchParams;
          const status = query.get('status');
          const taskId = query.get('task_id');
          if (status !== null && !(SESSION_STATUSES as readonly string[]).includes(status)) return json({ error: `status must be one of ${SESSION_STATUSES.join(', ')}, got ${JSON.stringify(status)}` }, 400);
          const limit = query.get('limit') === null ? 200 : Number(query.get('limit'));
          if (!Number.isInteger(limit) || limit < 1 || limit > 1000) return json({ error: `limit must be an integer in 1..1000, got ${query.get('limit')}` }, 400);
          const sessions = node.list({ status, taskId, limit }).map(({ result: _result, ...view }) => view);
          return json({ sessions, node_id: node.nodeId });
        }),
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
            if (error instanceof DispatchError) return json({ ...error.details, error: error.message }, error.status);
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
          const view = node.get(id, { result: false });
          if (!view) return json({ error: 'unknown session' }, 404);
          const cancelled = node.cancel(id, new URL(req.url).searchParams.get('reason') ?? undefined);
          return json({ session_id: id, cancelled, status: node.get(id, { result: false })?.status ?? view.status });
        }),
      },
      '/health': {
        GET: () => {
          const engine = node.engineHealth();
          const st = node.stageCounts();
          const busy = node.engineBusyFraction();
          const cap = node.capacity;
          // The Python Polar gateway's keys (status, metrics as NodeStageMetrics, available_*) next to ours.
          return json({
            status: 'ok', node_id: node.nodeId, ok: true, stages: st, capacity: cap, sandbox: node.sandbox(), ...(engine ? { engine } : {}),
            ...(busy !== null ? { engine_busy_fraction: busy } : {}),
            ...inferencePauseOf(node),
            metrics: { init_queue_depth: st.queued, init_inflight: st.init, ready_depth: st.ready, run_inflight: st.running, postrun_queue_depth: 0, postrun_inflight: st.postrun },
            available_init: Math.max(0, cap.init_workers - st.init), available_run: Math.max(0, cap.max_run_workers - st.running), available_postrun: Math.max(0, cap.postrun_workers - st.postrun),
          });
        },
      },
      '/events': {
        GET: guard((req) => node.events.sseResponse(req.signal)),
      },
      '/metrics': {
        GET: async () => {
          const { text, contentType } = await node.metricsText();
          return new Response(text, { headers: { 'content-type': contentType } });
        },
      },
    },
    fetch: guardedFallback,
    error: (error) => json({ error: `internal error: ${error.message}` }, 500),
  });
}
