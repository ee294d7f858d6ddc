/**
 * Reading an engine's streamed answer: the `data:` payloads of a `text/event-stream` body, one at a time, as they
 * arrive. Engines (vLLM, SGLang, llama.cpp, the simulator) send data-only events, one JSON object each, ending with
 * `data: [DONE]` (OpenAI-style) or a last object with `stop: true` (llama.cpp). Written here rather than taken from a
 * library because that subset is a dozen lines: split on blank lines, join `data:` lines, skip comments.
 * Format: https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation
 */
import { GatewayError } from '../core/errors.ts';

/**
 * The `data` of each event of an SSE body, in order; stops at `[DONE]` or the end of the body.
 * Linear in the body's size: an engine's first chunk can be ~600 KB (vLLM echoes 100k prompt ids in it) and arrives
 * over many reads, so each read is normalised and searched on its own, and an event's pieces are joined once
 * (appending to one growing string and searching it from the start cost O(n²) in a long event).
 * @throws GatewayError 'upstream' when the body breaks off mid-stream (connection reset).
 */
export async function* sseData(body: ReadableStream<Uint8Array>, what: string): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  /** The current event's text so far (line ends normalised to \n), which holds no blank line yet. */
  let pending: string[] = [];
  /** Whether `pending` ends with \n (a blank line may begin there). */
  let pendingEndsLine = false;
  /** Whether the last read ended with \r (already made \n): a \n that opens the next read belongs to it. */
  let endedWithCr = false;
  try {
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (thrown) {
        throw new GatewayError('upstream', `${what}: the stream broke off: ${thrown instanceof Error ? thrown.message : String(thrown)}`, { cause: thrown });
      }
      let text = chunk.done ? decoder.decode() : decoder.decode(chunk.value, { stream: true });
      if (endedWithCr && text.startsWith('\n')) text = text.slice(1);
      if (text.length > 0) endedWithCr = text.endsWith('\r');
      if (text.includes('\r')) text = text.replace(/\r\n?/g, '\n');
      let from = 0;
      for (;;) {
        let event: string;
        if (from === 0 && pendingEndsLine && text.startsWith('\n')) {
          // The blank line straddles two reads: the event is what was pending, less its last \n.
          const joined = pending.join('');
          event = joined.slice(0, -1);
          from = 1;
        } else {
          const end = text.indexOf('\n\n', from);
          if (end < 0) break;
          event = pending.length === 0 ? text.slice(from, end) : pending.join('') + text.slice(from, end);
          from = end + 2;
        }
        pending = [];
        pendingEndsLine = false;
        const data = dataOf(event);
        if (data === null) continue;
        if (data === '[DONE]') return;
        yield data;
      }
      if (from < text.length) {
        pending.push(from === 0 ? text : text.slice(from));
        pendingEndsLine = text.endsWith('\n');
      }
      if (chunk.done) {
        const data = dataOf(pending.join(''));
        if (data !== null && data !== '[DONE]') yield data;
        return;
      }
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => {});
  }
}

function dataOf(event: string): string | null {
  const lines: string[] = [];
  for (const line of event.split('\n')) {
    if (line.startsWith('data:')) lines.push(line.slice(line.startsWith('data: ') ? 6 : 5));
  }
  return lines.length > 0 ? lines.join('\n') : null;
}
