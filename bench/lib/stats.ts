/**
 * Order statistics for benchmark samples. Nearest-rank percentiles over a sorted copy: benchmarks collect at most a
 * few hundred thousand samples, so sorting is cheaper than keeping a histogram and exact for small n.
 */

/**
 * The p-th percentile (nearest rank) of `samples`.
 * @param samples any order; not modified. Units are the caller's (usually ms).
 * @param p 0..100.
 * @returns NaN for an empty array.
 * @throws RangeError when p is outside 0..100.
 * Source: https://en.wikipedia.org/wiki/Percentile#The_nearest-rank_method
 */
export function percentile(samples: ArrayLike<number>, p: number): number {
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile must be within 0..100, got ${p}`);
  if (samples.length === 0) return Number.NaN;
  const sorted = Float64Array.from(samples).sort();
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1]!;
}

/** Median of `samples` (mean of the two middle values for even n); NaN when empty. */
export function median(samples: ArrayLike<number>): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = Float64Array.from(samples).sort();
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** `{median, min, max, n}` of repeated measurements of one figure. */
export interface Spread {
  median: number;
  min: number;
  max: number;
  n: number;
}

/** Median and range of repeated runs' values (NaN entries, e.g. a failed run's cell, are ignored). */
export function spread(values: number[]): Spread {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return { median: Number.NaN, min: Number.NaN, max: Number.NaN, n: 0 };
  return { median: median(finite), min: Math.min(...finite), max: Math.max(...finite), n: finite.length };
}
