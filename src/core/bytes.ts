/**
 * Byte-level helpers shared by the store (text deltas) and the engine clients (echoed prompt ids): common prefix and
 * suffix lengths of two byte arrays, compared natively in blocks (`Buffer.compare`) before a byte loop for the rest.
 * Source: https://nodejs.org/api/buffer.html#bufcomparetarget-targetstart-targetend-sourcestart-sourceend
 */

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
