/**
 * The proxy: the only hono app. A harness points its base URL here; each call is decoded from the caller's dialect
 * into the IR, sent to the engine in one non-streaming call with token capture, recorded, and answered in the
 * caller's dialect as JSON or as a synthetic SSE stream. Source: ARCHITECTURE.md §3; cross-module contract 4.
 *
 * Routes (each also under `/s/{session_id}`): `POST /v1/messages` (+ `?beta=true`), `POST /v1/messages/count_tokens`,
 * `POST /v1/chat/completions`, `POST /v1/responses`, `POST /v1beta/models/{model}:generateContent|streamGenerateContent|
 * countTokens`, `GET /v1beta/models[/{model}]`, `GET /v1/models`, `HEAD|GET /`. Plus `GET /sessions/{id}/completions`,
 * `POST /admin/inference/pause`, `POST /admin/inference/resume`, `POST /admin/policy_version {policy_version}`.
 * Access to those control endpoints (admin-access.ts): with `options.adminToken`, `/admin/*` and the completions
 * listing need `Authorization: Bearer <token>`; without one, `/admin/*` answers loopback peers only (the peer comes
 * from the Bun server passed as `fetch`'s 2nd argument) and the listing stays open (its session id is the secret).
 *
 * Errors the router itself produces render in the dialect that owns the path prefix (`dialectForPath`): an unknown
 * route is 404, a known path with the wrong method is 405 with `Allow`, a body over `maxBodyBytes` is 413.
 *
 * Claude Code retries a broken stream with the same body without `stream`; that retry is simply another call of the
 * same session and is recorded as such (the builders see the same prompt twice and chain it).
 */
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { systemClock } from '../core/clock.ts';
import type { CodecContext, Dialect } from '../core/dialect.ts';
import { GatewayError, toGatewayError } from '../core/errors.ts';
import { randomId } from '../core/ids.ts';
import type { IRRequest, IRResponse, Warning } from '../core/ir.ts';
import { responseToStreamEvents } from '../core/stream.ts';
import type { EngineCompletion } from '../engines/types.ts';
import { controlRefusal, peerAddressOf } from './admin-access.ts';
import { defaultDialectRoutes, dialectForPath, type DialectRoute } from './dialect-table.ts';
import { InferenceGate } from './inference-gate.ts';
import { Recorder } from './recorder.ts';
import { sessionKeyOf } from './sessions.ts';
import { DEFAULT_MAX_BODY_BYTES, newProxyCounters, type ProxyDeps, type ProxySessionInfo } from './types.ts';

type Env = { Variables: { dialect: Dialect } };

export interface ProxyAppExtras {
  /** Replace the dialect table (tests, embedding). */
  routes?: DialectRoute[];
}

/**
 * A proxy app plus handles to its gate (pause/version) for in-process callers such as the gateway, and `endSession`
 * to drop a finished session's engine-side state (token mode's token buffers; a no-op in chat mode).
 */
export type ProxyApp = Hono<Env> & { gate: InferenceGate; endSession(sessionId: string): void };

/**
 * Create the proxy's hono app.
 * @param deps engine (probed or probing lazily on first call), store, session directory, optional clock/ids/options.
 * @returns a Hono app (use `app.fetch` as a Bun.serve fetch handler) with `gate` attached.
 */
