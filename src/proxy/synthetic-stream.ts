/**
 * Synthetic streaming: the dialect's start event, keep-alives while the engine works, then the response replayed as
 * events (after the record is committed), or an in-band error event. The status is held for up to one keep-alive
 * interval (see {@link holdStatus}): an engine call that fails within it is a real HTTP status in the caller's shape.
 */
import { type GatewayError, toGatewayError } from '../core/errors.ts';
import type { CodecContext, Dialect } from '../core/dialect.ts';
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
 * What both stream paths (this one and live-stream.ts) share: the SSE body and its writer, keep-alives, the client's
 * disconnect (the body's cancel, or the request's signal while the status is held: the record is then flagged
 * client-disconnected, and with `abortOnClientDisconnect` the engine call is aborted), the commit of the answer and
 * the in-band error after the 200.
 */
export class ProxyStream {
  readonly sink: SseSink;
  readonly body: ReadableStream<Uint8Array>;
  /** The signal for the engine call: it aborts when the client leaves, with `abortOnClientDisconnect`; else none. */
  readonly engineSignal: AbortSignal | undefined;
  readonly #abort = new AbortController();
  readonly #intervalMs: number;
  #committed = false;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly rt: ProxyRuntime,
    private readonly encoder: StreamEncoder,
    private readonly dialect: string,
  ) {
    this.sink = new SseSink(() => {
      if (this.#committed) rt.counters.disconnectsAfterCommit++;
    });
    this.body = new ReadableStream<Uint8Array>({ start: (controller) => this.sink.attach(controller), cancel: this.clientGone });
    this.engineSignal = rt.options.abortOnClientDisconnect ? this.#abort.signal : undefined;
    this.#intervalMs = rt.options.keepaliveIntervalMs ?? DEFAULT_KEEPALIVE_MS;
  }

  /** Keep-alive interval (and the longest status hold of a stream that waits for no engine answer), ms. */
  get intervalMs(): number {
    return this.#intervalMs;
  }

  write(event: IRStreamEvent): void {
    this.sink.write(this.encoder.push(event));
  }

  /** Start the keep-alives (once). */
  keepAlive(): void {
    this.#timer ??= setInterval(() => this.write({ type: 'keep-alive' }), this.#intervalMs);
  }

  readonly clientGone = (): void => {
    this.sink.cancelled();
    clearInterval(this.#timer);
    if (this.rt.options.abortOnClientDisconnect) this.#abort.abort();
  };

  /**
   * The engine call's outcome: on success the answer is committed, `closing(response)`'s events, then the encoder's
   * end (or its error event when encoding fails) are written and the body closes (null); on failure its GatewayError
   * (an internal one is logged with its stack).
   */
  settle(call: Promise<IRResponse>, closing: (response: IRResponse) => Iterable<IRStreamEvent>): Promise<GatewayError | null> {
    return call.then(
      (response) => {
        this.#committed = true;
        clearInterval(this.#timer);
        try {
          for (const event of closing(response)) this.write(event);
          this.sink.write(this.encoder.end());
        } catch (thrown) {
          this.write({ type: 'error', error: toGatewayError(thrown) });
        }
        this.sink.close();
        return null;
      },
      (thrown) => {
        clearInterval(this.#timer);
        const error = toGatewayError(thrown);
        if (error.kind === 'internal') console.error('polar proxy: internal error during a stream', thrown);
        return error;
      },
    );
  }

  /**
   * The response once the status may go out ({@link holdStatus}); throws the call's error when it failed before that.
   * After the 200, keep-alives run until the answer is committed, and a failure ends the stream with the dialect's
   * in-band error event (after `beforeError`, e.g. the start event it still owes), counted in
   * `polar_proxy_stream_errors_total`.
   */
  async respond(ir: IRRequest, done: Promise<GatewayError | null>, proceed: Promise<void> | null, graceMs: number | null, clientSignal: AbortSignal, beforeError: () => void = () => {}): Promise<Response> {
    const early = await holdStatus(done, proceed, graceMs, { signal: clientSignal, gone: this.clientGone });
    if (early) {
      this.sink.close();
      throw early;
    }
    if (!this.#committed) this.keepAlive();
    void done.then((error) => {
      if (!error) return;
      this.rt.metrics.observeStreamError(this.dialect, error.kind);
      try {
        beforeError();
        this.write({ type: 'error', error });
        this.sink.write(this.encoder.end());
      } catch {
        // an encoder that cannot render the error: close the stream, the client sees a truncated stream
      }
      this.sink.close();
    });
    return new Response(this.body, { status: 200, headers: sseHeaders(ir) });
  }
}

/**
 * An SSE response whose body is written as `run` resolves. `client.gone` turns true when the client disconnects (the
 * stream is cancelled, a write fails, or the request's signal aborts while the status is held); `run` reads it when it
 * commits. With `options.abortOnClientDisconnect` the signal passed to `run` aborts on disconnect. `codec` is the
 * stream encoder's context (with the request and its body).
 * @throws GatewayError the call's error when it failed within one keep-alive interval (rendered as a real status)
 */
export async function syntheticStream(
  rt: ProxyRuntime,
  dialect: Dialect,
  ir: IRRequest,
  codec: CodecContext,
  completionId: string,
  createdAt: number,
  clientSignal: AbortSignal,
  run: (signal: AbortSignal | undefined, client: { readonly gone: boolean }) => Promise<IRResponse>,
): Promise<Response> {
  const stream = new ProxyStream(rt, dialect.createStreamEncoder(codec), dialect.name);
  stream.write({ type: 'start', id: completionId, model: ir.model, createdAt, inputTokens: 0 });
  const done = stream.settle(run(stream.engineSignal, stream.sink.client), responseToStreamEvents);
  return stream.respond(ir, done, null, stream.intervalMs, clientSignal);
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
