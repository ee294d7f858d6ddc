/**
 * A generation streamed as the engine decodes it: the prefill already happened in `run` (holdSlot) and the sequence is
 * in the decode batch (timing.ts); each write waits until its tokens are decoded, several tokens per write when a step
 * is shorter than the timer resolution (~4 ms). The engine frees the slot when decode ends; a client cancel frees it
 * early.
 */
import type { Started } from './server.ts';
import type { TimingModel } from './timing.ts';

export interface TokenFrames {
  /** Written at once (e.g. a first chunk with the prompt ids). */
  head?: string;
  /** Frames for tokens [from, to). */
  tokens(from: number, to: number): string;
  /** Frames after the last token (finish chunk, usage, `[DONE]`). */
  tail(): string;
}

export function pacedTokenStream(timing: TimingModel, started: Started, frames: TokenFrames): Response {
  const { gen, release, sequence } = started;
  const encoder = new TextEncoder();
  let index = 0;
  let released = false;
  const free = () => {
    if (!released) release();
    released = true;
  };
  const stream = new ReadableStream<Uint8Array>({
    start: (controller) => {
      if (frames.head) controller.enqueue(encoder.encode(frames.head));
    },
    pull: async (controller) => {
      try {
        if (index < gen.ids.length) {
          const stepMs = timing.stepMs(Math.max(1, timing.snapshot().decoding));
          const batch = stepMs > 0 ? Math.max(1, Math.floor(4 / stepMs)) : gen.ids.length;
          const end = Math.min(gen.ids.length, index + batch);
          await sequence.until(end);
          const out = frames.tokens(index, end);
          index = end;
          if (out !== '') controller.enqueue(encoder.encode(out));
          return;
        }
        controller.enqueue(encoder.encode(frames.tail()));
        controller.close();
        free();
      } catch (error) {
        free();
        controller.error(error);
      }
    },
    cancel: free,
  });
  return new Response(stream, { headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' } });
}

/** One SSE data frame. */
export const dataFrame = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;
