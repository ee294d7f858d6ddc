/**
 * Token ids held as Int32Arrays. The engine answer reader hands a session's echoed prompt ids on as one
 * (engines/answer-json.ts), token mode's buffers plan each prompt as the one they extend in place
 * (tokenization/token-buffer.ts), and a record's `prompt_ids` is built from it only when read (`definePromptIds`).
 * An Int32Array proves that every element is an int32, so the capture check need not test ~25,000 of them again, and
 * the store compares a prompt with its base and packs its new ids natively: a 25k-id prefix compare is ~1 µs as
 * `Buffer.compare` on the bytes against ~14 µs as a JS loop over an array (Bun 1.4, bench/README.md#session-8).
 * A JS array built from one is paired with it as its twin (`pairInt32`), so those uses stay native for the array.
 * Weak: a pairing keeps neither side alive. Neither side may be mutated once paired.
 */
const twins = new WeakMap<readonly number[], Int32Array>();

/**
 * Pair `ids` with `twin` (same length, same values; the caller guarantees the values).
 * @throws RangeError when the lengths differ.
 */
export function pairInt32(ids: readonly number[], twin: Int32Array): void {
  if (twin.length !== ids.length) throw new RangeError(`an int32 twin of ${twin.length} ids cannot pair an array of ${ids.length}`);
  twins.set(ids, twin);
}

/** The Int32Array paired with `ids`, or undefined when none was. */
export function int32Twin(ids: readonly number[]): Int32Array | undefined {
  return twins.get(ids);
}

/**
 * Whether `value` is an array of integers: at once for an array with a twin (its values are int32 by construction),
 * else by testing each element (~37 µs for 50,000 ids).
 */
export const isIntArray = (value: unknown): value is number[] => Array.isArray(value) && (twins.has(value) || value.every((v) => Number.isInteger(v)));

/**
 * Whether `a` and `b` hold the same ids: at once for the same array, natively when both are Int32Arrays or have twins
 * (one `Buffer.equals`), else element by element.
 */
export function sameIds(a: readonly number[] | Int32Array, b: readonly number[] | Int32Array): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  const ta = int32Of(a);
  const tb = ta === undefined ? undefined : int32Of(b);
  if (ta !== undefined && tb !== undefined) return int32Buffer(ta).equals(int32Buffer(tb));
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The twin's bytes as a Buffer view (no copy), for `Buffer.compare` / `equals`. */
export function int32Buffer(twin: Int32Array): Buffer {
  return Buffer.from(twin.buffer, twin.byteOffset, twin.byteLength);
}

/** Per growable buffer: how many int32 slots from its start have been written (its high-water mark). */
const written = new WeakMap<ArrayBufferLike, number>();

/**
 * The twin of `head`'s values followed by `tail`'s: only `tail` is written. A conversation's ids grow call by call, so
 * a buffer gets ~25 % spare room and a view that ends at its buffer's high-water mark is extended in place (nothing
 * allocated or copied); any other view (a shorter prefix, or one that another extension already wrote past) is
 * copied into a new buffer first. Every view handed out earlier keeps its values: nothing below a buffer's
 * high-water mark is written twice.
 * Cost: O(tail.length) in place, plus one native copy of `head` otherwise.
 * @returns the twin (length head.length + tail.length), or undefined when a value of `tail` is not an int32.
 */
export function appendInt32(head: Int32Array | undefined, tail: readonly number[]): Int32Array | undefined {
  const from = head?.length ?? 0;
  const length = from + tail.length;
  let out: Int32Array;
  if (head !== undefined && written.get(head.buffer) === head.byteOffset / 4 + from && head.buffer.byteLength >= head.byteOffset + length * 4) {
    out = new Int32Array(head.buffer, head.byteOffset, length);
  } else {
    out = new Int32Array(new ArrayBuffer((Math.ceil(length * 1.25) + 64) * 4), 0, length);
    if (head !== undefined) out.set(head);
  }
  for (let i = 0; i < tail.length; i++) {
    const id = tail[i]!;
    if ((id | 0) !== id) return undefined; // written past the high-water mark only: no view sees it
    out[from + i] = id;
  }
  written.set(out.buffer, out.byteOffset / 4 + length);
  return out;
}

/**
 * An Int32Array's values as a plain array (same length and order). A sized array filled in a loop: `Array.from` on a
 * typed array costs ~45 ns per element in Bun 1.4 (1.1 ms for a 25k-token prompt), the loop well under 1 ns, and
 * `concat` of 100k-element arrays took 0.3–4 ms (bench/README.md#session-9).
 */
