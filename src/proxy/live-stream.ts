/**
 * True streaming: the engine's deltas are encoded in the caller's dialect as they arrive, and the record is committed
 * (assembled from the chunks and cross-checked by the engine client) before the final event goes out.
 *
 * Per dialect (DialectRoute):
 * - `statusBeforeBytes` (OpenAI Chat, Gemini): nothing is sent, not even the status, until the engine has answered
 *   (its 2xx status, or an error), so a 429, a context overflow or a 500 reaches the client as a real HTTP status in its
 *   dialect's shape (the CLIs back off on a 429 status but give up on an in-band error chunk). The engine's
 *   `Retry-After` is forwarded (context.ts renderError).
 * - otherwise (Anthropic, Responses) the status is held for up to one keep-alive interval (`keepaliveIntervalMs`):
 *   an engine that fails within it (a 429, a context overflow, an unreachable engine: milliseconds) gives a real HTTP
 *   status as the provider's API would, so the SDKs' retry on 429/5xx and `Retry-After` apply; an engine still working
 *   after it (queued, paused for a weight update) gets headers and keep-alives, so the client is not left without
 *   bytes. With `startOnPrompt` (Anthropic) the start event waits for the prompt length, so
 *   `message_start.usage.input_tokens` is the real count, and pings are sent until then.
 * An error after the first byte is the dialect's in-band error event.
 */
import type { IRRequest, IRResponse } from '../core/ir.ts';
import type { EngineStreamEvent } from '../engines/types.ts';
import type { ProxyRuntime } from './context.ts';
import type { DialectRoute } from './dialect-table.ts';
import { closeWith, DEFAULT_KEEPALIVE_MS, endInBand, holdStatus, SseSink, sseHeaders, streamFailure } from './synthetic-stream.ts';

/** Runs the engine call: events go to `onEvent`; resolves with the committed response. */
export type LiveRun = (signal: AbortSignal | undefined, onEvent: (event: EngineStreamEvent) => void, client: { readonly gone: boolean }) => Promise<IRResponse>;

/**
 * The streamed response for one call; resolves once the engine has answered (Chat, Gemini), or then or after one
 * keep-alive interval, whichever comes first (Anthropic, Responses), and throws the engine's error when it failed
 * before that (rendered as a real status by the app).
 * One function (~90 lines) because the start / keep-alive / answered / commit state is shared by its closures.
 */
export async function liveStream(rt: ProxyRuntime, route: DialectRoute, ir: IRRequest, completionId: string, createdAt: number, clientSignal: AbortSignal, run: LiveRun): Promise<Response> {
  const { options, counters } = rt;
  const encoder = route.dialect.createStreamEncoder({ ...rt.codecCtx, request: ir });
  let committed = false;
  const sink = new SseSink(() => {
    if (committed) counters.disconnectsAfterCommit++;
  });
  const abort = new AbortController();
  let startSent = false;
  let timer: ReturnType<typeof setInterval> | undefined;
  let answered!: () => void;
  const answeredOnce = new Promise<void>((resolve) => (answered = resolve));
  const start = (inputTokens: number) => {
    if (startSent) return;
    startSent = true;
    sink.write(encoder.push({ type: 'start', id: completionId, model: ir.model, createdAt, inputTokens }));
  };
  const clientGone = () => {
    sink.cancelled();
    clearInterval(timer);
    if (options.abortOnClientDisconnect) abort.abort();
  };
  const stream = new ReadableStream<Uint8Array>({ start: (controller) => sink.attach(controller), cancel: clientGone });
  if (!route.startOnPrompt) start(0);
  const beginKeepAlive = () => {
    timer ??= setInterval(() => sink.write(encoder.push({ type: 'keep-alive' })), options.keepaliveIntervalMs ?? DEFAULT_KEEPALIVE_MS);
  };
  const onEvent = (event: EngineStreamEvent) => {
    if (event.type === 'answered') {
      answered();
      beginKeepAlive();
      return;
    }
    if (event.type === 'prompt') {
      start(event.inputTokens);
      return;
    }
    start(0);
    sink.write(encoder.push(event));
  };
  const done = run(options.abortOnClientDisconnect ? abort.signal : undefined, onEvent, sink.client).then(
    (response) => {
      committed = true;
      clearInterval(timer);
      answered();
      start(response.usage.inputTokens);
      closeWith(sink, encoder, [{ type: 'finish', finishReason: response.finishReason, usage: response.usage, response }]);
      return null;
    },
    (thrown) => {
      clearInterval(timer);
      return streamFailure(thrown);
    },
  );
  // Whichever comes first: the engine answered (stream from here), or the call failed before it did (real status), or
  // (Anthropic, Responses) one keep-alive interval passed (headers and keep-alives from here).
  const early = await holdStatus(done, answeredOnce, route.statusBeforeBytes ? null : options.keepaliveIntervalMs ?? DEFAULT_KEEPALIVE_MS, { signal: clientSignal, gone: clientGone });
  if (early) {
    sink.close();
    throw early;
  }
  if (!route.statusBeforeBytes && !committed) beginKeepAlive();
  endInBand(rt, route.dialect.name, sink, encoder, done, () => start(0));
  return new Response(stream, { status: 200, headers: sseHeaders(ir) });
}
