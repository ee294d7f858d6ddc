/**
 * Synthetic streaming: the dialect's start event, keep-alives while the engine works, then the response replayed as
 * events (after the record is committed), or an in-band error event. The status is held for up to one keep-alive
 * interval (see {@link holdStatus}): an engine call that fails within it is a real HTTP status in the caller's shape.
 */
import { type GatewayError, toGatewayError } from '../core/errors.ts';
import type { Dialect } from '../core/dialect.ts';
import type { IRRequest, IRResponse } from '../core/ir.ts';
import { type IRStreamEvent, responseToStreamEvents, type StreamEncoder } from '../core/stream.ts';
import { warningHeader, type ProxyRuntime } from './context.ts';

/** Default interval of keep-alive events while the engine works, ms. */
export const DEFAULT_KEEPALIVE_MS = 5000;

/**
 * Wait before a streamed response's status goes out: until `done` settles or `proceed` resolves (the engine answered),
 * or, with `graceMs`, until that many ms have passed, whichever comes first. An engine that fails in that time (a 429,
 * a context overflow, an unreachable engine: milliseconds) then gets a real HTTP status with its `Retry-After`, as the
 * provider's own API would answer and as the SDKs retry on; one that is still working after it (queued, paused for a
 * weight update) gets headers and keep-alives, so the client is never left without bytes for long.
 * @param done resolves with the call's error (null when it succeeded)
 * @returns the error to answer with as a status, or null to start streaming
 */
export async function holdStatus(
  done: Promise<GatewayError | null>,
  proceed: Promise<void> | null,
  graceMs: number | null,
  client: { signal: AbortSignal; gone: () => void },
): Promise<GatewayError | null> {
  let grace: ReturnType<typeof setTimeout> | undefined;
  const waits: Promise<GatewayError | null>[] = [done];
  if (proceed) waits.push(proceed.then(() => null));
  if (graceMs !== null) waits.push(new Promise((resolve) => (grace = setTimeout(() => resolve(null), graceMs))));
  // The Response is not returned yet, so its stream cannot be cancelled: the request's signal says the client left
  // (the record is then flagged client-disconnected; with abortOnClientDisconnect the engine call is aborted).
  if (client.signal.aborted) client.gone();
  else client.signal.addEventListener('abort', client.gone, { once: true });
  try {
    return await Promise.race(waits);
  } finally {
    clearTimeout(grace);
    client.signal.removeEventListener('abort', client.gone);
  }
}

/**
 * An SSE response whose body is written as `run` resolves. `client.gone` turns true when the client disconnects (the
 * stream is cancelled, or a write fails); `run` reads it when it commits. With `options.abortOnClientDisconnect` the
 * signal passed to `run` aborts on disconnect.
 * @throws GatewayError the call's error when it failed within one keep-alive interval (rendered as a real status)
 */
export async function syntheticStream(
  rt: ProxyRuntime,
  dialect: Dialect,
  ir: IRRequest,
  completionId: string,
  createdAt: number,
  clientSignal: AbortSignal,
  run: (signal: AbortSignal | undefined, client: { readonly gone: boolean }) => Promise<IRResponse>,
): Promise<Response> {
  const { options, counters } = rt;
  const encoder = dialect.createStreamEncoder({ ...rt.codecCtx, request: ir });
  const sink = new SseSink(() => {
    if (committed) counters.disconnectsAfterCommit++;
  });
  const abort = new AbortController();
  let committed = false;
  let timer: ReturnType<typeof setInterval> | undefined;
  const interval = options.keepaliveIntervalMs ?? DEFAULT_KEEPALIVE_MS;
  const clientGone = () => {
    sink.cancelled();
    clearInterval(timer);
    if (options.abortOnClientDisconnect) abort.abort();
  };
  const stream = new ReadableStream<Uint8Array>({ start: (controller) => sink.attach(controller), cancel: clientGone });
  sink.write(encoder.push({ type: 'start', id: completionId, model: ir.model, createdAt, inputTokens: 0 }));
  const done = run(options.abortOnClientDisconnect ? abort.signal : undefined, sink.client).then(
    (response) => {
      committed = true;
      clearInterval(timer);
      closeWith(sink, encoder, responseToStreamEvents(response));
      return null;
    },
    (thrown) => {
      clearInterval(timer);
      return streamFailure(thrown);
    },
  );
  const early = await holdStatus(done, null, interval, { signal: clientSignal, gone: clientGone });
  if (early) {
    sink.close();
    throw early;
  }
  if (!committed) timer = setInterval(() => sink.write(encoder.push({ type: 'keep-alive' })), interval);
  endInBand(rt, dialect.name, sink, encoder, done);
  return new Response(stream, { status: 200, headers: sseHeaders(ir) });
}

