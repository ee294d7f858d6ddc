/**
 * Byte-level helpers shared by the store (text deltas) and the engine clients (echoed prompt ids): common prefix and
 * suffix lengths of two byte arrays, compared natively in blocks (`Buffer.compare`) before a byte loop for the rest.
 * Source: https://nodejs.org/api/buffer.html#bufcomparetarget-targetstart-targetend-sourcestart-sourceend
 */

/**
 * Below this size (bytes) `new Uint8Array(n)` is as cheap as an uninitialised allocation (JSC's inline typed arrays).
 */
const UNINITIALISED_FROM = 4096;

/**
 * `n` bytes whose contents are left as they were (the caller overwrites every one): from 4 KiB on a fresh
 * `Buffer.allocUnsafeSlow` array, never a pooled slice, so its byteOffset is 0 and Int32/Float32 views of it are
 * aligned. `new Uint8Array(n)` zero-fills, which cost 8.8 µs at 64 KiB and 25.5 µs at 256 KiB against 1.0 and 3.6 µs
 * (Bun 1.4 on the project's 2-core box, bench/README.md#session-7); the proxy allocates one ~110 KB body per call.
 * Source: https://nodejs.org/api/buffer.html#static-method-bufferallocunsafeslowsize
 */
export function uninitialisedBytes(n: number): Uint8Array {
  return n < UNINITIALISED_FROM ? new Uint8Array(n) : Buffer.allocUnsafeSlow(n);
}

/** `parts` copied one after the other into one array of their total length (bytes). */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  let length = 0;
  for (const part of parts) length += part.byteLength;
  const out = uninitialisedBytes(length);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.byteLength;
  }
  return out;
}

/**
 * Whether `byte` is JSON whitespace (space, line feed, carriage return, tab); false for undefined (past the end).
 * Source: https://www.rfc-editor.org/rfc/rfc8259#section-2
 */
export const isJsonSpace = (byte: number | undefined): boolean => byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;

/** A Buffer view of the same memory (no copy), for its native `compare` and `indexOf`. */
export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Number of leading bytes `a` and `b` share, at most `limit` (≤ both lengths). */
export function commonBytePrefix(a: Buffer, b: Buffer, limit: number): number {
  let i = 0;
  for (let block = 8192; block >= 8; block >>= 4) {
    while (i + block <= limit && a.compare(b, i, i + block, i, i + block) === 0) i += block;
  }
  while (i < limit && a[i] === b[i]) i++;
  return i;
}

/** Number of trailing bytes `a` and `b` share, at most `limit` (≤ both lengths). */
export function commonByteSuffix(a: Buffer, b: Buffer, limit: number): number {
  let i = 0;
  const aEnd = a.length;
  const bEnd = b.length;
  for (let block = 8192; block >= 8; block >>= 4) {
    while (i + block <= limit && a.compare(b, bEnd - i - block, bEnd - i, aEnd - i - block, aEnd - i) === 0) i += block;
  }
  while (i < limit && a[aEnd - i - 1] === b[bEnd - i - 1]) i++;
  return i;
}
