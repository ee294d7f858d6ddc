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
 * @throws GatewayError 'upstream' when the body breaks off mid-stream (connection reset).
 */
export async function* sseData(body: ReadableStream<Uint8Array>, what: string): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  const reader = body.getReader();
  try {
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (thrown) {
        throw new GatewayError('upstream', `${what}: the stream broke off: ${thrown instanceof Error ? thrown.message : String(thrown)}`, { cause: thrown });
      }
      if (chunk.done) buffer += decoder.decode();
      else buffer += decoder.decode(chunk.value, { stream: true });
      buffer = buffer.replace(/\r\n?/g, '\n');
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const data = dataOf(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (data === null) continue;
        if (data === '[DONE]') return;
        yield data;
      }
      if (chunk.done) {
        const data = dataOf(buffer);
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
