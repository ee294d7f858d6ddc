/**
 * In-process event hub with a Server-Sent Events view (`GET /events` of the rollout server). Subscribers that cannot
 * keep up are dropped rather than buffered without bound. SSE format: https://html.spec.whatwg.org/multipage/server-sent-events.html
 */

/** One published event: a type (the SSE `event:` field) and a JSON payload. */
export interface HubEvent {
  /** Monotonic per hub, starting at 1 (the SSE `id:` field). */
  id: number;
  type: string;
  data: unknown;
  /** Unix ms. */
  at: number;
}

type Listener = (event: HubEvent) => void;

export class EventHub {
  #next = 1;
  #listeners = new Set<Listener>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** Publish to every current subscriber; never throws (a failing listener is removed). */
  publish(type: string, data: unknown): HubEvent {
    const event: HubEvent = { id: this.#next++, type, data, at: this.#now() };
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch {
        this.#listeners.delete(listener);
      }
    }
    return event;
  }

  /** Subscribe; returns the unsubscribe function. */
  subscribe(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  get subscriberCount(): number {
    return this.#listeners.size;
  }

  /**
   * An SSE response that streams every event published from now on, with a comment line every `keepAliveMs` (default
   * 15 000) so proxies keep the connection. Ends when the client disconnects (`signal`).
   */
  sseResponse(signal?: AbortSignal, keepAliveMs = 15_000): Response {
    const encoder = new TextEncoder();
    let unsubscribe = () => {};
    let timer: ReturnType<typeof setInterval> | undefined;
    const close = () => {
      unsubscribe();
      if (timer) clearInterval(timer);
    };
    const stream = new ReadableStream<Uint8Array>({
      start: (controller) => {
        const send = (text: string) => {
          // A slow reader past ~1 MiB of backlog is dropped instead of growing memory without bound.
          if ((controller.desiredSize ?? 0) < -(1 << 20)) throw new Error('sse subscriber too slow');
          controller.enqueue(encoder.encode(text));
        };
        send(': connected\n\n');
        unsubscribe = this.subscribe((event) => send(`id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event.data)}\n\n`));
        timer = setInterval(() => {
          try {
            send(': keep-alive\n\n');
          } catch {
            close();
          }
        }, keepAliveMs);
        signal?.addEventListener('abort', () => {
          close();
          try {
            controller.close();
          } catch {}
        });
      },
      cancel: close,
    });
    return new Response(stream, { headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' } });
  }
}
