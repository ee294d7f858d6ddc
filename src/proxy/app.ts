/**
 * The proxy: the only hono app. A harness points its base URL here; each call is decoded from the caller's dialect
 * into the IR, sent to the engine with token capture, recorded, and answered in the caller's dialect as JSON or SSE.
 * This file composes the parts: context.ts (shared state and helpers), middleware.ts (body limit, control access),
 * routes/completions.ts, routes/models.ts, routes/tokenize.ts, routes/admin.ts, synthetic-stream.ts.
 *
 * Routes (each also under `/s/{session_id}`): `POST /v1/messages` (+ `?beta=true`), `POST /v1/messages/count_tokens`,
 * `POST /v1/chat/completions`, `POST /v1/responses`, `POST /v1beta/models/{model}:generateContent|streamGenerateContent|
 * countTokens`, `GET /v1beta/models[/{model}]`, `GET /v1/models`, `POST /v1/tokenize`, `HEAD|GET /`, `GET /metrics` (Prometheus,
 * ../observe/proxy-metrics.ts). Plus `GET /sessions/{id}/completions`, `GET /admin/inference/status`,
 * `POST /admin/inference/pause?timeout_seconds=`, `POST /admin/inference/resume`, `POST /admin/policy_version {policy_version}`.
 * Access to those control endpoints (admin-access.ts): with `options.adminToken`, `/admin/*` and the completions
 * listing need `Authorization: Bearer <token>`; without one, `/admin/*` answers loopback peers only (the peer comes
 * from the Bun server passed as `fetch`'s 2nd argument) and the listing stays open (its session id is the secret).
 *
 * Errors the router itself produces render in the dialect that owns the path prefix (`dialectForPath`): an unknown
 * route is 404, a known path with the wrong method is 405 with `Allow`, a body over `maxBodyBytes` is 413.
 */
import { Hono } from 'hono';
import { GatewayError, toGatewayError } from '../core/errors.ts';
import { createProxyRuntime, errorDialect, renderError, type Env } from './context.ts';
import { defaultDialectRoutes, type DialectRoute } from './dialect-table.ts';
import type { ProxyMetrics } from '../observe/proxy-metrics.ts';
import type { InferenceGate } from './inference-gate.ts';
import { bodyLimitGuard } from './middleware.ts';
import { registerAdminRoutes } from './routes/admin.ts';
import { completionHandler, countTokensHandler } from './routes/completions.ts';
import { dialectModelRoutes, listModels, rootHandler } from './routes/models.ts';
import { tokenizeHandler } from './routes/tokenize.ts';
import type { ProxyDeps } from './types.ts';

export interface ProxyAppExtras {
  /** Replace the dialect table (tests, embedding). */
  routes?: DialectRoute[];
}

/**
 * A proxy app plus handles to its gate (pause/version) for in-process callers such as the gateway, and `endSession`
 * to drop a finished session's engine-side state (token mode's token buffers; a no-op in chat mode).
 */
export type ProxyApp = Hono<Env> & { gate: InferenceGate; endSession(sessionId: string): void; metrics: ProxyMetrics };

/**
 * Create the proxy's hono app.
 * @param deps engine (probed or probing lazily on first call), store, session directory, optional clock/ids/options.
 * @returns a Hono app (use `app.fetch` as a Bun.serve fetch handler) with `gate` attached.
 */
export function createProxyApp(deps: ProxyDeps, extras: ProxyAppExtras = {}): ProxyApp {
  const rt = createProxyRuntime(deps, extras.routes ?? defaultDialectRoutes());
  const app = new Hono<Env>() as ProxyApp;
  app.gate = rt.gate;
  app.metrics = rt.metrics;
  app.endSession = (sessionId) => {
    deps.engine.endSession?.(sessionId);
    rt.requests.forget(sessionId);
  };

  app.onError((thrown, c) => {
    const error = toGatewayError(thrown);
    if (error.kind === 'internal') console.error('polar proxy: internal error', thrown);
    return renderError(c, errorDialect(rt, c), error);
  });
  app.notFound((c) => renderError(c, errorDialect(rt, c), new GatewayError('not-found', `no route for ${c.req.method} ${c.req.path}`)));
  app.use('*', rt.metrics.middleware());
  app.use('*', bodyLimitGuard(rt));
  app.get('/metrics', async (c) => c.body(await rt.metrics.text(), 200, { 'content-type': rt.metrics.registry.contentType }));

  /** Methods registered per path pattern: a request with another method gets 405 and this list in `Allow`. */
  const allowed = new Map<string, Set<string>>();
  const allow = (methods: readonly string[], path: string) => {
    const set = allowed.get(path) ?? new Set<string>();
    for (const method of methods) set.add(method);
    if (methods.includes('GET')) set.add('HEAD'); // hono answers HEAD with the GET handler
    allowed.set(path, set);
  };

  for (const prefix of ['', '/s/:sid']) {
    for (const route of rt.routes) {
      for (const path of route.paths) {
        app.post(prefix + path, completionHandler(rt, route));
        allow(['POST'], prefix + path);
      }
      for (const path of route.countTokens?.paths ?? []) {
        app.post(prefix + path, countTokensHandler(rt, route, route.countTokens!));
        allow(['POST'], prefix + path);
      }
      for (const [path, handler] of route.models ? dialectModelRoutes(rt, route, route.models) : []) {
        app.get(prefix + path, handler);
        allow(['GET'], prefix + path);
      }
    }
    app.get(`${prefix}/v1/models`, (c) => listModels(rt, c));
    allow(['GET'], `${prefix}/v1/models`);
    const chat = rt.routes.find((r) => r.paths.includes('/v1/chat/completions'));
    if (chat) {
      app.post(`${prefix}/v1/tokenize`, tokenizeHandler(rt, chat));
      allow(['POST'], `${prefix}/v1/tokenize`);
    }
    const root = prefix === '' ? '/' : prefix;
    app.on(['GET', 'HEAD'], root, rootHandler(rt));
    allow(['GET'], root);
  }
  for (const [methods, path] of registerAdminRoutes(app, rt)) allow(methods, path);

  // Registered last, so they run only when no handler of the path's own methods matched.
  for (const [path, methods] of allowed) {
    const allowHeader = [...methods].join(', ');
    app.all(path, (c) => {
      c.header('allow', allowHeader);
      return renderError(c, errorDialect(rt, c), new GatewayError('invalid-request', `method ${c.req.method} is not allowed on ${c.req.path}; allowed: ${allowHeader}`, { status: 405 }));
    });
  }
  return app;
}
