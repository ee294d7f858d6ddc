/**
 * WAL checkpoints off the request thread. In WAL mode a commit only appends frames to `<db>-wal`; a checkpoint copies
 * them back into the database file and, under `synchronous=NORMAL`, fsyncs both files. SQLite runs that checkpoint
 * inline in whichever commit pushes the WAL past `wal_autocheckpoint` pages (default 1,000): measured here, one
 * insert in ~300 then blocks ~30 ms (mostly fsync wait), ~100 µs per insert on average and the whole tail of a
 * proxy's latency at 1k req/s.
 * With a background checkpointer a Bun Worker with its own connection to the same file runs
 * `PRAGMA wal_checkpoint(PASSIVE)` every `intervalMs` (PASSIVE never waits for the writer or readers, and the writer
 * never waits for it). Durability is unchanged: a commit is in the WAL before `run()` returns either way; the
 * checkpoint only moves it into the main file.
 * Under continuous writes a PASSIVE pass never sees the writer idle, so the WAL is never fully copied when the writer
 * starts its next commit, and SQLite only restarts the WAL from its beginning when it is: without more, the WAL
 * grows without bound (measured: 260 MB in 8 s at 1,000 inserts/s). So once the WAL holds `holdPages` frames, the
 * worker asks for a **write hold**: callers that go through `writeGate()` (the proxy's recorder) wait while the
 * worker runs one more pass, which then copies everything; the first write after the hold restarts the WAL. A hold
 * lasts one pass (a few ms, mostly the worker's fsync; at most MAX_HOLD_MS) and delays only the commits that fall
 * in it, never the request thread. As a last bound the serving connection still checkpoints inline at
 * BACKGROUND_SAFETY_PAGES (writes that bypass the gate, a hold that timed out). If the worker fails or exits unasked,
 * the serving connection goes back to SQLite's inline autocheckpoints.
 * The worker costs ~8 MB of RSS (its own JS heap).
 * Source: https://www.sqlite.org/wal.html#checkpointing, https://www.sqlite.org/pragma.html#pragma_wal_checkpoint,
 * https://bun.sh/docs/api/workers.
 */
import type { Database } from 'bun:sqlite';

/** SQLite's default `wal_autocheckpoint`, in pages: what the serving connection goes back to when the worker fails. */
export const INLINE_AUTOCHECKPOINT_PAGES = 1000;

/** WAL frames (pages) at which the worker asks for a write hold by default (16 MiB at 4 KiB pages). */
export const HOLD_PAGES = 4000;

/**
 * The serving connection's `wal_autocheckpoint` while the worker runs, in pages: the last bound on the WAL when
 * holds do not restart it (the writer then checkpoints inline once, copying only what the worker has not).
 */
export const BACKGROUND_SAFETY_PAGES = 16000;

/** The longest a write hold lasts, in ms, should the worker not answer. */
export const MAX_HOLD_MS = 1000;

export interface CheckpointerOptions {
  /** How often the worker checkpoints, in ms (default 100). */
  intervalMs?: number;
  /** The worker connection's busy_timeout, in ms (default 5000). */
  busyTimeoutMs?: number;
  /** WAL frames at which a write hold is asked for (default HOLD_PAGES). */
  holdPages?: number;
  /** Called once when the worker fails or exits unasked (after inline autocheckpoints are back on). */
  onFallback?: (reason: string) => void;
}

/** Counters of one checkpointer, as last reported by its worker. */
export interface CheckpointerStats {
  /** Checkpoint passes run. */
  passes: number;
  /** Frames (pages) in the WAL at the last pass (0 right after the writer restarted the WAL). */
  walFrames: number;
  /** The most frames the WAL held at any pass. */
  maxWalFrames: number;
  /** Passes that found the WAL restarted (fewer frames than the pass before). */
  restarts: number;
  /** Passes that found another checkpointer busy. */
  busy: number;
  /** Write holds so far, and their total duration in ms (kept by the serving side). */
  holds: number;
  heldMs: number;
  /** Holds whose drain pass could not copy the whole WAL (a write that bypasses the gate, a long reader). */
  incompleteDrains: number;
}

const NO_WORKER_STATS = { passes: 0, walFrames: 0, maxWalFrames: 0, restarts: 0, busy: 0 };

