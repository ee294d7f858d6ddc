/**
 * `pool_sizing: auto`: size the INIT pool and the READY buffer from observed stage times (Little's law).
 *
 * With every RUN slot busy, the node only starts INIT while INIT + READY holds fewer than `ready_buffer` sessions
 * (node.ts pump), so the sessions being prepared ahead are bounded by the READY buffer. To refill RUN as fast as it
 * empties, INIT must finish `max_run_workers / RUN` sessions per second, i.e. hold `max_run_workers × INIT / RUN`
 * sessions at once (Little's law, L = λW). Sized exactly so, INIT runs at utilisation 1 and any INIT slower than its
 * mean leaves a RUN slot empty; the buffer gets `HEADROOM` × that plus one, so about a third of it is prepared sessions
 * waiting in READY to cover INIT's variance. The configured `init_workers` and `ready_buffer` stay the upper bounds
 * (they are what the node registers with the rollout server), so auto only ever holds fewer sandboxes than the
 * configuration allows. Measured in bench/staging.ts (bench/README.md#staging-staging). Source:
 * https://en.wikipedia.org/wiki/Little%27s_law.
 */

/** Buffer over the Little's-law mean: INIT at ≈ 2/3 utilisation. */
export const HEADROOM = 1.5;
/** Observations of each stage before the sizes leave their configured values. */
export const MIN_OBSERVATIONS = 3;
/** Sliding window of observations per stage. */
export const WINDOW = 64;

export interface PoolSizes {
  init_workers: number;
  ready_buffer: number;
}

/**
 * The INIT pool and READY buffer a node needs to keep `maxRunWorkers` harnesses running: `ceil(HEADROOM ×
 * maxRunWorkers × meanInitMs / meanRunMs) + 1`, at most the configured values, at least 1 INIT worker.
 * @throws Error when a mean is not a finite number ≥ 0 or the run mean is 0.
 */
export function neededPools(maxRunWorkers: number, meanInitMs: number, meanRunMs: number, configured: PoolSizes): PoolSizes {
  if (!(meanInitMs >= 0) || !Number.isFinite(meanInitMs) || !(meanRunMs > 0) || !Number.isFinite(meanRunMs)) {
    throw new Error(`stage means must be finite, INIT ≥ 0 and RUN > 0 ms (got INIT ${meanInitMs}, RUN ${meanRunMs})`);
  }
  const need = Math.ceil(HEADROOM * maxRunWorkers * (meanInitMs / meanRunMs)) + 1;
  return { init_workers: Math.max(1, Math.min(configured.init_workers, need)), ready_buffer: Math.min(configured.ready_buffer, need) };
}

/** Observed INIT and RUN durations (sliding windows) and the pool sizes they call for. */
export class PoolSizer {
  private readonly init: number[] = [];
  private readonly run: number[] = [];

  constructor(private readonly maxRunWorkers: number, private readonly configured: PoolSizes) {}

  /** Record one finished INIT or RUN stage, ms. */
  observe(stage: 'init' | 'run', ms: number): void {
    if (!(ms >= 0) || !Number.isFinite(ms)) return;
    const list = stage === 'init' ? this.init : this.run;
    list.push(ms);
    if (list.length > WINDOW) list.shift();
  }

  /** The sizes to use now: the configured ones until each stage has MIN_OBSERVATIONS, then {@link neededPools}. */
  sizes(): PoolSizes {
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    if (this.init.length < MIN_OBSERVATIONS || this.run.length < MIN_OBSERVATIONS) return { ...this.configured };
    const run = mean(this.run);
    if (run <= 0) return { ...this.configured };
    return neededPools(this.maxRunWorkers, mean(this.init), run, this.configured);
  }
}
