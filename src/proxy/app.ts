/**
 * The proxy: the only hono app. A harness points its base URL here; each call is decoded from the caller's dialect
 * into the IR, sent to the engine in one non-streaming call with token capture, recorded, and answered in the
 * caller's dialect as JSON or as a synthetic SSE stream. Source: ARCHITECTURE.md §3; cross-module contract 4.
 *
 * Routes (each also under `/s/{session_id}`): `POST /v1/messages` (+ `?beta=true`), `POST /v1/messages/count_tokens`,
 * `POST /v1/chat/completions`, `GET /v1/models`, `HEAD|GET /`. Plus `GET /sessions/{id}/completions`,
 * `POST /admin/inference/pause`, `POST /admin/inference/resume`, `POST /admin/policy_version {policy_version}`.
 *
 * Claude Code retries a broken stream with the same body without `stream`; that retry is simply another call of the
 * same session and is recorded as such (the builders see the same prompt twice and chain it).
 */
import { Hono, type Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { systemClock } from '../core/clock.ts';
import type { CodecContext, Dialect } from '../core/dialect.ts';
import { GatewayError, toGatewayError } from '../core/errors.ts';
import { randomId } from '../core/ids.ts';
import type { IRRequest, IRResponse, Warning } from '../core/ir.ts';
import { responseToStreamEvents } from '../core/stream.ts';
import type { EngineCompletion } from '../engines/types.ts';
import { defaultDialectRoutes, fallbackDialect, type DialectRoute } from './dialect-table.ts';
import { InferenceGate } from './inference-gate.ts';
import { Recorder } from './recorder.ts';
import { sessionKeyOf } from './sessions.ts';
import { newProxyCounters, type ProxyDeps, type ProxySessionInfo } from './types.ts';

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

  app.onError((thrown, c) => {
    const error = toGatewayError(thrown);
    if (error.kind === 'internal') console.error('polar proxy: internal error', thrown);
    return renderError(c, c.get('dialect') ?? fallbackDialect, error);
  });
  app.notFound((c) => renderError(c, c.get('dialect') ?? fallbackDialect, new GatewayError('not-found', `no route for ${c.req.method} ${new URL(c.req.url).pathname}`)));

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

  function decode(route: DialectRoute, body: unknown, url: URL): IRRequest {
    const fromUrl = route.fromUrl?.(url);
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
      const ir = decode(route, body, url);
      const completionId = newId('cmpl');
      const commit = (completion: EngineCompletion, warnings: Warning[], policyVersion: string | null): IRResponse => {
        // The client-visible id is the record's id, so a reply can be traced to its record.
        const response = { ...completion.response, id: completionId };
        recorder.commit({
          completionId, sessionId: session.session_id, dialect: route.dialect.name, requestBody: body, requestText: bodyText, irRequest: ir,
          completion: { ...completion, response }, policyVersion, warnings, startedAt,
        });
        return response;
      };
      if (!ir.stream) {
        const signal = options.abortOnClientDisconnect ? c.req.raw.signal : undefined;
        const { completion, warnings, policyVersion } = await sample(ir, session, completionId, signal);
        const response = commit(completion, warnings, policyVersion);
        const all = [...ir.warnings, ...completion.warnings, ...response.warnings, ...warnings];
        if (all.length > 0) c.header('x-polar-warnings', warningHeader(all));
        return c.json(route.dialect.encodeResponse(response, { ...codecCtx, request: ir }) as object);
      }
      return streamResponse(route.dialect, ir, completionId, startedAt, (signal) =>
        sample(ir, session, completionId, signal).then(({ completion, warnings, policyVersion }) => commit(completion, warnings, policyVersion)),
      );
    };
  }

  /**
   * Synthetic streaming: headers and the dialect's start event at once, keep-alives while the engine works, then the
   * response replayed as events (after the record is committed), or an in-band error event.
   */
  function streamResponse(dialect: Dialect, ir: IRRequest, completionId: string, createdAt: number, run: (signal: AbortSignal | undefined) => Promise<IRResponse>): Response {
    const encoder = dialect.createStreamEncoder({ ...codecCtx, request: ir });
    const bytes = new TextEncoder();
    const abort = new AbortController();
    let open = true;
    let timer: ReturnType<typeof setInterval> | undefined;
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        const write = (frames: string) => {
          if (!open || frames === '') return;
          try {
            controller.enqueue(bytes.encode(frames));
          } catch {
            open = false; // the client went away; the engine call still completes and is recorded
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
        run(options.abortOnClientDisconnect ? abort.signal : undefined).then(
          (response) => {
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
    for (const path of spec.list) app.get(prefix + path, (c) => (c.set('dialect', route.dialect), models(c, spec.encodeList)));
    for (const path of spec.one) app.get(prefix + path, (c) => (c.set('dialect', route.dialect), c.json(spec.encodeOne(c.req.param('model') ?? '') as object)));
  }

  for (const prefix of ['', '/s/:sid']) {
    for (const route of routes) {
      for (const path of route.paths) app.post(prefix + path, completionHandler(route));
      if (route.countTokens) for (const path of route.countTokens.paths) app.post(prefix + path, countTokensHandler(route, route.countTokens));
      if (route.models) dialectModels(prefix, route, route.models);
    }
    app.get(`${prefix}/v1/models`, (c) => models(c));
    app.on(['GET', 'HEAD'], prefix === '' ? '/' : prefix, (c) => (c.req.method === 'HEAD' ? c.body(null, 200) : c.json({ ok: true, service: 'polar-proxy', engine: deps.engine.id, ...(deps.engine.stats ? { engine_stats: deps.engine.stats() } : {}) })));
  }

  app.get('/sessions/:id/completions', (c) => {
    const id = c.req.param('id');
    return c.json({ session_id: id, completions: deps.store.completions.listBySession(id) });
  });

  app.use('/admin/*', async (c, next) => {
    if (options.adminToken && c.req.header('authorization') !== `Bearer ${options.adminToken}`) {
      throw new GatewayError('authentication', 'admin endpoints need the admin token');
    }
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
