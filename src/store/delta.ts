/**
 * Delta encoding of completion records against an earlier record of the same session (the "base"). In an agent
 * session each call's prompt repeats the whole history, so storing every prompt in full grows O(turns²); storing only
 * what a call adds over its base keeps a session O(final size).
 * - Token ids: `prompt_ids = (base.prompt_ids ++ base.response_ids)[0, prefix) ++ suffix`.
 * - JSON text (request body, IR request, IR response), as UTF-8 bytes: `text = base[0, p) ++ middle ++ base[base.length − s, base.length)`
 *   (a common prefix and a common suffix: a chat body appends messages before a trailing `"tools": […]`).
 * Pure functions, no I/O; the repository (completions.ts) decides which base to use and stores the result.
 */
import { asBuffer, commonBytePrefix, commonByteSuffix, concatBytes, uninitialisedBytes } from '../core/bytes.ts';
import { int32Buffer } from '../core/int32-twin.ts';

/**
 * Length of the longest common prefix of a token sequence held as consecutive segments (a base record's
 * prompt_ids ++ response_ids) and `ids`, in tokens (0 … min of both lengths). O(result) comparisons; the base is never
 * copied or re-packed. Ids held as an Int32Array are compared natively (`commonSegmentPrefixInt32`).
 */
export function commonSegmentPrefix(segments: readonly Int32Array[], ids: readonly number[] | Int32Array): number {
  if (ids instanceof Int32Array) return commonSegmentPrefixInt32(segments, ids);
  let at = 0;
  for (const segment of segments) {
    const n = Math.min(segment.length, ids.length - at);
    let j = 0;
    while (j < n && segment[j] === ids[at + j]) j++;
    at += j;
    if (j < segment.length) return at;
  }
  return at;
}

/**
 * `commonSegmentPrefix` against ids held in an Int32Array: compared natively on the bytes (`Buffer.compare` in
 * blocks), ~10× faster than the element loop at 25k ids.
 */
function commonSegmentPrefixInt32(segments: readonly Int32Array[], ids: Int32Array): number {
  let at = 0;
  for (const segment of segments) {
    const n = Math.min(segment.length, ids.length - at);
    let j = 0;
    if (n < NATIVE_COMPARE_FROM) {
      // A chain's per-turn segments are short: two Buffer views would cost more than the loop.
      while (j < n && segment[j] === ids[at + j]) j++;
    } else {
      const a = int32Buffer(segment.subarray(0, n));
      const b = int32Buffer(ids.subarray(at, at + n));
      // Equal ids are equal 4-byte groups: the common byte prefix, rounded down to whole ids.
      j = commonBytePrefix(a, b, n * 4) >> 2;
    }
    at += j;
    if (j < segment.length) return at;
  }
  return at;
}

/** Segments shorter than this (ids) are compared in a loop, longer ones as bytes. */
const NATIVE_COMPARE_FROM = 512;

/** The first `length` tokens of `segments`, as views (no copy). */
export function cutSegments(segments: readonly Int32Array[], length: number): Int32Array[] {
  const out: Int32Array[] = [];
  let left = length;
  for (const segment of segments) {
    if (left <= 0) break;
    out.push(segment.length <= left ? segment : segment.subarray(0, left));
    left -= segment.length;
  }
  return out;
}

/** Most segments a cached record keeps before `compactSegments` joins them. */
export const MAX_SEGMENTS = 16;

/**
 * A record's segments with at most MAX_SEGMENTS of them: past that, every segment after the first (a chain's first
 * record, the long one) is copied into one. A chain adds two short segments per turn (new prompt ids, response), and
 * comparing a prompt against 200 of them cost ~3× the compare against one (bench/README.md#session-8); joining
 * copies at most a chain's worth of per-turn ids once every few turns.
 * @returns the segments (the same array when nothing was joined) and the bytes newly allocated.
 */
export function compactSegments(segments: Int32Array[]): { segments: Int32Array[]; copiedBytes: number } {
  if (segments.length <= MAX_SEGMENTS) return { segments, copiedBytes: 0 };
  // concatBytes' result starts at offset 0, so it is aligned for an Int32Array view.
  const bytes = concatBytes(segments.slice(1).map(int32Buffer));
  return { segments: [segments[0]!, new Int32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4)], copiedBytes: bytes.byteLength };
}

/** A text stored as `base[0, prefix) ++ middle ++ base[base.length − suffix, base.length)`; lengths in UTF-16 code units. */
export interface TextDelta {
  prefix: number;
  suffix: number;
  middle: string;
}

/**
 * Below this many shared bytes (UTF-16 code units in older rows) a delta is not worth a reference to the base (header +
 * chain walk on read).
 */
export const MIN_TEXT_SHARED = 256;

/**
 * Rebuild a text from its delta (rows written before byte deltas, codec 0/1; tests write them with
 * test/support/legacy-text-delta.ts).
 * @throws Error when the delta does not fit the base (a corrupt row or a wrong base).
 */
