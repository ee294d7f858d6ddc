/**
 * The simulator's timing model: prefill and decode speed (tokens/s, 0 = instant) and a maximum number of concurrent
 * sequences (the rest queue, FIFO), plus a pause gate that holds new requests while a weight update is in progress.
 * It accounts busy time (≥ 1 running sequence) so engine utilisation can be measured. Source: docs/architecture.md#the-simulator.
 */
import type { Clock } from '../core/clock.ts';

export interface TimingOptions {
  /** Prompt tokens per second; 0 = instant. */
  prefillTps: number;
  /** Generated tokens per second per sequence; 0 = instant. */
  decodeTps: number;
  /** Sequences running at once; ≥ 1. */
  maxConcurrency: number;
  clock?: Clock;
}

export interface TimingSnapshot {
  running: number;
  /** Requests waiting for a slot or held by a pause. */
  queued: number;
  /** Busy time / wall time since start, 0..1. */
  busyFraction: number;
  busyMs: number;
  wallMs: number;
  paused: boolean;
}

export const sleep = (ms: number) => (ms > 0 ? new Promise<void>((r) => setTimeout(r, ms)) : Promise.resolve());

export class TimingModel {
  private running = 0;
  private waiting: (() => void)[] = [];
  private held = 0;
  private busyMs = 0;
  private busySince: number | null = null;
  private readonly startedAt: number;
  private readonly clock: Clock;
  private pausedGate: { promise: Promise<void>; release: () => void } | null = null;

  constructor(readonly options: TimingOptions) {
    if (!(options.maxConcurrency >= 1)) throw new Error(`max concurrency must be ≥ 1, got ${options.maxConcurrency}`);
    if (!(options.prefillTps >= 0) || !(options.decodeTps >= 0)) throw new Error('prefill and decode tokens/s must be ≥ 0');
    this.clock = options.clock ?? (() => performance.now());
    this.startedAt = this.clock();
  }

  /** Time to prefill `tokens` uncached prompt tokens, ms. */
  prefillMs(tokens: number): number {
    return this.options.prefillTps > 0 ? (tokens / this.options.prefillTps) * 1000 : 0;
  }

  /** Time to decode `tokens` tokens of one sequence, ms. */
  decodeMs(tokens: number): number {
    return this.options.decodeTps > 0 ? (tokens / this.options.decodeTps) * 1000 : 0;
  }

  get paused(): boolean {
    return this.pausedGate !== null;
  }

  /** Hold every request that has not started yet until {@link resume}; running sequences finish. */
  pause(): void {
    if (this.pausedGate) return;
    let release!: () => void;
    const promise = new Promise<void>((r) => (release = r));
    this.pausedGate = { promise, release };
  }

  resume(): void {
    const gate = this.pausedGate;
    this.pausedGate = null;
    gate?.release();
  }

  /** Resolves when no sequence is running (for a pause that drains). */
  async drained(pollMs = 5): Promise<void> {
    while (this.running > 0) await sleep(pollMs);
  }

  /**
   * Wait for the pause gate and a free slot; returns the function that frees the slot (call it exactly once).
   * @throws the signal's reason when aborted while waiting.
   */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    this.held++;
    try {
      while (this.pausedGate) await this.pausedGate.promise;
      if (this.running < this.options.maxConcurrency) {
        if (this.running++ === 0) this.busySince = this.clock();
      } else {
        // The releasing sequence hands its slot over directly (running stays counted), keeping FIFO order.
        await new Promise<void>((resolve, reject) => {
          const wake = () => {
            signal?.removeEventListener('abort', onAbort);
            resolve();
          };
          const onAbort = () => {
            this.waiting = this.waiting.filter((w) => w !== wake);
            reject(signal?.reason ?? new Error('aborted'));
          };
          signal?.addEventListener('abort', onAbort, { once: true });
          this.waiting.push(wake);
        });
      }
    } finally {
      this.held--;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) return next();
      if (--this.running === 0 && this.busySince !== null) {
        this.busyMs += this.clock() - this.busySince;
        this.busySince = null;
      }
    };
  }

  snapshot(): TimingSnapshot {
    const now = this.clock();
    const busyMs = this.busyMs + (this.busySince !== null ? now - this.busySince : 0);
    const wallMs = now - this.startedAt;
    return {
      running: this.running,
      queued: this.held,
      busyFraction: wallMs > 0 ? Math.min(1, busyMs / wallMs) : 0,
      busyMs,
      wallMs,
      paused: this.paused,
    };
  }
}