// The worker is a Blob module so the compiled `dist/polar` needs no second entry point. Messages in: {type:'start',
// path, intervalMs, busyTimeoutMs, holdPages}, {type:'drain'} (run a pass now: the writer is holding), {type:'stats'},
// {type:'stop'}; out: {type:'full', log} (the WAL reached holdPages), {type:'drained', log, checkpointed},
// {type:'stats', ...}, {type:'error', message}, {type:'stopped'}.
const WORKER_SOURCE = `
import { Database } from 'bun:sqlite';
let db = null;
let timer = null;
const stats = { passes: 0, walFrames: 0, maxWalFrames: 0, restarts: 0, busy: 0 };
let query = null;
let holdPages = 0;
let intervalMs = 100;
// After a drain, regular passes pause for a while: a pass that runs while the held writes go in would keep the
// first of them from restarting the WAL.
let pausedUntil = 0;
function pass() {
  const row = query.get();
  stats.passes++;
  if (row.busy) stats.busy++;
  if (row.log >= 0) {
    if (row.log < stats.walFrames) stats.restarts++;
    stats.walFrames = row.log;
    if (row.log > stats.maxWalFrames) stats.maxWalFrames = row.log;
  }
  return row;
}
function fail(error) {
  clearInterval(timer);
  postMessage({ type: 'error', message: String(error && error.message || error) });
}
self.onmessage = (event) => {
  const message = event.data;
  try {
    if (message.type === 'start') {
      db = new Database(message.path, { readwrite: true, create: false });
      db.run('PRAGMA busy_timeout = ' + message.busyTimeoutMs);
      query = db.query('PRAGMA wal_checkpoint(PASSIVE)');
      holdPages = message.holdPages;
      intervalMs = message.intervalMs;
      timer = setInterval(() => {
        if (performance.now() < pausedUntil) return;
        try {
          const before = stats.walFrames;
          const row = pass();
          // Each pass copies the WAL to the end it sees, so a WAL that grew since the last pass took writes that did
          // not restart it: that is when a hold is asked. A WAL that did not grow (the writer is idle) restarts at
          // the next write by itself.
          if (row.log >= holdPages && row.log > before) postMessage({ type: 'full', log: row.log });
        } catch (error) { fail(error); }
      }, intervalMs);
    } else if (message.type === 'drain') {
      const row = query === null ? { log: 0, checkpointed: 0 } : pass();
      pausedUntil = performance.now() + intervalMs;
      postMessage({ type: 'drained', log: row.log, checkpointed: row.checkpointed });
    } else if (message.type === 'stats') {
      postMessage({ type: 'stats', ...stats });
    } else if (message.type === 'stop') {
      if (timer !== null) clearInterval(timer);
      if (db !== null) db.close(false);
      db = null;
      postMessage({ type: 'stopped' });
      self.close();
    }
  } catch (error) {
    fail(error);
  }
};
`;

let workerUrl: string | undefined;

/**
 * A background WAL checkpointer for the database at `path`, whose serving connection is `db` (see the module doc).
 * Sets `wal_autocheckpoint = BACKGROUND_SAFETY_PAGES` on `db` while the worker runs. The worker does not keep the
 * process alive.
 * @throws Error when `db` is not in WAL mode (the caller opens it with journal_mode=WAL first).
 */
export class WalCheckpointer {
  private readonly worker: Worker;
  private state: 'running' | 'stopping' | 'failed' | 'stopped' = 'running';
  private statsWaiters: ((stats: typeof NO_WORKER_STATS) => void)[] = [];
  private stopWaiters: (() => void)[] = [];
  private fallbackReason: string | null = null;
  private hold: { promise: Promise<void>; release: () => void; timer: ReturnType<typeof setTimeout>; since: number } | null = null;
  private holds = 0;
  private heldMs = 0;
  private incompleteDrains = 0;

  constructor(
    private readonly db: Database,
    path: string,
    private readonly options: CheckpointerOptions = {},
  ) {
    const mode = (db.query('PRAGMA journal_mode').get() as { journal_mode: string }).journal_mode;
    if (mode !== 'wal') throw new Error(`background checkpoints need journal_mode=WAL, the database is in ${mode}`);
    workerUrl ??= URL.createObjectURL(new Blob([WORKER_SOURCE], { type: 'application/javascript' }));
    this.worker = new Worker(workerUrl, { smol: true });
    this.worker.unref();
    this.worker.addEventListener('message', (event: MessageEvent) => this.onMessage(event.data as { type: string } & Record<string, unknown>));
    this.worker.addEventListener('error', (event: ErrorEvent) => this.fail(`checkpoint worker error: ${event.message}`));
    this.worker.addEventListener('close', () => {
      if (this.state === 'running') this.fail('checkpoint worker exited');
      else if (this.state === 'stopping') this.state = 'stopped';
      this.settleStop();
    });
    db.run(`PRAGMA wal_autocheckpoint = ${BACKGROUND_SAFETY_PAGES}`);
    this.worker.postMessage({
      type: 'start',
      path,
      intervalMs: Math.max(1, Math.trunc(options.intervalMs ?? 100)),
      busyTimeoutMs: Math.max(0, Math.trunc(options.busyTimeoutMs ?? 5000)),
      holdPages: Math.max(1, Math.trunc(options.holdPages ?? HOLD_PAGES)),
    });
  }