export function applyTextDelta(delta: TextDelta, base: string | null): string {
  if (delta.prefix === 0 && delta.suffix === 0) return delta.middle;
  const b = base ?? '';
  if (delta.prefix < 0 || delta.suffix < 0 || delta.prefix + delta.suffix > b.length) {
    throw new Error(`text delta (prefix ${delta.prefix}, suffix ${delta.suffix}) does not fit a base of ${b.length} characters`);
  }
  return b.slice(0, delta.prefix) + delta.middle + b.slice(b.length - delta.suffix);
}


/**
 * A text held as UTF-8 bytes, stored as `base[0, prefix) ++ middle ++ base[base.length − suffix, base.length)`;
 * lengths in bytes. The base cache keeps texts as UTF-8 (one byte per ASCII character, off the JS string heap, where a
 * string with any character above U+00FF costs two bytes per character), so deltas are computed on bytes too.
 */
export interface ByteDelta {
  prefix: number;
  suffix: number;
  middle: Uint8Array;
}

/**
 * A text's UTF-8 bytes split against a base: the common prefix and suffix never overlap and never split a UTF-8 sequence (a cut
 * never lands on a continuation byte), so the middle is valid UTF-8 on its own. `{0, 0, text}` when less than
 * MIN_TEXT_SHARED bytes are shared or there is no base.
 * Cost: native memcmp over blocks (Buffer.compare), then a short per-byte scan.
 */
export function bytesDelta(text: Uint8Array, base: Uint8Array | null): ByteDelta {
  if (base === null || base.byteLength === 0) return { prefix: 0, suffix: 0, middle: text };
  const a = asBuffer(text);
  const b = asBuffer(base);
  const limit = Math.min(a.length, b.length);
  let prefix = commonBytePrefix(a, b, limit);
  while (prefix > 0 && prefix < a.length && isContinuation(a[prefix]!)) prefix--;
  let suffix = commonByteSuffix(a, b, limit - prefix);
  while (suffix > 0 && isContinuation(a[a.length - suffix]!)) suffix--;
  if (prefix + suffix < MIN_TEXT_SHARED) return { prefix: 0, suffix: 0, middle: text };
  return { prefix, suffix, middle: text.subarray(prefix, text.length - suffix) };
}

/**
 * Rebuild a text's UTF-8 bytes from its byte delta.
 * @throws Error when the delta does not fit the base (a corrupt row or a wrong base).
 */
export function applyBytesDelta(delta: ByteDelta, base: Uint8Array | null): Uint8Array {
  return joinPieces(applyBytesDeltaToPieces(delta, base === null ? [] : [base]));
}

/**
 * `applyBytesDelta` on a text held as consecutive pieces, returning pieces (views of the base's pieces and of the
 * middle, nothing copied): decoding a chain of deltas this way copies each text once at the end instead of at every
 * link.
 * @throws Error when the delta does not fit the base (a corrupt row or a wrong base).
 */
export function applyBytesDeltaToPieces(delta: ByteDelta, base: readonly Uint8Array[]): Uint8Array[] {
  if (delta.prefix === 0 && delta.suffix === 0) return [delta.middle];
  const length = piecesLength(base);
  if (delta.prefix < 0 || delta.suffix < 0 || delta.prefix + delta.suffix > length) {
    throw new Error(`text delta (prefix ${delta.prefix}, suffix ${delta.suffix} bytes) does not fit a base of ${length} bytes`);
  }
  const out = slicePieces(base, 0, delta.prefix);
  if (delta.middle.byteLength > 0) out.push(delta.middle);
  for (const piece of slicePieces(base, length - delta.suffix, length)) out.push(piece);
  return out;
}

/** Total bytes of consecutive pieces. */
export function piecesLength(pieces: readonly Uint8Array[]): number {
  let n = 0;
  for (const piece of pieces) n += piece.byteLength;
  return n;
}

/** The pieces as one array (the piece itself when there is only one). */
export function joinPieces(pieces: readonly Uint8Array[]): Uint8Array {
  if (pieces.length === 1) return pieces[0]!;
  return concatBytes(pieces);
}

/** Bytes [start, end) of consecutive pieces, as views. */
function slicePieces(pieces: readonly Uint8Array[], start: number, end: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  let at = 0;
  for (const piece of pieces) {
    const from = Math.max(start, at);
    const to = Math.min(end, at + piece.byteLength);
    if (from < to) out.push(from === at && to === at + piece.byteLength ? piece : piece.subarray(from - at, to - at));
    at += piece.byteLength;
    if (at >= end) break;
  }
  return out;
}

const isContinuation = (byte: number) => (byte & 0xc0) === 0x80;

// --- column codec -------------------------------------------------------------------------------------------------

