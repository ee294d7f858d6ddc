/** Injectable clock: Unix epoch milliseconds. */
export type Clock = () => number;
export const systemClock: Clock = () => Date.now();
/** A fixed clock for tests that advances by `stepMs` per call. */
export function fixedClock(startMs = 1_700_000_000_000, stepMs = 0): Clock {
  let t = startMs;
  return () => {
    const now = t;
    t += stepMs;
    return now;
  };
}
