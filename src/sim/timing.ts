/**
 * The simulator's timing model: an engine step loop with continuous batching, computed as a fluid model (no timer per
 * step, one timer for the next event), so its speed does not depend on timer resolution.
 *
 * - At most `maxConcurrency` sequences run at once (vLLM's `max_num_seqs`, SGLang's `max_running_requests`); the rest
 *   wait FIFO. A pause gate holds requests that have not started while a weight update is in progress.
 * - Prefill: one FIFO lane at `prefillTps` prompt tokens/s for the whole engine (prefill is compute-bound, so a second
 *   prompt waits for the first rather than both going at full speed). Cached prefix tokens are not prefilled.
 * - Decode: every decoding sequence gains one token per engine step; a step takes
 *   `step_ms(b) = 1000 / decodeTps + decodeStepPerSeqMs × (b − 1)` with `b` decoding sequences, so a lone sequence
 *   decodes at `decodeTps` and aggregate throughput `b × 1000 / step_ms(b)` rises with the batch towards
 *   `1000 / decodeStepPerSeqMs` tokens/s (memory-bound decode: a bigger batch costs little more per step).
 *   With `decodeStepPerSeqMs = 0` every sequence decodes at `decodeTps` whatever the batch (the old model).
 * - Busy time = time with ≥ 1 running (admitted) sequence; `runningSeqMs` integrates the running count, so
 *   `Δ runningSeqMs / Δ wall` is the mean batch.
 *
 * Sources: continuous batching, https://www.anyscale.com/blog/continuous-batching-llm-inference; decode step time
 * against batch size, https://arxiv.org/abs/2309.06180 (vLLM, Fig. 2). docs/architecture.md#the-simulator.
 */

/** Timers in ms on a monotonic clock; injectable so tests run the model on virtual time. */
export interface TimingScheduler {
  now(): number;
  setTimer(ms: number, fn: () => void): unknown;
  clearTimer(handle: unknown): void;
}