/**
 * First byte of a stored text column (format 2): how the rest is encoded. 0/1: a TextDelta (prefix and suffix in
 * UTF-16 code units), raw or zstd; 2/3: a ByteDelta (prefix and suffix in UTF-8 bytes), raw or zstd. New rows are
 * written as 2/3; 0/1 rows (written before) are still read.
 */
/** Codec bytes of rows written before byte deltas (read only). */
const RAW = 0;
const ZSTD = 1;
const RAW_BYTES = 2;
const ZSTD_BYTES = 3;

/**
 * Middles shorter than this (UTF-8 bytes) are stored raw. zstd took ~14 µs per call on the proxy's hot path whatever
 * the size (a fresh context each call, cold caches), and a 340-byte middle (an answer's JSON) shrank only to ~260:
 * 80 bytes saved for ~3 % of a 100 KB call's CPU (bench/README.md#session-7). Longer middles (new turns) compress well.
 */
export const MIN_COMPRESS_BYTES = 1024;

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * Encode a byte delta as a BLOB: `[codec byte][payload]`, payload = `${prefix}:${suffix}:` in ASCII followed by the
 * middle's UTF-8 bytes, zstd compressed (level `level`) when `compress` and the middle is not tiny.
 * Source: https://bun.com/docs/api/utils#bun-zstdcompresssync
 */
export function encodeBytesColumn(delta: ByteDelta, compress: boolean, level: number): Uint8Array {
  const header = encoder.encode(`${delta.prefix}:${delta.suffix}:`);
  const payload = uninitialisedBytes(header.byteLength + delta.middle.byteLength);
  payload.set(header, 0);
  payload.set(delta.middle, header.byteLength);
  const packed = compress && delta.middle.byteLength >= MIN_COMPRESS_BYTES ? Bun.zstdCompressSync(payload, { level }) : null;
  const body = packed ?? payload;
  const out = uninitialisedBytes(body.byteLength + 1);
  out[0] = packed ? ZSTD_BYTES : RAW_BYTES;
  out.set(body, 1);
  return out;
}

/**
 * Decode a BLOB of an older row (codec 0/1: a TextDelta, `unit: 'utf16'`) or one written by encodeBytesColumn (a ByteDelta,
 * `unit: 'utf8'`).
 * @throws Error on an unknown codec byte, invalid UTF-8 or a malformed header (a corrupt row).
 */
export function decodeColumn(blob: Uint8Array): ({ unit: 'utf16' } & TextDelta) | ({ unit: 'utf8' } & ByteDelta) {
  const codec = blob[0];
  if (codec !== RAW_BYTES && codec !== ZSTD_BYTES) return { unit: 'utf16', ...decodeTextColumn(blob) };
  const payload = codec === RAW_BYTES ? blob.subarray(1) : Bun.zstdDecompressSync(blob.subarray(1));
  const first = payload.indexOf(0x3a); // ':'
  const second = first < 0 ? -1 : payload.indexOf(0x3a, first + 1);
  const prefix = second < 0 ? NaN : Number(decoder.decode(payload.subarray(0, first)));
  const suffix = second < 0 ? NaN : Number(decoder.decode(payload.subarray(first + 1, second)));
  if (second < 0 || first === 0 || second === first + 1 || !Number.isSafeInteger(prefix) || !Number.isSafeInteger(suffix) || prefix < 0 || suffix < 0) {
    throw new Error('stored text column has a malformed delta header (corrupt row)');
  }
  // The middle's UTF-8 is checked when the rebuilt text is decoded (completions.ts uses a fatal decoder).
  return { unit: 'utf8', prefix, suffix, middle: payload.subarray(second + 1) };
}

/**
 * Decode a BLOB of an older row (codec 0/1: a TextDelta).
 * @throws Error on an unknown codec byte, invalid UTF-8 or a malformed header (a corrupt row).
 */
export function decodeTextColumn(blob: Uint8Array): TextDelta {
  if (blob.byteLength === 0) throw new Error('stored text column is empty (corrupt row)');
  const codec = blob[0];
  const body = blob.subarray(1);
  let payload: string;
  if (codec === RAW) payload = decoder.decode(body);
  else if (codec === ZSTD) payload = decoder.decode(Bun.zstdDecompressSync(body));
  else throw new Error(`stored text column has unknown codec ${codec} (corrupt row or newer polar)`);
  const first = payload.indexOf(':');
  const second = first < 0 ? -1 : payload.indexOf(':', first + 1);
  const prefix = Number(payload.slice(0, first));
  const suffix = Number(payload.slice(first + 1, second));
  if (second < 0 || !Number.isSafeInteger(prefix) || !Number.isSafeInteger(suffix) || prefix < 0 || suffix < 0) {
    throw new Error('stored text column has a malformed delta header (corrupt row)');
  }
  return { prefix, suffix, middle: payload.slice(second + 1) };
}
