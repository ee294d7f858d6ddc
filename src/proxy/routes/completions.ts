/**
 * The completion and token-count routes: decode the caller's dialect into the IR, one engine call between the gate's
 * enter/leave, commit the record, answer as JSON or a stream in the caller's dialect: a true stream (live-stream.ts)
 * when the engine streams (`engine.stream`), else the non-streaming call replayed as events (synthetic-stream.ts).
 *
 * Claude Code retries a broken stream with the same body without `stream`; that retry is simply another call of the
 * same session and is recorded as such (the builders see the same prompt twice and chain it).
 */
import type { Context } from 'hono';
import { toGatewayError } from '../../core/errors.ts';
import type { IRRequest, IRResponse, Warning } from '../../core/ir.ts';
import type { EngineCompletion, EngineStreamEvent } from '../../engines/types.ts';
import { decodeBody, readJsonText, resolveSession, warningHeader, type Env, type ProxyRuntime } from '../context.ts';
import type { DialectRoute } from '../dialect-table.ts';
import { liveStream } from '../live-stream.ts';
import { syntheticStream } from '../synthetic-stream.ts';
import { withTaskSampling } from '../task-sampling.ts';
import type { ProxySessionInfo } from '../types.ts';

/**
 * One engine call between gate enter/leave (streamed when `onEvent` is given); returns the completion and the proxy's
 * own warnings.
 */
async function sample(rt: ProxyRuntime, ir: IRRequest, session: ProxySessionInfo, completionId: string, signal: AbortSignal | undefined, onEvent?: (event: EngineStreamEvent) => void) {
  const ticket = await rt.gate.enter();
  let completion: EngineCompletion;
  const busy = rt.metrics.engineCallStarted();
  try {
    const ctx = { sessionId: session.session_id, taskId: session.task_id, requestId: completionId, signal };
    completion = onEvent ? await rt.deps.engine.stream!(ir, ctx, onEvent) : await rt.deps.engine.complete(ir, ctx);
  } catch (thrown) {
    busy();
    rt.gate.leave(ticket);
    rt.counters.engineErrors++;
    throw toGatewayError(thrown);
  }
  busy();
  const warnings: Warning[] = [];
  if (rt.gate.leave(ticket).straddled) {
    rt.counters.straddled++;
    warnings.push({ code: 'straddled-policy-change', message: 'sampling was in flight across an inference pause or a policy version change' });
  }
  const policyVersion = ticket.policyVersion ?? completion.policyVersion ?? session.policy_version ?? null;
  return { completion, warnings, policyVersion };
}

/** `POST` handler of a dialect's completion endpoint. */
export function completionHandler(rt: ProxyRuntime, route: DialectRoute) {
  return async (c: Context<Env>) => {
    c.set('dialect', route.dialect);
    const startedAt = rt.clock();
    const url = new URL(c.req.url);
    const session = resolveSession(rt, c);
    const { body, text: bodyText, bytes: bodyBytes, invalidUtf8 } = await readJsonText(rt, c, session.session_id);
    const fromUrl = route.fromUrl?.(url);
    let ir = decodeBody(rt, route, body, url, fromUrl);
    if (session.sampling) ir = withTaskSampling(ir, session.sampling);
    if (invalidUtf8) ir.warnings.push({ code: 'invalid-utf8-replaced', message: 'the request body was not valid UTF-8: each invalid byte sequence was decoded as U+FFFD before reaching the engine' });
    if (rt.reasoning) {
      const { request, restored } = rt.reasoning.restore(session.session_id, ir);
      if (restored > 0) {
        ir = { ...request, warnings: [...ir.warnings, { code: 'reasoning-restored', message: `${restored} assistant turn(s) came back without their reasoning; it was restored from this session's own answers before the engine rendered the history` }] };
      }
    }
    const completionId = rt.newId('cmpl');
    /** What the reply's encoder gets: the decoded request and the body it came from (for settings a reply echoes). */
    const codec = { ...rt.codecCtx, request: ir, requestBody: body };
    /**
     * Commit the record. `clientGone` is read at commit time: a client that disconnected before this point is
     * flagged on the record (the completion is still kept: a captured completion is never dropped). A disconnect
     * after the commit cannot be flagged (records are immutable once stored); it is only counted.
     */
    const commit = async (completion: EngineCompletion, warnings: Warning[], policyVersion: string | null, clientGone: boolean): Promise<IRResponse> => {
      // The client-visible id is the record's id, so a reply can be traced to its record.
      const response = { ...completion.response, id: completionId };
      rt.reasoning?.remember(session.session_id, response);
      if (clientGone) {
        rt.counters.clientDisconnects++;
        warnings = [...warnings, { code: 'client-disconnected', message: 'the client disconnected before the reply was sent: the harness never received this completion' }];
      }
      await rt.recorder.commit({
        completionId, sessionId: session.session_id, attempt: session.attempt, dialect: route.dialect.name, requestBody: body, requestText: bodyText, requestBytes: bodyBytes, irRequest: ir,
        completion: { ...completion, response }, policyVersion, warnings, startedAt,
      });
      return response;
    };
    // A Gemini stream without alt=sse is one JSON array: synthetic, so it is the non-streaming call framed as an array.
    if (!ir.stream || fromUrl?.jsonArray) {
      const clientSignal = c.req.raw.signal;
      const { completion, warnings, policyVersion } = await sample(rt, ir, session, completionId, rt.options.abortOnClientDisconnect ? clientSignal : undefined);
      const response = await commit(completion, warnings, policyVersion, clientSignal.aborted);
      const all = [...ir.warnings, ...completion.warnings, ...response.warnings, ...warnings];
      if (all.length > 0) c.header('x-polar-warnings', warningHeader(all));
      const encoded = route.dialect.encodeResponse(response, codec);
      return c.json((ir.stream ? [encoded] : encoded) as object);
    }
    // streams() is decided by the engine's probe: make sure it ran (a failure surfaces again in the call itself).
    if (rt.deps.engine.stream) await rt.deps.engine.probe().catch(() => {});
    if (rt.deps.engine.stream && rt.deps.engine.streams?.()) {
      return liveStream(rt, route, ir, codec, completionId, startedAt, c.req.raw.signal, (signal, onEvent, client) =>
        sample(rt, ir, session, completionId, signal, onEvent).then(({ completion, warnings, policyVersion }) => commit(completion, warnings, policyVersion, client.gone)),
      );
    }
    return syntheticStream(rt, route.dialect, ir, codec, completionId, startedAt, c.req.raw.signal, (signal, client) =>
      sample(rt, ir, session, completionId, signal).then(({ completion, warnings, policyVersion }) => commit(completion, warnings, policyVersion, client.gone)),
    );
  };
}

/** `POST` handler of a dialect's token-count endpoint. */
export function countTokensHandler(rt: ProxyRuntime, route: DialectRoute, spec: NonNullable<DialectRoute['countTokens']>) {
  return async (c: Context<Env>) => {
    c.set('dialect', route.dialect);
    const session = resolveSession(rt, c);
    const { body: raw } = await readJsonText(rt, c);
    const ir = decodeBody(rt, route, spec.prepareBody ? spec.prepareBody(raw) : raw, new URL(c.req.url));
    const count = await rt.deps.engine.countTokens(ir, { sessionId: session.session_id, taskId: session.task_id, requestId: rt.newId('count') });
    return c.json(spec.encode(count) as object);
  };
}
