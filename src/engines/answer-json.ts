/**
 * Parsing a chat-mode engine answer without building its echoed prompt ids through `JSON.parse`.
 *
 * vLLM (≥ 0.10.2, `return_token_ids`) and SGLang echo the whole prompt as `prompt_token_ids`: for a 100 KB harness
 * request that is ~25,000 ids, ~160 KB of the answer's ~165 KB, and decoding that text and `JSON.parse` building the
 * array were the largest single cost of a proxied call. Within a session each call's prompt extends the previous
 * call's (prompt ++ sampled ++ new turn), so the array's text almost always starts with the previous answer's array
 * text: this reader compares the two natively (`Buffer.compare`), copies the previous ids for the shared part and
 * scans only the new digits (a session's first answer, or one that does not extend the remembered one, has its array
 * read by `JSON.parse` alone, faster than a scan in JS, and remembered). The rest of the answer (~5 KB) goes through
 * `JSON.parse` with the array cut out, and the ids are put back in its place as an Int32Array (no JS array of 25,000
 * numbers is built; the proxy's capture and store read the Int32Array, core/int32-twin.ts `TokenIds`), so callers get
 * what `JSON.parse` of the whole answer would have given with that one value typed.
 *
 * Anything unusual falls back to `JSON.parse` of the whole text: the key absent or present more than once, a value
 * that is not a flat array of int32 integers, or an array that sits anywhere other than the top level or
 * `choices[0]`; new digits that are not plain non-negative integers (sign, leading zero, fraction, exponent) are read
 * as a first answer is.
 * Memory: per session, the previous array's bytes (a view of that answer) and its ids as an Int32Array, both off the
 * JS heap; a byte budget over all sessions, least recently used first out (a session that fell out costs one
 * `JSON.parse` of its next answer's ids).
 * Source: docs/protocol-notes.md#inference-engines (where each engine puts `prompt_token_ids`), RFC 8259 §6 (numbers).
 */
import { ByteLru } from '../core/byte-lru.ts';
import { asBuffer, commonBytePrefix, isJsonSpace } from '../core/bytes.ts';
import { appendInt32 } from '../core/int32-twin.ts';

const KEY = Buffer.from('"prompt_token_ids"');
const utf8 = new TextDecoder();

/** What the reader remembers of a session's last answer: the array's bytes (between `[` and `]`) and its ids. */
interface Previous {
  digits: Buffer;
  ids: Int32Array;
}

/** `ids` as a new Int32Array (`set` from the array: ~2× faster than `Int32Array.from` in Bun 1.4). */
function int32Copy(ids: readonly number[]): Int32Array {
  const out = new Int32Array(ids.length);
  out.set(ids);
  return out;
}

/** Resident bytes of a remembered answer (the buffer its digits are a view of, its ids' buffer with spare room, a fixed overhead). */
const entryBytes = (entry: Previous) => entry.digits.buffer.byteLength + entry.ids.buffer.byteLength + 64;

/**
 * Default budget over all sessions: ~28 sessions with 25,000-token prompts (~290 KB each: the answer the digits are a
 * view of, and the ids with spare room); a session that fell out costs one `JSON.parse` of its ids. A 32 MiB budget raised RSS in
 * `proxy-soak` by ~100 MB for no gain in CPU (bench/README.md#hot-path).
 */
export const DEFAULT_ANSWER_MEMO_BYTES = 8 * 1024 * 1024;
/**
 * A session without a remembered answer whose answer is smaller than this (bytes) goes through `JSON.parse` and is
 * not remembered: a few thousand ids are cheaper to parse than to remember (measured on small calls,
 * bench/README.md#hot-path).
 */
export const MIN_ANSWER_MEMO_BYTES = 16 * 1024;

export class EngineAnswerReader {
  private readonly sessions: ByteLru<Previous>;
  /**
   * Calls answered by the incremental path / by `JSON.parse` of the ids alone (then remembered) / by `JSON.parse` of
   * everything because of their shape / by `JSON.parse` because they were small (tests, benches).
   */
  readonly stats = { incremental: 0, scanned: 0, fallback: 0, small: 0 };

