/**
 * The simulator's toy policy: a deterministic "language model" whose logprob of a token depends only on a hash of the
 * last K=4 context ids and the token, so any recorded completion can be re-scored exactly (`polar trace verify`,
 * `polar sim score`). What the simulator *says* is scripted (script.ts); this only assigns the logprobs.
 * Source: docs/architecture.md#the-simulator.
 */

/** How many trailing context ids the policy looks at. */
export const POLICY_CONTEXT_K = 4;

// FNV-1a over 32-bit words, then a murmur3 finaliser for avalanche.
function mix(hash: number, word: number): number {
  let h = hash;
  for (let shift = 0; shift < 32; shift += 8) {
    h ^= (word >>> shift) & 0xff;
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function finalise(hash: number): number {
  let h = hash;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Logprob from a 32-bit hash: mostly near 0 (a confident model), sometimes down to about -12; always < 0. */
function logprobFromHash(hash: number): number {
  const u = (hash + 0.5) / 4294967296; // (0, 1)
  return Math.fround(-(1e-4 + 12 * u ** 4));
}

/**
 * Logprob (natural log, < 0, float32-exact) of `token` following `contextIds` (prompt ids then the ids sampled so
 * far). A pure function of the last {@link POLICY_CONTEXT_K} context ids (fewer when the context is shorter) and
 * the token.
 */
export function scoreLogprob(contextIds: ArrayLike<number>, token: number): number {
  return scoreAfter(contextIds, contextIds.length, token);
}

/** `scoreLogprob(contextIds.slice(0, end), token)` without copying. */
function scoreAfter(contextIds: ArrayLike<number>, end: number, token: number): number {
  const start = Math.max(0, end - POLICY_CONTEXT_K);
  let h = mix(0x811c9dc5, end - start);
  for (let i = start; i < end; i++) h = mix(h, contextIds[i]!);
  return logprobFromHash(finalise(mix(h, token)));
}

/**
 * Re-score a completion: one logprob per response id, each conditioned on the prompt and the response ids before it.
 * @param promptIds full prompt token ids.
 * @param responseIds sampled ids (length n) → n logprobs.
 */
export function rescoreCompletion(promptIds: readonly number[], responseIds: readonly number[]): number[] {
  const context = new Int32Array(Math.min(promptIds.length, POLICY_CONTEXT_K) + responseIds.length);
  const tail = promptIds.slice(Math.max(0, promptIds.length - POLICY_CONTEXT_K));
  context.set(tail, 0);
  context.set(responseIds, tail.length);
  // Only the prompt's last K ids can ever be in the window, so the tail stands in for the whole prompt.
  const out = new Array<number>(responseIds.length);
  for (let i = 0; i < responseIds.length; i++) out[i] = scoreAfter(context, tail.length + i, responseIds[i]!);
  return out;
}