export function int32ToArray(view: Int32Array): number[] {
  const out = new Array<number>(view.length);
  for (let i = 0; i < view.length; i++) out[i] = view[i]!;
  return out;
}

/**
 * Token ids as the engines hand them to the proxy: a JS array (with or without a twin), or an Int32Array read
 * straight from an engine's answer (engines/answer-json.ts), so that no JS array is built for them on the request
 * path (a 25k-token prompt is a ~200 KB array on the JS heap, and building it cost ~13 % of a 100 KB call's CPU at 64
 * connections, bench/README.md#session-11).
 */
export type TokenIds = number[] | Int32Array;

/** Whether `value` is token ids: an Int32Array (int32 by construction), or an array of integers (`isIntArray`). */
export const isTokenIds = (value: unknown): value is TokenIds => value instanceof Int32Array || isIntArray(value);

/** The Int32Array holding `ids`' values without a copy: `ids` itself, or its twin; undefined for an array without one. */
export function int32Of(ids: readonly number[] | Int32Array): Int32Array | undefined {
  return ids instanceof Int32Array ? ids : twins.get(ids);
}

/** A record's prompt ids behind the accessor `definePromptIds` put there: the ids, the accessor's getter, the array once built. */
interface LazyPrompt {
  ids: Int32Array;
  get: (this: object) => number[];
  /** The array the getter built, kept here only where the record could not take it as a data property (frozen). */
  built: number[] | null;
}

/** Records whose `prompt_ids` was given by `definePromptIds` and not yet replaced by a data property. */
const lazyPrompts = new WeakMap<object, LazyPrompt>();

/** Replace the accessor by a plain data property holding `value` (what an ordinary record has). */
function settle(record: object, value: unknown): void {
  lazyPrompts.delete(record);
  Object.defineProperty(record, 'prompt_ids', { value, writable: true, enumerable: true, configurable: true });
}

/** The record's lazy entry while its `prompt_ids` is still that accessor (not deleted or redefined since). */
function lazyOf(record: object): LazyPrompt | undefined {
  const entry = lazyPrompts.get(record);
  return entry !== undefined && Object.getOwnPropertyDescriptor(record, 'prompt_ids')?.get === entry.get ? entry : undefined;
}

/**
 * Give `record.prompt_ids` the values of `ids` without building the JS array yet. The property becomes an own,
 * enumerable accessor: its first read builds the array (`int32ToArray`, paired with `ids` as its twin) and turns it
 * into a plain data property (a frozen record keeps the accessor, which then returns that same array); an assignment
 * replaces it. So every reader (JSON.stringify, a spread, `structuredClone`, `toEqual`, a trace builder) sees the
 * `number[]` of the record's contract, while the proxy's own path reads the Int32Array through `promptIdsInt32` /
 * `promptIdsLength`, and a record nobody else reads never has the array built. Neither `ids` nor the built array may
 * be written afterwards (as for any pair, see `pairInt32`). `console.log` shows the accessor until the first read.
 */
export function definePromptIds(record: { prompt_ids: readonly number[] }, ids: Int32Array): void {
  const entry: LazyPrompt = {
    ids,
    built: null,
    get(this: object) {
      if (entry.built !== null) return entry.built;
      const array = int32ToArray(ids);
      pairInt32(array, ids);
      if (Object.getOwnPropertyDescriptor(this, 'prompt_ids')?.configurable === true) settle(this, array);
      else entry.built = array;
      return array;
    },
  };
  lazyPrompts.set(record, entry);
  Object.defineProperty(record, 'prompt_ids', {
    enumerable: true,
    configurable: true,
    get: entry.get,
    set(this: object, value: unknown) {
      settle(this, value);
    },
  });
}

/** A record's prompt ids without building the JS array: the Int32Array given to `definePromptIds`, else the array. */
export function recordPromptIds(record: { prompt_ids: readonly number[] }): readonly number[] | Int32Array {
  return lazyOf(record)?.ids ?? record.prompt_ids;
}

/** A record's prompt ids as an Int32Array without building the JS array (`definePromptIds`), or its array's twin. */
export function promptIdsInt32(record: { prompt_ids: readonly number[] }): Int32Array | undefined {
  return int32Of(recordPromptIds(record));
}

/** A record's number of prompt ids, without building the JS array of one given to `definePromptIds`. */
export function promptIdsLength(record: { prompt_ids: readonly number[] }): number {
  return recordPromptIds(record).length;
}