export const realScheduler: TimingScheduler = {
  now: () => performance.now(),
  setTimer: (ms, fn) => setTimeout(fn, Math.max(0, ms)),
  clearTimer: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export interface TimingOptions {
  /** Prompt tokens per second for the whole engine (one FIFO prefill lane); 0 = instant. */
  prefillTps: number;
  /** Generated tokens per second of a sequence decoding alone (step time 1000 / decodeTps ms); 0 = instant. */
  decodeTps: number;
  /** Extra ms per decode step for each further decoding sequence (≥ 0). Default 0: the batch does not slow decode. */
  decodeStepPerSeqMs?: number;
  /** Sequences running at once; ≥ 1. */
  maxConcurrency: number;
  /** Default: performance.now and setTimeout. */
  scheduler?: TimingScheduler;
}

export interface TimingSnapshot {
  running: number;
  /** Requests waiting for a slot or held by a pause. */
  queued: number;
  /** Sequences in the decode batch. */
  decoding: number;
  /** Busy time / wall time since start, 0..1. */
  busyFraction: number;
  busyMs: number;
  wallMs: number;
  /** ∫ running sequences dt, sequence·ms (Δ runningSeqMs / Δ wallMs = mean batch). */
  runningSeqMs: number;
  paused: boolean;
}

export const sleep = (ms: number) => (ms > 0 ? new Promise<void>((r) => setTimeout(r, ms)) : Promise.resolve());

interface Waiter {
  tokens: number;
  resolve: () => void;
  /** When the token is due at the current batch (set by schedule). */
  dueAt?: number;
}

/** One admitted sequence: prefill its uncached prompt, then decode; the slot frees when decode ends or on release. */
export class Sequence {
  /** @internal */ prefillLeft = 0;
  /** @internal */ prefillDone: (() => void) | null = null;
  /** @internal */ decodeTotal = 0;
  /** @internal */ decodeLeft = 0;
  /** @internal */ waiters: Waiter[] = [];
  /** @internal */ finished = false;
  private resolveDone!: () => void;
  /** Resolves when decode has ended (or the sequence was released). */
  readonly done = new Promise<void>((r) => (this.resolveDone = r));

  constructor(private readonly model: TimingModel) {}

  /** Tokens decoded so far (whole tokens). */
  get decoded(): number {
    return Math.min(this.decodeTotal, Math.floor(this.decodeTotal - this.decodeLeft + 1e-3));
  }

  /** Queue `tokens` uncached prompt tokens on the prefill lane; resolves when they are processed. */
  prefill(tokens: number): Promise<void> {
    return this.model.startPrefill(this, tokens);
  }

  /** Join the decode batch for `tokens` tokens (once, after prefill). `done` resolves when they are decoded. */
  decode(tokens: number): void {
    this.model.startDecode(this, tokens);
  }

  /** Resolves once at least `tokens` tokens are decoded (or the sequence ended). */
  until(tokens: number): Promise<void> {
    if (this.finished || this.decoded >= tokens) return Promise.resolve();
    return this.model.addWaiter(this, tokens);
  }

  /** Free the slot now (cancel); a no-op once finished. */
  release(): void {
    this.model.finish(this);
  }

  /** @internal */
  settle(): void {
    this.prefillDone?.();
    this.prefillDone = null;
    for (const w of this.waiters) w.resolve();
    this.waiters = [];
    this.resolveDone();
  }
}

export class TimingModel {
  private readonly admitted = new Set<Sequence>();
  private readonly prefillQueue: Sequence[] = [];
  private readonly decoders = new Set<Sequence>();
  private waiting: (() => void)[] = [];
  private held = 0;
  private busyMs = 0;
  private runningSeqMs = 0;
  private t: number;
  private readonly startedAt: number;
  private readonly scheduler: TimingScheduler;
  private timer: unknown = null;
  private pausedGate: { promise: Promise<void>; release: () => void } | null = null;
  readonly decodeStepPerSeqMs: number;

  /** @throws Error when a rate or the concurrency is out of range. */
  constructor(readonly options: TimingOptions) {
    if (!(options.maxConcurrency >= 1)) throw new Error(`max concurrency must be ≥ 1, got ${options.maxConcurrency}`);
    if (!(options.prefillTps >= 0) || !(options.decodeTps >= 0)) throw new Error('prefill and decode tokens/s must be ≥ 0');
    this.decodeStepPerSeqMs = options.decodeStepPerSeqMs ?? 0;
    if (!(this.decodeStepPerSeqMs >= 0)) throw new Error(`decode step ms per sequence must be ≥ 0, got ${options.decodeStepPerSeqMs}`);
    this.scheduler = options.scheduler ?? realScheduler;
    this.startedAt = this.t = this.scheduler.now();
  }

  /** Time to prefill `tokens` uncached prompt tokens with the lane to itself, ms. */
  prefillMs(tokens: number): number {
    return this.options.prefillTps > 0 ? (tokens / this.options.prefillTps) * 1000 : 0;
  }

  /** Time of one decode step with `batch` decoding sequences, ms. */
  stepMs(batch: number): number {
    const base = this.options.decodeTps > 0 ? 1000 / this.options.decodeTps : 0;
    return base + this.decodeStepPerSeqMs * Math.max(0, batch - 1);
  }

  /** Time to decode `tokens` tokens of one sequence decoding alone, ms. */
  decodeMs(tokens: number): number {
    return tokens * this.stepMs(1);
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
    while (this.admitted.size > 0) await sleep(pollMs);
  }

  /**
   * Wait for the pause gate and a free slot (FIFO); returns the admitted sequence. An abort while running releases it.
   * @throws the signal's reason when aborted while waiting.
   */
  async acquire(signal?: AbortSignal): Promise<Sequence> {
    this.held++;
    try {
      while (this.pausedGate) await this.pausedGate.promise;
      if (this.admitted.size + this.reserved >= this.options.maxConcurrency || this.waiting.length > 0) {
        await new Promise<void>((resolve, reject) => {
          const wake = () => {
            signal?.removeEventListener('abort', onAbort);
            resolve();
          };
          const onAbort = () => {
            this.waiting = this.waiting.filter((w) => w !== wake);
            reject(signal?.reason ?? new Error('aborted'));
          };
          if (signal?.aborted) return onAbort();
          signal?.addEventListener('abort', onAbort, { once: true });
          this.waiting.push(wake);
        });
        this.reserved--;
      }
    } finally {
      this.held--;
    }
    this.advance();
    const seq = new Sequence(this);
    this.admitted.add(seq);
    if (signal) {
      const onAbort = () => seq.release();
      signal.addEventListener('abort', onAbort, { once: true });
      void seq.done.then(() => signal.removeEventListener('abort', onAbort));
    }
    return seq;
  }

  /** @internal Sequence */
  startPrefill(seq: Sequence, tokens: number): Promise<void> {
    if (seq.finished || tokens <= 0 || this.options.prefillTps <= 0) return Promise.resolve();
    this.advance();
    seq.prefillLeft = tokens;
    const done = new Promise<void>((r) => (seq.prefillDone = r));
    this.prefillQueue.push(seq);
    this.schedule();
    return done;
  }

  /** @internal Sequence */
  startDecode(seq: Sequence, tokens: number): void {
    if (seq.finished) return;
    this.advance();
    seq.decodeTotal = seq.decodeLeft = Math.max(0, tokens);
    if (seq.decodeLeft <= 0) return this.finish(seq);
    this.decoders.add(seq);
    if (this.stepMs(this.decoders.size) <= 0) return this.finish(seq);
    this.schedule();
  }

  /** @internal Sequence */
  addWaiter(seq: Sequence, tokens: number): Promise<void> {
    return new Promise<void>((resolve) => {
      seq.waiters.push({ tokens, resolve });
      this.schedule();
    });
  }

  /** @internal Sequence: end the sequence (decode done or released) and hand its slot to the next waiting request. */
  finish(seq: Sequence): void {
    if (seq.finished) return;
    this.advance();
    seq.finished = true;
    this.admitted.delete(seq);
    this.decoders.delete(seq);
    const i = this.prefillQueue.indexOf(seq);
    if (i >= 0) this.prefillQueue.splice(i, 1);
    seq.settle();
    this.handOver();
    this.schedule();
  }

  /** Slots promised to woken waiters that have not been admitted yet (so a newcomer cannot take them meanwhile). */
  private reserved = 0;

  private handOver(): void {
    const next = this.waiting.shift();
    if (next) {
      this.reserved++;
      next();
    }
  }

  /**
   * Move the fluid state from `t` to now, settling every prefill and decode that ends on the way. Each pass runs to the
   * next event or to now; an event ends when its own end time (computed the same way) is reached, so rounding can never
   * stall the loop, and a pass that reaches an event settles at least that one.
   */
  private advance(now = this.scheduler.now()): void {
    for (;;) {
      const b = this.decoders.size;
      const step = this.stepMs(b);
      const perPrefillToken = this.options.prefillTps > 0 ? 1000 / this.options.prefillTps : 0;
      const head = this.prefillQueue[0];
      let next = Number.POSITIVE_INFINITY;
      if (head) next = Math.min(next, this.t + head.prefillLeft * perPrefillToken);
      for (const d of this.decoders) next = Math.min(next, this.t + d.decodeLeft * step);
      const target = Math.max(this.t, Math.min(next, now));
      const dt = target - this.t;
      this.busyMs += this.admitted.size > 0 ? dt : 0;
      this.runningSeqMs += this.admitted.size * dt;
      const from = this.t;
      this.t = target;
      if (head) {
        if (from + head.prefillLeft * perPrefillToken <= target) {
          this.prefillQueue.shift();
          head.prefillLeft = 0;
          head.prefillDone?.();
          head.prefillDone = null;
        } else head.prefillLeft -= dt / perPrefillToken;
      }
      const ended: Sequence[] = [];
      for (const d of this.decoders) {
        if (from + d.decodeLeft * step <= target) {
          d.decodeLeft = 0;
          ended.push(d);
        } else d.decodeLeft -= dt / step;
        this.wakeWaiters(d);
      }
      for (const d of ended) this.finishNow(d);
      if (next > now) return;
    }
  }

  /** Resolve the waiters whose token is decoded (within 0.001 token) or whose scheduled time has come. */
  private wakeWaiters(d: Sequence): void {
    if (d.waiters.length === 0) return;
    const decoded = d.decodeTotal - d.decodeLeft;
    const keep: Waiter[] = [];
    for (const w of d.waiters) (decoded >= w.tokens - 1e-3 || (w.dueAt !== undefined && w.dueAt <= this.t) ? w.resolve() : keep.push(w));
    d.waiters = keep;
  }

  /** finish() without advancing (called from inside advance). */
  private finishNow(seq: Sequence): void {
    seq.finished = true;
    this.admitted.delete(seq);
    this.decoders.delete(seq);
    seq.settle();
    this.handOver();
  }

  /** One timer for the next event: the prefill head ending, a decode ending, or a stream waiter's token. */
  private schedule(): void {
    if (this.timer !== null) this.scheduler.clearTimer(this.timer);
    this.timer = null;
    let next = Number.POSITIVE_INFINITY;
    const head = this.prefillQueue[0];
    if (head && this.options.prefillTps > 0) next = Math.min(next, this.t + (head.prefillLeft * 1000) / this.options.prefillTps);
    const step = this.stepMs(this.decoders.size);
    for (const d of this.decoders) {
      next = Math.min(next, this.t + d.decodeLeft * step);
      for (const w of d.waiters) {
        w.dueAt = this.t + Math.max(0, w.tokens - (d.decodeTotal - d.decodeLeft)) * step;
        next = Math.min(next, w.dueAt);
      }
    }
    if (!Number.isFinite(next)) return;
    this.timer = this.scheduler.setTimer(Math.max(0, next - this.scheduler.now()), () => {
      this.timer = null;
      this.advance();
      this.schedule();
    });
  }

  snapshot(): TimingSnapshot {
    const now = this.scheduler.now();
    this.advance(now);
    const wallMs = now - this.startedAt;
    return {
      running: this.admitted.size,
      queued: this.held,
      decoding: this.decoders.size,
      busyFraction: wallMs > 0 ? Math.min(1, this.busyMs / wallMs) : 0,
      busyMs: this.busyMs,
      wallMs,
      runningSeqMs: this.runningSeqMs,
      paused: this.paused,
    };
  }
}