  /**
   * Null when a write may go now, else a promise that resolves when the current write hold ends (see the module
   * doc). Writers that can wait (the proxy's recorder) await it before their insert; it never rejects.
   */
  writeGate(): Promise<void> | null {
    return this.hold?.promise ?? null;
  }

  /** True while the worker checkpoints (false once stopped or fallen back to inline checkpoints). */
  get running(): boolean {
    return this.state === 'running';
  }

  /** Why the checkpointer fell back to inline autocheckpoints, or null. */
  get fallback(): string | null {
    return this.fallbackReason;
  }

  /** The worker's counters (zeros once it is gone) and the holds. */
  stats(): Promise<CheckpointerStats> {
    const withHolds = (worker: typeof NO_WORKER_STATS): CheckpointerStats => ({ ...worker, holds: this.holds, heldMs: this.heldMs, incompleteDrains: this.incompleteDrains });
    if (this.state !== 'running') return Promise.resolve(withHolds(NO_WORKER_STATS));
    return new Promise((resolve) => {
      this.statsWaiters.push((worker) => resolve(withHolds(worker)));
      this.worker.postMessage({ type: 'stats' });
    });
  }

  /**
   * Stop the worker: it finishes its pass and closes its connection. Resolves when it has; the serving connection
   * keeps its raised `wal_autocheckpoint` (call before closing it).
   */
  stop(): Promise<void> {
    if (this.state === 'stopped' || this.state === 'failed') return Promise.resolve();
    const done = new Promise<void>((resolve) => this.stopWaiters.push(resolve));
    if (this.state === 'running') {
      this.state = 'stopping';
      this.endHold();
      this.worker.postMessage({ type: 'stop' });
    }
    return done;
  }

  private startHold(): void {
    if (this.hold !== null || this.state !== 'running') return;
    let release!: () => void;
    const promise = new Promise<void>((resolve) => (release = resolve));
    this.hold = { promise, release, since: performance.now(), timer: setTimeout(() => this.endHold(), MAX_HOLD_MS) };
    this.holds++;
    this.worker.postMessage({ type: 'drain' });
  }

  private endHold(): void {
    const hold = this.hold;
    if (hold === null) return;
    this.hold = null;
    clearTimeout(hold.timer);
    this.heldMs += performance.now() - hold.since;
    hold.release();
  }

  private onMessage(message: { type: string } & Record<string, unknown>): void {
    if (message.type === 'stats') {
      const stats = { passes: Number(message.passes), walFrames: Number(message.walFrames), maxWalFrames: Number(message.maxWalFrames), restarts: Number(message.restarts), busy: Number(message.busy) };
      for (const resolve of this.statsWaiters.splice(0)) resolve(stats);
    } else if (message.type === 'full') {
      this.startHold();
    } else if (message.type === 'drained') {
      if (Number(message.checkpointed) < Number(message.log)) this.incompleteDrains++;
      this.endHold();
    } else if (message.type === 'error') {
      this.fail(`checkpoint worker: ${String(message.message)}`);
    } else if (message.type === 'stopped') {
      this.state = 'stopped';
      this.settleStop();
    }
  }

  private fail(reason: string): void {
    if (this.state !== 'running') return;
    this.state = 'failed';
    this.fallbackReason = reason;
    try {
      this.db.run(`PRAGMA wal_autocheckpoint = ${INLINE_AUTOCHECKPOINT_PAGES}`);
    } catch {
      // The serving connection is closed: nothing left to checkpoint through it.
    }
    this.worker.terminate();
    this.endHold();
    for (const resolve of this.statsWaiters.splice(0)) resolve(NO_WORKER_STATS);
    this.options.onFallback?.(reason);
    this.settleStop();
  }

  private settleStop(): void {
    if (this.state === 'running' || this.state === 'stopping') return;
    for (const resolve of this.stopWaiters.splice(0)) resolve();
  }
}