  /**
   * @param maxBytes memory budget over all sessions, bytes (0: nothing kept, every answer scanned in full).
   * @param minBytes answers of sessions with nothing remembered are read from this size on (default MIN_ANSWER_MEMO_BYTES).
   */
  constructor(
    maxBytes = DEFAULT_ANSWER_MEMO_BYTES,
    private readonly minBytes = MIN_ANSWER_MEMO_BYTES,
  ) {
    this.sessions = new ByteLru(maxBytes, entryBytes);
  }

  /**
   * Parse an engine answer's UTF-8 bytes.
   * @param sessionId the session whose previous answer may share the prompt ids' prefix (null: no reuse, nothing kept).
   * @returns the same value as `JSON.parse(new TextDecoder().decode(bytes))`, except that a `prompt_token_ids` read
   *   here is an Int32Array of the same ids (a small answer of a session with nothing remembered, or an unusual one,
   *   is `JSON.parse`'s value as it is).
   * @throws SyntaxError when the text is not JSON (as `JSON.parse` would).
   */
  parse(bytes: Uint8Array, sessionId: string | null): unknown {
    const buffer = asBuffer(bytes);
    const previous = sessionId === null ? undefined : this.sessions.get(sessionId);
    if (previous === undefined && buffer.byteLength < this.minBytes) {
      this.stats.small++;
      return JSON.parse(utf8.decode(buffer));
    }
    const array = idsArray(buffer);
    if (array === null) return this.fallback(buffer);
    const { open, close } = array;
    const digits = buffer.subarray(open + 1, close);

    let head: Int32Array | null = null;
    let tail: number[] | null = null;
    if (previous !== undefined && previous.digits.byteLength > 0 && previous.digits.byteLength <= digits.byteLength) {
      const shared = commonBytePrefix(digits, previous.digits, previous.digits.byteLength);
      // The previous array is a prefix of this one when all its bytes match and this one ends there or goes on with ','.
      if (shared === previous.digits.byteLength && (shared === digits.byteLength || digits[shared] === 0x2c)) {
        tail = shared === digits.byteLength ? [] : scanIds(digits, shared + 1);
        if (tail !== null) head = previous.ids;
      }
    }
    // Nothing to reuse: the native parser reads the array alone (faster than a scan in JS); its ids are remembered.
    const incremental = head !== null;
    if (!incremental) {
      tail = parseIds(digits);
      if (tail === null) return this.fallback(buffer);
    }

    const holder = parseAround(buffer, open, close);
    if (holder === null) return this.fallback(buffer);
    // The ids as an Int32Array (only the new ids written when it extends the previous one, core/int32-twin.ts): what
    // the answer holds, so no JS array is built for them (the capture check and the store read it natively), and
    // what the session's next answer extends.
    const ids = sessionId === null ? int32Copy(tail!) : appendInt32(head ?? undefined, tail!)!; // int32 (scanIds / parseIds)
    holder.owner.prompt_token_ids = ids;
    if (incremental) this.stats.incremental++;
    else this.stats.scanned++;
    if (sessionId !== null) this.sessions.set(sessionId, { digits, ids });
    return holder.body;
  }

  /** Forget one session's answer (its calls are over). */
  forget(sessionId: string): void {
    this.sessions.delete(sessionId);
  }

  /** Resident bytes over all sessions. */
  get residentBytes(): number {
    return this.sessions.bytes;
  }

  private fallback(buffer: Buffer): unknown {
    this.stats.fallback++;
    return JSON.parse(utf8.decode(buffer));
  }
}

/**
 * Where the answer's one `prompt_token_ids` array is: `open` at its `[`, `close` at its `]`. Null when the key is
 * absent or present more than once, or its value does not start with `[`. (The array is not checked here.)
 */
function idsArray(buffer: Buffer): { open: number; close: number } | null {
  const at = buffer.indexOf(KEY);
  if (at < 0) return null;
  let open = at + KEY.length;
  while (isJsonSpace(buffer[open])) open++;
  if (buffer[open] !== 0x3a /* : */) return null;
  open++;
  while (isJsonSpace(buffer[open])) open++;
  if (buffer[open] !== 0x5b /* [ */) return null;
  const close = buffer.indexOf(0x5d /* ] */, open + 1);
  // A second key (JSON.parse would keep the last) is looked for only after the array, so the digits are not searched.
  if (close < 0 || buffer.indexOf(KEY, close) >= 0) return null;
  return { open, close };
}

