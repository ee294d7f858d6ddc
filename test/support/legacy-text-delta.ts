/**
 * The writer of the text deltas rows were stored with before byte deltas (codec 0/1: offsets in UTF-16 code units).
 * The product only reads such rows (src/store/delta.ts `decodeColumn`, `applyTextDelta`); tests use this to write
 * them and check that they still read and serve as a base.
 */
import { MIN_TEXT_SHARED, type TextDelta } from '../../src/store/delta.ts';

/** Codec bytes of the old rows (src/store/delta.ts reads them). */
const RAW = 0;
const ZSTD = 1;
/** Middles shorter than this were stored raw. */
const MIN_COMPRESS_CHARS = 128;

/**
 * Split `text` into what it shares with `base` (common prefix and suffix, never overlapping and never splitting a
 * surrogate pair) and the `middle` it adds; `{0, 0, text}` when less than MIN_TEXT_SHARED code units are shared or there
 * is no base.
 */
export function textDelta(text: string, base: string | null): TextDelta {
  if (base === null || base.length === 0) return { prefix: 0, suffix: 0, middle: text };
  const limit = Math.min(text.length, base.length);
  let prefix = 0;
  while (prefix < limit && text.charCodeAt(prefix) === base.charCodeAt(prefix)) prefix++;
  if (prefix > 0 && isHighSurrogate(text.charCodeAt(prefix - 1))) prefix--;
  let suffix = 0;
  while (suffix < limit - prefix && text.charCodeAt(text.length - suffix - 1) === base.charCodeAt(base.length - suffix - 1)) suffix++;
  if (suffix > 0 && isLowSurrogate(text.charCodeAt(text.length - suffix))) suffix--;
  if (prefix + suffix < MIN_TEXT_SHARED) return { prefix: 0, suffix: 0, middle: text };
  return { prefix, suffix, middle: text.slice(prefix, text.length - suffix) };
}

const isHighSurrogate = (c: number) => c >= 0xd800 && c <= 0xdbff;
const isLowSurrogate = (c: number) => c >= 0xdc00 && c <= 0xdfff;

/** A text delta as the old BLOB: `[codec byte][payload]`, payload = UTF-8 of `${prefix}:${suffix}:${middle}`, zstd when asked and not tiny. */
export function encodeTextColumn(delta: TextDelta, compress: boolean, level: number): Uint8Array {
  const payload = `${delta.prefix}:${delta.suffix}:${delta.middle}`;
  const packed = compress && delta.middle.length >= MIN_COMPRESS_CHARS ? Bun.zstdCompressSync(payload, { level }) : null;
  const body = packed ?? new TextEncoder().encode(payload);
  const out = new Uint8Array(body.byteLength + 1);
  out[0] = packed ? ZSTD : RAW;
  out.set(body, 1);
  return out;
}
