/**
 * Token arrays as packed little-endian BLOBs: Int32 for token ids, Float32 for logprobs (4 bytes per element), so a
 * 32k-token completion is 128 KiB instead of ~250 KiB of JSON text and decodes without parsing.
 */
import { int32Buffer, int32ToArray } from '../core/int32-twin.ts';
import { concatBytes, uninitialisedBytes } from '../core/bytes.ts';

// Typed arrays use the host byte order; every platform Bun ships for is little-endian, and the file format says LE.
if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) throw new Error('polar store requires a little-endian host');

/**
 * Pack token ids `ids[start…]` (integers in int32 range) into bytes; length = 4 × (ids.length − start).
 * `start` (default 0) lets a prefix-delta record pack only its suffix without copying the array first. Ids held as
 * an Int32Array are int32 already: their bytes are copied natively (`int32Bytes`).
 * @throws TypeError naming the index of a non-integer or out-of-range id (stored silently, Int32Array would wrap it).
 */
export function packInt32(ids: readonly number[] | Int32Array, start = 0): Uint8Array {
  const from = Math.min(Math.max(0, start), ids.length);
  if (ids instanceof Int32Array) return int32Bytes(ids.subarray(from));
  const bytes = uninitialisedBytes(4 * (ids.length - from));
  const packed = new Int32Array(bytes.buffer, bytes.byteOffset, ids.length - from);
  for (let i = from; i < ids.length; i++) {
    const id = ids[i]!;
    if (!Number.isInteger(id) || id < -0x80000000 || id > 0x7fffffff) throw new TypeError(`token id at index ${i} is not an int32: ${id}`);
    packed[i - from] = id;
  }
  return bytes;
}

/**
 * An Int32Array's values as packed bytes (a copy, aligned: byteOffset 0); length = 4 × ids.length. For ids already
 * held as int32 (core/int32-twin.ts), so nothing needs checking.
 */
export function int32Bytes(ids: Int32Array): Uint8Array {
  return concatBytes([int32Buffer(ids)]);
}

/** Pack logprobs as float32 (values are rounded as by Math.fround); length = 4 × values.length. */
export function packFloat32(values: readonly number[]): Uint8Array {
  return new Uint8Array(Float32Array.from(values).buffer);
}

/** Unpack an Int32 BLOB. @throws Error when the byte length is not a multiple of 4 (a corrupt row). */
export function unpackInt32(bytes: Uint8Array): number[] {
  return int32ToArray(new Int32Array(alignedCopy(bytes)));
}

/** An Int32 BLOB as an Int32Array (an aligned copy). @throws Error when the byte length is not a multiple of 4. */
export function int32View(bytes: Uint8Array): Int32Array {
  return new Int32Array(alignedCopy(bytes));
}

/** Unpack a Float32 BLOB into numbers (each exactly the stored float32). */
export function unpackFloat32(bytes: Uint8Array): number[] {
  const values = new Float32Array(alignedCopy(bytes));
  const out = new Array<number>(values.length);
  for (let i = 0; i < values.length; i++) out[i] = values[i]!;
  return out;
}

function alignedCopy(bytes: Uint8Array): ArrayBuffer {
  if (bytes.byteLength % 4 !== 0) throw new Error(`packed token array has ${bytes.byteLength} bytes, not a multiple of 4`);
  // SQLite hands back a view at an arbitrary offset; typed arrays need 4-byte alignment.
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
}