/**
 * `JSON.parse` of the answer with the array between `open` and `close` emptied, and the object that holds the
 * (now empty) array, to put the ids back into. Null when that text is not JSON or the array sits anywhere other than
 * the top level or `choices[0]`.
 */
function parseAround(buffer: Buffer, open: number, close: number): { body: unknown; owner: Record<string, unknown> } | null {
  let body: unknown;
  try {
    body = JSON.parse(utf8.decode(buffer.subarray(0, open + 1)) + utf8.decode(buffer.subarray(close)));
  } catch {
    return null;
  }
  const owner = placeholderOwner(body);
  return owner === null ? null : { body, owner };
}

/**
 * Parse a token-mode engine answer that echoes the prompt ids the proxy sent (vLLM `/v1/completions` with
 * `return_token_ids`, the simulator): when the echoed array's bytes are exactly the `sentDigits` (the request's
 * array text between its brackets, as compact JSON writes it), the array is not parsed at all and `ids` (the array
 * that was sent) is put in its place; anything else (other spacing, other ids, an unusual shape) is parsed in full by
 * `JSON.parse`, so the caller's comparison of the echo with what it sent still sees any difference.
 * @returns the same value as `JSON.parse` of the whole answer, except that an equal echo is `ids` itself.
 * @throws SyntaxError when the text is not JSON (as `JSON.parse` would).
 */
export function parseEchoedAnswer(bytes: Uint8Array, sentDigits: Uint8Array, ids: readonly number[] | Int32Array): unknown {
  const buffer = asBuffer(bytes);
  const array = idsArray(buffer);
  if (array !== null && asBuffer(sentDigits).equals(buffer.subarray(array.open + 1, array.close))) {
    const holder = parseAround(buffer, array.open, array.close);
    if (holder !== null) {
      holder.owner.prompt_token_ids = ids;
      return holder.body;
    }
  }
  return JSON.parse(utf8.decode(buffer));
}

/**
 * The comma-separated integers of `digits` from `from` (just after a comma) on, or null when anything is not a
 * non-negative int32 written as JSON allows (no sign, no leading zero, no fraction or exponent) or an element is empty.
 */
function scanIds(digits: Uint8Array, from: number): number[] | null {
  const ids: number[] = [];
  const end = digits.byteLength;
  let i = from;
  while (i < end && isJsonSpace(digits[i])) i++;
  if (i === end) return null; // a trailing comma is not JSON
  for (;;) {
    const first = digits[i]!;
    if (first < 0x30 || first > 0x39) return null;
    let value = first - 0x30;
    let n = 1;
    i++;
    while (i < end) {
      const c = digits[i]!;
      if (c < 0x30 || c > 0x39) break;
      if (value === 0) return null; // a leading zero
      value = value * 10 + (c - 0x30);
      i++;
      if (++n > 10) return null;
    }
    if (value > 0x7fffffff) return null;
    ids.push(value);
    while (i < end && isJsonSpace(digits[i])) i++;
    if (i === end) return ids;
    if (digits[i] !== 0x2c) return null;
    i++;
    while (i < end && isJsonSpace(digits[i])) i++;
    if (i === end) return null;
  }
}

/** The ids of `digits` (the text between the array's brackets) by `JSON.parse`, or null unless all are int32 integers. */
function parseIds(digits: Uint8Array): number[] | null {
  let ids: unknown;
  try {
    ids = JSON.parse(`[${utf8.decode(digits)}]`);
  } catch {
    return null;
  }
  if (!Array.isArray(ids)) return null;
  for (const id of ids) if (!Number.isInteger(id) || id < -0x80000000 || id > 0x7fffffff) return null;
  return ids as number[];
}

/** The object whose `prompt_token_ids` is the cut-out (now empty) array: the answer itself or its `choices[0]`. */
function placeholderOwner(body: unknown): Record<string, unknown> | null {
  const isEmptyArray = (value: unknown) => Array.isArray(value) && value.length === 0;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  const top = body as Record<string, unknown>;
  if (isEmptyArray(top.prompt_token_ids)) return top;
  const choice = Array.isArray(top.choices) ? top.choices[0] : undefined;
  if (typeof choice === 'object' && choice !== null && isEmptyArray((choice as Record<string, unknown>).prompt_token_ids)) return choice as Record<string, unknown>;
  return null;
}