export function createProxyApp(deps: ProxyDeps, extras: ProxyAppExtras = {}): ProxyApp {
  const clock = deps.clock ?? systemClock;
  const newId = deps.newId ?? randomId;
  const options = deps.options ?? {};
  const counters = deps.counters ?? newProxyCounters();
  const keepaliveMs = options.keepaliveIntervalMs ?? 5000;
  const gate = new InferenceGate(options.initialPolicyVersion ?? null);
  const recorder = new Recorder(deps.store, deps.engine, clock, counters, deps.onRecord);
  const codecCtx: CodecContext = { now: clock, newId, options: options.dialectOptions };
  const routes = extras.routes ?? defaultDialectRoutes();
  const app = new Hono<Env>() as ProxyApp;
  app.gate = gate;
  app.endSession = (sessionId) => deps.engine.endSession?.(sessionId);

  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  /** The dialect a handler chose, else the one owning the path prefix. */
  const errorDialect = (c: Context<Env>): Dialect => c.get('dialect') ?? dialectForPath(routes, c.req.path);

  app.onError((thrown, c) => {
    const error = toGatewayError(thrown);
    if (error.kind === 'internal') console.error('polar proxy: internal error', thrown);
    return renderError(c, errorDialect(c), error);
  });
  app.notFound((c) => renderError(c, errorDialect(c), new GatewayError('not-found', `no route for ${c.req.method} ${c.req.path}`)));
  // https://hono.dev/docs/middleware/builtin/body-limit — checks Content-Length first, else counts the streamed body.
  app.use(
    '*',
    bodyLimit({
      maxSize: maxBodyBytes,
      onError: (c) => {
        counters.rejected++;
        // The rest of the body is never read: close the connection, or a keep-alive client that reuses it for its
        // next request sends that request after unread body bytes and waits forever.
        c.header('connection', 'close');
        return renderError(c, errorDialect(c), new GatewayError('invalid-request', `request body is larger than this proxy's limit of ${maxBodyBytes} bytes (proxy.max_body_bytes)`, { status: 413 }));
      },
    }),
  );

  /** Methods registered per path pattern: a request with another method gets 405 and this list in `Allow`. */
  const allowedMethods = new Map<string, Set<string>>();
  const allow = (methods: readonly string[], path: string) => {
    const set = allowedMethods.get(path) ?? new Set<string>();
    for (const method of methods) set.add(method);
    if (methods.includes('GET')) set.add('HEAD'); // hono answers HEAD with the GET handler
    allowedMethods.set(path, set);
  };

  function resolveSession(c: Context<Env>): ProxySessionInfo {
    const key = sessionKeyOf(c.req.raw.headers, new URL(c.req.url), c.req.param('sid'));
    const info = deps.sessions.resolve(key);
    if (!info) {
      counters.rejected++;
      throw new GatewayError('authentication', key === '' ? 'no API key: this gateway needs the session key as the API key' : 'unknown session: the API key is not a live Polar session');
    }
    return info;
  }

  async function readJson(c: Context<Env>): Promise<unknown> {
    return (await readJsonText(c)).body;
  }

  /** The parsed body and its exact text (the recorder stores the text as received instead of re-serialising it). */
  async function readJsonText(c: Context<Env>): Promise<{ body: unknown; text: string }> {
    const text = await c.req.text();
    try {
      return { body: JSON.parse(text) as unknown, text };
    } catch (thrown) {
      counters.rejected++;
      throw new GatewayError('invalid-request', `malformed JSON body: ${thrown instanceof Error ? thrown.message : String(thrown)}`);
    }
  }

  function decode(route: DialectRoute, body: unknown, url: URL, fromUrl = route.fromUrl?.(url)): IRRequest {
    let ir: IRRequest;
    try {
      ir = route.dialect.decodeRequest(body, { ...codecCtx, pathModel: fromUrl?.model, pathStream: fromUrl?.stream });
    } catch (thrown) {
      counters.rejected++;
      const error = toGatewayError(thrown);
      // A codec that throws a plain Error on bad input still means the input was bad.
      throw error.kind === 'internal' ? new GatewayError('invalid-request', error.message.replace(/^unexpected gateway failure: /, ''), { cause: thrown }) : error;
    }
    if (fromUrl?.stream !== undefined) ir.stream = fromUrl.stream;
    if (fromUrl?.model !== undefined) ir.model = fromUrl.model;
    return ir;
  }

  /** One engine call between gate enter/leave; returns the completion and the proxy's own warnings. */
  async function sample(ir: IRRequest, session: ProxySessionInfo, completionId: string, signal: AbortSignal | undefined) {
    const ticket = await gate.enter();
    let completion: EngineCompletion;
    try {
      completion = await deps.engine.complete(ir, { sessionId: session.session_id, taskId: session.task_id, requestId: completionId, signal });
    } catch (thrown) {
      gate.leave(ticket);
      counters.engineErrors++;
      throw toGatewayError(thrown);
    }
    const warnings: Warning[] = [];
    if (gate.leave(ticket).straddled) {
      counters.straddled++;
      warnings.push({ code: 'straddled-policy-change', message: 'sampling was in flight across an inference pause or a policy version change' });
    }
    const policyVersion = ticket.policyVersion ?? completion.policyVersion ?? session.policy_version ?? null;
    return { completion, warnings, policyVersion };
  }

  function completionHandler(route: DialectRoute) {
    return async (c: Context<Env>) => {
      c.set('dialect', route.dialect);
      const startedAt = clock();
      const url = new URL(c.req.url);
      const session = resolveSession(c);
      const { body, text: bodyText } = await readJsonText(c);
      const fromUrl = route.fromUrl?.(url);
      const ir = decode(route, body, url, fromUrl);
      const completionId = newId('cmpl');
      /**
       * Commit the record. `clientGone` is read at commit time: a client that disconnected before this point is
       * flagged on the record (the completion is still kept: a captured completion is never dropped). A disconnect
       * after the commit cannot be flagged (records are immutable once stored); it is only counted.
       */
      const commit = (completion: EngineCompletion, warnings: Warning[], policyVersion: string | null, clientGone: boolean): IRResponse => {
        // The client-visible id is the record's id, so a reply can be traced to its record.
        const response = { ...completion.response, id: completionId };
        if (clientGone) {
          counters.clientDisconnects++;
          warnings = [...warnings, { code: 'client-disconnected', message: 'the client disconnected before the reply was sent: the harness never received this completion' }];
        }
        recorder.commit({
          completionId, sessionId: session.session_id, attempt: session.attempt, dialect: route.dialect.name, requestBody: body, requestText: bodyText, irRequest: ir,
          completion: { ...completion, response }, policyVersion, warnings, startedAt,
        });
        return response;
      };
      // A Gemini stream without alt=sse is one JSON array: synthetic, so it is the non-streaming call framed as an array.
      if (!ir.stream || fromUrl?.jsonArray) {
        const clientSignal = c.req.raw.signal;
        const { completion, warnings, policyVersion } = await sample(ir, session, completionId, options.abortOnClientDisconnect ? clientSignal : undefined);
        const response = commit(completion, warnings, policyVersion, clientSignal.aborted);
        const all = [...ir.warnings, ...completion.warnings, ...response.warnings, ...warnings];
        if (all.length > 0) c.header('x-polar-warnings', warningHeader(all));
        const encoded = route.dialect.encodeResponse(response, { ...codecCtx, request: ir });
        return c.json((ir.stream ? [encoded] : encoded) as object);
      }
      return streamResponse(route.dialect, ir, completionId, startedAt, (signal, client) =>
        sample(ir, session, completionId, signal).then(({ completion, warnings, policyVersion }) => commit(completion, warnings, policyVersion, client.gone)),
      );
    };
  }

  /**
   * Synthetic streaming: headers and the dialect's start event at once, keep-alives while the engine works, then the
   * response replayed as events (after the record is committed), or an in-band error event. `client.gone` turns true
   * when the client disconnects (the stream is cancelled, or a write fails); `run` reads it when it commits.
   */
  function streamResponse(
    dialect: Dialect,
    ir: IRRequest,
    completionId: string,
    createdAt: number,
    run: (signal: AbortSignal | undefined, client: { readonly gone: boolean }) => Promise<IRResponse>,
  ): Response {
    const encoder = dialect.createStreamEncoder({ ...codecCtx, request: ir });
    const bytes = new TextEncoder();
    const abort = new AbortController();
    const client = { gone: false };
    let committed = false;
    let open = true;
    let timer: ReturnType<typeof setInterval> | undefined;
    const clientLeft = () => {
      if (client.gone) return;
      client.gone = true;
      if (committed) counters.disconnectsAfterCommit++;
    };
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        const write = (frames: string) => {
          if (!open || frames === '') return;
          try {
            controller.enqueue(bytes.encode(frames));
          } catch {
            open = false; // the client went away; the engine call still completes and is recorded
            clientLeft();
          }
        };
        const finish = () => {
          clearInterval(timer);
          if (!open) return;
          open = false;
          try {
            controller.close();
          } catch {
            // already closed by a cancel
          }
        };
        write(encoder.push({ type: 'start', id: completionId, model: ir.model, createdAt, inputTokens: 0 }));
        timer = setInterval(() => write(encoder.push({ type: 'keep-alive' })), keepaliveMs);
        run(options.abortOnClientDisconnect ? abort.signal : undefined, client).then(
          (response) => {
            committed = true;
            clearInterval(timer);
            try {
              for (const event of responseToStreamEvents(response)) write(encoder.push(event));
              write(encoder.end());
            } catch (thrown) {
              write(encoder.push({ type: 'error', error: toGatewayError(thrown) }));
            }
            finish();
          },
          (thrown) => {
            clearInterval(timer);
            const error = toGatewayError(thrown);
            if (error.kind === 'internal') console.error('polar proxy: internal error during a stream', thrown);
            try {
              write(encoder.push({ type: 'error', error }));
              write(encoder.end());
            } catch {
              // an encoder that cannot render the error: close the stream, the client sees a truncated stream
            }
            finish();
          },
        );
      },
      cancel() {
        open = false;
        clientLeft();
        clearInterval(timer);
        if (options.abortOnClientDisconnect) abort.abort();
      },
    });
    const headers: Record<string, string> = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' };
    if (ir.warnings.length > 0) headers['x-polar-warnings'] = warningHeader(ir.warnings);
    return new Response(stream, { status: 200, headers });
  }

  function countTokensHandler(route: DialectRoute, spec: NonNullable<DialectRoute['countTokens']>) {
    return async (c: Context<Env>) => {
      c.set('dialect', route.dialect);
      const session = resolveSession(c);
      const raw = await readJson(c);
      const ir = decode(route, spec.prepareBody ? spec.prepareBody(raw) : raw, new URL(c.req.url));
      const count = await deps.engine.countTokens(ir, { sessionId: session.session_id, taskId: session.task_id, requestId: newId('count') });
      return c.json(spec.encode(count) as object);
    };
  }

  const models = (c: Context<Env>, encodeList?: (served: string) => unknown) => {
    let served: string;
    try {
      served = deps.engine.servedModel();
    } catch {
      throw new GatewayError('upstream', 'the engine has not been probed yet');
    }
    if (encodeList) return c.json(encodeList(served) as object);
    // https://docs.anthropic.com/en/api/models-list vs https://platform.openai.com/docs/api-reference/models/list
    if (c.req.header('anthropic-version')) {
      c.set('dialect', routes[0]!.dialect);
      return c.json({ data: [{ type: 'model', id: served, display_name: served, created_at: new Date(0).toISOString() }], has_more: false, first_id: served, last_id: served });
    }
    return c.json({ object: 'list', data: [{ id: served, object: 'model', created: 0, owned_by: 'polar' }] });
  };

  function dialectModels(prefix: string, route: DialectRoute, spec: NonNullable<DialectRoute['models']>) {
    for (const path of spec.list) {
      app.get(prefix + path, (c) => (c.set('dialect', route.dialect), models(c, spec.encodeList)));
      allow(['GET'], prefix + path);
    }
    for (const path of spec.one) {
      app.get(prefix + path, (c) => (c.set('dialect', route.dialect), c.json(spec.encodeOne(c.req.param('model') ?? '') as object)));
      allow(['GET'], prefix + path);
    }
  }

  for (const prefix of ['', '/s/:sid']) {
    for (const route of routes) {
      for (const path of route.paths) {
        app.post(prefix + path, completionHandler(route));
        allow(['POST'], prefix + path);
      }
      if (route.countTokens) {
        for (const path of route.countTokens.paths) {
          app.post(prefix + path, countTokensHandler(route, route.countTokens));
          allow(['POST'], prefix + path);
        }
      }
      if (route.models) dialectModels(prefix, route, route.models);
    }
    app.get(`${prefix}/v1/models`, (c) => models(c));
    allow(['GET'], `${prefix}/v1/models`);
    const root = prefix === '' ? '/' : prefix;
    app.on(['GET', 'HEAD'], root, (c) => (c.req.method === 'HEAD' ? c.body(null, 200) : c.json({ ok: true, service: 'polar-proxy', engine: deps.engine.id, ...(deps.engine.stats ? { engine_stats: deps.engine.stats() } : {}) })));
    allow(['GET'], root);
  }

  /** Refuse a control call per the rule of admin-access.ts (token when configured, else loopback-only admin). */
  const guardControl = (c: Context<Env>, endpoint: 'admin' | 'captures'): void => {
    const refusal = controlRefusal(endpoint, c.req.raw, options.adminToken, peerAddressOf(c.env));
    if (refusal) throw new GatewayError(refusal.kind, refusal.message);
  };

  allow(['GET'], '/sessions/:id/completions');
  app.get('/sessions/:id/completions', (c) => {
    guardControl(c, 'captures');
    const id = c.req.param('id');
    return c.json({ session_id: id, completions: deps.store.completions.listBySession(id) });
  });

  app.use('/admin/*', async (c, next) => {
    guardControl(c, 'admin');
    await next();
  });
  app.post('/admin/inference/pause', async (c) => {
    const { drained } = await gate.pause();
    return c.json({ paused: true, drained_in_flight: drained, policy_version: gate.policyVersion });
  });
  app.post('/admin/inference/resume', (c) => {
    gate.resume();
    return c.json({ paused: false, policy_version: gate.policyVersion });
  });
  app.post('/admin/policy_version', async (c) => {
    const body = (await readJson(c)) as { policy_version?: unknown } | null;
    const version = body?.policy_version;
    if (typeof version !== 'string' && typeof version !== 'number') throw new GatewayError('invalid-request', 'body must be {"policy_version": string | number}');
    gate.setPolicyVersion(String(version));
    return c.json({ policy_version: gate.policyVersion, paused: gate.isPaused });
  });
  for (const path of ['/admin/inference/pause', '/admin/inference/resume', '/admin/policy_version']) allow(['POST'], path);

  // Registered last, so they run only when no handler of the path's own methods matched.
  for (const [path, methods] of allowedMethods) {
    const allowHeader = [...methods].join(', ');
    app.all(path, (c) => {
      c.header('allow', allowHeader);
      return renderError(c, errorDialect(c), new GatewayError('invalid-request', `method ${c.req.method} is not allowed on ${c.req.path}; allowed: ${allowHeader}`, { status: 405 }));
    });
  }

  return app;
}

function renderError(c: Context<Env>, dialect: Dialect, error: GatewayError): Response {
  const { status, body } = dialect.encodeError(error);
  return c.json(body as object, status as ContentfulStatusCode);
}

/** Header value: warning codes, comma-separated (ASCII only; the full messages are on the record). */
function warningHeader(warnings: readonly Warning[]): string {
  return [...new Set(warnings.map((w) => w.code.replace(/[^\x20-\x7e]/g, '?')))].join(', ');
}