/** The last events of a committed answer, then the encoder's end (or its error event when encoding fails), then close. */
export function closeWith(sink: SseSink, encoder: StreamEncoder, events: Iterable<IRStreamEvent>): void {
  try {
    for (const event of events) sink.write(encoder.push(event));
    sink.write(encoder.end());
  } catch (thrown) {
    sink.write(encoder.push({ type: 'error', error: toGatewayError(thrown) }));
  }
  sink.close();
}

/** A stream's failed engine call as the GatewayError to answer with (an internal one is logged with its stack). */
export function streamFailure(thrown: unknown): GatewayError {
  const error = toGatewayError(thrown);
  if (error.kind === 'internal') console.error('polar proxy: internal error during a stream', thrown);
  return error;
}

/**
 * Once a stream's 200 went out: a call that then fails ends the stream with the dialect's in-band error event
 * (after `beforeError`, e.g. the start event it still owes), counted in `polar_proxy_stream_errors_total`.
 */
export function endInBand(rt: ProxyRuntime, dialect: string, sink: SseSink, encoder: StreamEncoder, done: Promise<GatewayError | null>, beforeError: () => void = () => {}): void {
  void done.then((error) => {
    if (!error) return;
    rt.metrics.observeStreamError(dialect, error.kind);
    try {
      beforeError();
      sink.write(encoder.push({ type: 'error', error }));
      sink.write(encoder.end());
    } catch {
      // an encoder that cannot render the error: close the stream, the client sees a truncated stream
    }
    sink.close();
  });
}

/** SSE response headers (+ the decode warnings of the request). */
export function sseHeaders(ir: IRRequest): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' };
  if (ir.warnings.length > 0) headers['x-polar-warnings'] = warningHeader(ir.warnings);
  return headers;
}

/**
 * The writing end of a streamed response body: writes that fail (the client left) close it and flag `client.gone`;
 * the engine call goes on and is recorded either way.
 */
export class SseSink {
  readonly client = { gone: false };
  private controller: ReadableStreamDefaultController<Uint8Array> | null = null;
  private open = true;
  private readonly bytes = new TextEncoder();

  /** @param onGone called once when the client goes away */
  constructor(private readonly onGone: () => void = () => {}) {}

  attach(controller: ReadableStreamDefaultController<Uint8Array>): void {
    this.controller = controller;
  }

  get isOpen(): boolean {
    return this.open;
  }

  write(frames: string): void {
    if (!this.open || frames === '' || !this.controller) return;
    try {
      this.controller.enqueue(this.bytes.encode(frames));
    } catch {
      this.open = false;
      this.gone();
    }
  }

  close(): void {
    if (!this.open) return;
    this.open = false;
    try {
      this.controller?.close();
    } catch {
      // already closed by a cancel
    }
  }

  /** The ReadableStream's `cancel`: the client disconnected. */
  cancelled(): void {
    this.open = false;
    this.gone();
  }

  private gone(): void {
    if (this.client.gone) return;
    this.client.gone = true;
    this.onGone();
  }
}
