/** Virtual time for the simulator's timing model (src/sim/timing.ts): timers fire only when a test advances the clock. */
import type { TimingScheduler } from '../../src/sim/timing.ts';

export class ManualScheduler implements TimingScheduler {
  private t: number;
  private nextId = 1;
  private timers = new Map<number, { at: number; fn: () => void }>();

  /** `startMs`: the clock's first reading (a large one exercises float rounding as performance.now hours in does). */
  constructor(startMs = 0) {
    this.t = startMs;
  }

  now = (): number => this.t;

  setTimer = (ms: number, fn: () => void): unknown => {
    const id = this.nextId++;
    this.timers.set(id, { at: this.t + Math.max(0, ms), fn });
    return id;
  };

  clearTimer = (handle: unknown): void => {
    this.timers.delete(handle as number);
  };

  /** Run every timer due up to `ms` from now, in time order, letting promise callbacks run after each. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    await flush();
    for (;;) {
      let first: [number, { at: number; fn: () => void }] | null = null;
      for (const entry of this.timers) if (entry[1].at <= end && (first === null || entry[1].at < first[1].at)) first = entry;
      if (first === null) break;
      this.timers.delete(first[0]);
      this.t = Math.max(this.t, first[1].at);
      first[1].fn();
      await flush();
    }
    this.t = end;
    await flush();
  }
}

/** Let every pending promise callback run (virtual time does not move). */
export const flush = () => new Promise<void>((resolve) => setImmediate(resolve));
