/**
 * Pause/resume of inference for weight updates, and the policy version in force. `pause()` holds new calls and
 * resolves once the in-flight ones have drained; every call is stamped with the version in force when it entered,
 * and a call that was in flight across a pause or a version change is reported as straddling it.
 * Source: docs/architecture.md#the-proxy (Admin), docs/protocol-notes.md#rules-for-every-engine.
 */
export interface GateTicket {
  /** Policy version in force when the call entered (null when none was ever set). */
  policyVersion: string | null;
  readonly epoch: number;
}

/** `pause(timeoutMs)` gave up: calls were still in flight. */
export class DrainTimeout extends Error {
  constructor(readonly inFlight: number, readonly timeoutMs: number) {
    super(`timed out waiting for inference requests to drain after ${timeoutMs / 1000}s (${inFlight} still in flight; inference stays paused)`);
  }
}

export class InferenceGate {
  private paused = false;
  /** When the gate was paused (ms epoch); null while it is not. */
  private pausedAt: number | null = null;
  private inFlight = 0;
  /** Bumped on every pause and every version change; a ticket from an older epoch straddled one. */
  private epoch = 0;
  private resumeWaiters: Array<() => void> = [];
  private drainWaiters: Array<() => void> = [];

  /** `now`: the clock of `pausedSince`, ms epoch. */
  constructor(private version: string | null = null, private readonly now: () => number = Date.now) {}

  get policyVersion(): string | null {
    return this.version;
  }

  get isPaused(): boolean {
    return this.paused;
  }

  /** When the gate was paused (ms epoch), null while it is not paused. */
  get pausedSince(): number | null {
    return this.pausedAt;
  }

  get inFlightCount(): number {
    return this.inFlight;
  }

  /** Wait while paused, then count the call in flight. Always pair with `leave`. */
  async enter(): Promise<GateTicket> {
    while (this.paused) await new Promise<void>((resolve) => this.resumeWaiters.push(resolve));
    this.inFlight++;
    return { policyVersion: this.version, epoch: this.epoch };
  }

  /** The call finished (or failed). @returns whether it straddled a pause or version change. */
  leave(ticket: GateTicket): { straddled: boolean } {
    this.inFlight--;
    if (this.inFlight === 0) for (const done of this.drainWaiters.splice(0)) done();
    return { straddled: ticket.epoch !== this.epoch };
  }

  /**
   * Hold new calls; resolves when the in-flight ones have finished. @returns how many were in flight.
   * @param timeoutMs give up waiting after this long (ms; default: wait as long as it takes)
   * @throws DrainTimeout when calls are still in flight after `timeoutMs`; the gate stays paused (resume() releases it).
   */
  async pause(timeoutMs?: number): Promise<{ drained: number }> {
    const drained = this.inFlight;
    if (!this.paused) {
      this.paused = true;
      this.pausedAt = this.now();
      this.epoch++;
    }
    if (this.inFlight > 0) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      let waiter: (() => void) | undefined;
      const done = new Promise<void>((resolve) => this.drainWaiters.push((waiter = resolve)));
      const expired = timeoutMs === undefined ? null : new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
      const outcome = await (expired ? Promise.race([done, expired]) : done);
      clearTimeout(timer);
      if (outcome === 'timeout') {
        this.drainWaiters = this.drainWaiters.filter((w) => w !== waiter);
        throw new DrainTimeout(this.inFlight, timeoutMs!);
      }
    }
    return { drained };
  }

  /** Release held calls. */
  resume(): void {
    this.paused = false;
    this.pausedAt = null;
    for (const release of this.resumeWaiters.splice(0)) release();
  }

  setPolicyVersion(version: string): void {
    if (version !== this.version) {
      this.version = version;
      this.epoch++;
    }
  }
}
