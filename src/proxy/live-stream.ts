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
import type { CodecContext } from '../core/dialect.ts';
import type { IRRequest, IRResponse } from '../core/ir.ts';
import type { EngineStreamEvent } from '../engines/types.ts';
import type { ProxyRuntime } from './context.ts';
import type { DialectRoute } from './dialect-table.ts';
import { ProxyStream } from './synthetic-stream.ts';

/** Runs the engine call: events go to `onEvent`; resolves with the committed response. */
export type LiveRun = (signal: AbortSignal | undefined, onEvent: (event: EngineStreamEvent) => void, client: { readonly gone: boolean }) => Promise<IRResponse>;

/**
 * The streamed response for one call; resolves once the engine has answered (Chat, Gemini), or then or after one
 * keep-alive interval, whichever comes first (Anthropic, Responses), and throws the engine's error when it failed
 * before that (rendered as a real status by the app). The body, keep-alives, disconnects and the commit are
 * ProxyStream's (synthetic-stream.ts); here only the start event (which may wait for the prompt length) and the
 * engine's `answered` signal. `codec` is the stream encoder's context (with the request and its body).
 */
export async function liveStream(rt: ProxyRuntime, route: DialectRoute, ir: IRRequest, codec: CodecContext, completionId: string, createdAt: number, clientSignal: AbortSignal, run: LiveRun): Promise<Response> {
  const stream = new ProxyStream(rt, route.dialect.createStreamEncoder(codec), route.dialect.name);
  let startSent = false;
  let answered!: () => void;
  const answeredOnce = new Promise<void>((resolve) => (answered = resolve));
  const start = (inputTokens: number) => {
    if (startSent) return;
    startSent = true;
    stream.write({ type: 'start', id: completionId, model: ir.model, createdAt, inputTokens });
  };
  if (!route.startOnPrompt) start(0);
  const onEvent = (event: EngineStreamEvent) => {
    if (event.type === 'answered') {
      answered();
      stream.keepAlive();
      return;
    }
    if (event.type === 'prompt') {
      start(event.inputTokens);
      return;
    }
    start(0);
    stream.write(event);
  };
  const done = stream.settle(run(stream.engineSignal, onEvent, stream.sink.client), (response) => {
    answered();
    start(response.usage.inputTokens);
    return [{ type: 'finish', finishReason: response.finishReason, usage: response.usage, response }];
  });
  // Whichever comes first: the engine answered (stream from here), or the call failed before it did (real status), or
  // (Anthropic, Responses) one keep-alive interval passed (headers and keep-alives from here).
  return stream.respond(ir, done, answeredOnce, route.statusBeforeBytes ? null : stream.intervalMs, clientSignal, () => start(0));
}
