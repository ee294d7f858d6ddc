/**
 * Reading an engine's streamed answer: the `data:` payloads of a `text/event-stream` body, one at a time, as they
 * arrive. Engines (vLLM, SGLang, llama.cpp, the simulator) send data-only events, one JSON object each, ending with
 * `data: [DONE]` (OpenAI-style) or a last object with `stop: true` (llama.cpp). Written here rather than taken from a
 * library because that subset is a dozen lines: split on blank lines, join `data:` lines, skip comments.
 * Format: https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation
 */
import { asBuffer, concatBytes } from '../core/bytes.ts';
import { GatewayError } from '../core/errors.ts';
import { MIN_ANSWER_MEMO_BYTES } from './answer-json.ts';

/**
 * The error message for an engine stream whose body ended (or gave `[DONE]`) before any chunk said the answer was
 * finished: the answer is cut short, and the completion is not recorded as if it were whole.
 */
export function brokeOff(what: string): string {
  return `${what}: the stream ended before the answer finished (no finish_reason)`;
}

/**
 * The `data` of each event of an SSE body as UTF-8 bytes, in order; stops at `[DONE]` or the end of the body.
 * Linear in the body's size and never decoded here: an engine's first chunk can be ~600 KB (vLLM echoes 100k prompt
 * ids in it) and arrives over many reads, so each read is normalised and searched on its own (natively), an event's
 * pieces are joined once, and a one-line event in one read is a view of it. The caller parses the bytes (the
 * whole-answer readers of answer-json.ts take them as they are). Decoding every read to a string, splitting it
 * into lines and encoding the prompt-id chunk back to bytes cost 175–390 µs per streamed answer with 25k prompt ids
 * against 87–104 µs now, 400–560 against ~270 with 100k (in-process, bench/README.md#session-9).
 * @throws GatewayError 'upstream' when the body breaks off mid-stream (connection reset).
 */
export async function* sseData(body: ReadableStream<Uint8Array>, what: string): AsyncGenerator<Uint8Array> {
  const reader = body.getReader();
  /** The current event's bytes so far (line ends normalised to \n), which hold no blank line yet. */
  let pending: Uint8Array[] = [];
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
      if (chunk.done) {
        const data = dataOf(asBuffer(concatBytes(pending)));
        if (data !== null && !isDone(data)) yield data;
        return;
      }
      let bytes = asBuffer(chunk.value);
      if (endedWithCr && bytes.byteLength > 0) {
        // The \r was made \n already: a \n right after it completes that line end, whichever read it comes in.
        if (bytes[0] === LF) bytes = bytes.subarray(1);
        endedWithCr = false;
      }
      if (bytes.byteLength > 0) endedWithCr = bytes[bytes.byteLength - 1] === CR;
      if (bytes.indexOf(CR) >= 0) bytes = withoutCr(bytes);
      let from = 0;
      for (;;) {
        let event: Buffer;
        if (from === 0 && pendingEndsLine && bytes[0] === LF) {
          // The blank line straddles two reads: the event is what was pending, less its last \n.
          const joined = concatBytes(pending);
          event = asBuffer(joined.subarray(0, joined.byteLength - 1));
          from = 1;
        } else {
          const end = bytes.indexOf(BLANK_LINE, from);
          if (end < 0) break;
          event = pending.length === 0 ? bytes.subarray(from, end) : asBuffer(concatBytes([...pending, bytes.subarray(from, end)]));
          from = end + 2;
        }
        pending = [];
        pendingEndsLine = false;
        const data = dataOf(event);
        if (data === null) continue;
        if (isDone(data)) return;
        yield data;
      }
      if (from < bytes.byteLength) {
        pending.push(from === 0 ? bytes : bytes.subarray(from));
        pendingEndsLine = bytes[bytes.byteLength - 1] === LF;
      }
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => {});
  }
}

const utf8 = new TextDecoder();

/**
 * One event's data as JSON: by `large` (a whole-answer reader of answer-json.ts, given the bytes as they are) from
 * MIN_ANSWER_MEMO_BYTES on, else `JSON.parse` of its text.
 * @throws GatewayError 'upstream' when the data is not JSON.
 */
export function parseEventData(data: Uint8Array, what: string, large: (bytes: Uint8Array) => unknown = (bytes) => JSON.parse(utf8.decode(bytes))): unknown {
  try {
    return data.byteLength >= MIN_ANSWER_MEMO_BYTES ? large(data) : JSON.parse(utf8.decode(data));
  } catch {
    throw new GatewayError('upstream', `${what} streamed a chunk that is not JSON: ${utf8.decode(data.subarray(0, 200))}`);
  }
}

const LF = 0x0a;
const CR = 0x0d;
const BLANK_LINE = Buffer.from('\n\n');
const NEWLINE = Buffer.from('\n');
const DATA = Buffer.from('data:');
const DONE = Buffer.from('[DONE]');

const isDone = (data: Buffer) => data.equals(DONE);

/** `bytes` with \r\n and lone \r made \n (a new buffer). */
function withoutCr(bytes: Buffer): Buffer {
  const out = Buffer.allocUnsafe(bytes.byteLength);
  let n = 0;
  for (let i = 0; i < bytes.byteLength; i++) {
    const byte = bytes[i]!;
    if (byte !== CR) out[n++] = byte;
    else {
      out[n++] = LF;
      if (bytes[i + 1] === LF) i++;
    }
  }
  return out.subarray(0, n);
}

/** The event's `data:` lines (one leading space dropped) joined with \n, or null when it has none. */
function dataOf(event: Buffer): Buffer | null {
  const lines: Buffer[] = [];
  for (let at = 0; at < event.byteLength; ) {
    let end = event.indexOf(LF, at);
    if (end < 0) end = event.byteLength;
    if (end - at >= DATA.byteLength && event.compare(DATA, 0, DATA.byteLength, at, at + DATA.byteLength) === 0) {
      const start = at + DATA.byteLength + (event[at + DATA.byteLength] === 0x20 ? 1 : 0);
      lines.push(event.subarray(start, end));
    }
    at = end + 1;
  }
  if (lines.length <= 1) return lines[0] ?? null;
  return asBuffer(concatBytes(lines.flatMap((line, i) => (i === 0 ? [line] : [NEWLINE, line]))));
}
