/**
 * Token-id arrays paired with an Int32Array of the same values, by whoever built both at once (the engine answer
 * reader keeps a session's echoed prompt ids as an Int32Array anyway, engines/answer-json.ts). A twin proves that
 * every element is an int32, so the capture check need not test ~25,000 of them again, and it lets the store compare
 * a prompt with its base and pack its new ids natively: a 25k-id prefix compare is ~1 µs as `Buffer.compare` on the
 * twins' bytes against ~14 µs as a JS loop over the array (Bun 1.4, bench/README.md#session-8).
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
