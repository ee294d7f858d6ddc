/**
 * The SQLite store (bun:sqlite, WAL): the only module that touches SQLite. Repositories for completion records, tasks,
 * sessions, results and groups. Design: docs/architecture.md#data-model, docs/architecture.md#the-rollout-server (persistence).
 */
import { Database } from 'bun:sqlite';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { systemClock, type Clock } from '../core/clock.ts';
import { CompletionRepository, type CompletionRepositoryOptions } from './completions.ts';
import { WalCheckpointer } from './checkpointer.ts';
import { migrate } from './migrations.ts';
import { GroupRepository, ResultRepository } from './results.ts';
import { SessionRepository, TaskRepository } from './tasks.ts';
import { NodeRepository, TaskCallbackRepository } from './repos/rollout.ts';

export { CompletionRepository, MAX_BASE_DEPTH, type CompletionInsert, MIN_SHARED_PROMPT_TOKENS, type CompletionRepositoryOptions } from './completions.ts';
export { migrations, type Migration } from './migrations.ts';
export { BACKGROUND_SAFETY_PAGES, HOLD_PAGES, INLINE_AUTOCHECKPOINT_PAGES, MAX_HOLD_MS, WalCheckpointer, type CheckpointerOptions, type CheckpointerStats } from './checkpointer.ts';
export { GROUP_EVALUATED, GroupRepository, ResultRepository, type GroupInput, type GroupRow } from './results.ts';
export { SessionRepository, TaskRepository, type SessionInsert, type SessionPatch, type SessionRow, type TaskRow } from './tasks.ts';
export { NodeRepository, TaskCallbackRepository, type NodeRecord, type TaskCallbackRecord } from './repos/rollout.ts';

export interface StoreOptions {
  /** Timestamps of tasks, sessions, results and groups (Unix ms); inject for tests. */
  clock?: Clock;
  /** How long a writer waits for another process's lock before SQLITE_BUSY, in ms (default 5000). */
  busyTimeoutMs?: number;
  /** Completion row format, compression and base cache (completions.ts); the defaults suit the proxy. */
  completions?: CompletionRepositoryOptions;
  /**
   * Who checkpoints the WAL: 'inline' (SQLite's default: the commit that passes 1,000 WAL pages does, ~30 ms of
   * fsync on the caller's thread) or 'background' (a worker thread, checkpointer.ts; for serving processes).
   * Ignored for ':memory:'. Default 'inline'.
   */
  checkpoint?: 'inline' | 'background';
  /** Background checkpoint interval, in ms (default 100). */
  checkpointIntervalMs?: number;
  /** WAL frames at which the background checkpointer holds gated writes (default HOLD_PAGES, 4,000). */
  checkpointHoldPages?: number;
}

export class Store {
  readonly completions: CompletionRepository;
  readonly tasks: TaskRepository;
  readonly sessions: SessionRepository;
  readonly results: ResultRepository;
  readonly groups: GroupRepository;
  /** Rollout server: gateway node registry (owner: rollout, repos/rollout.ts). */
  readonly nodes: NodeRepository;
  /** Rollout server: trainer callback delivery state (owner: rollout, repos/rollout.ts). */
  readonly taskCallbacks: TaskCallbackRepository;
  /** Schema version after migration. */
  readonly schemaVersion: number;
  /** The background WAL checkpointer (StoreOptions.checkpoint 'background'), else null. */
  checkpointer: WalCheckpointer | null = null;

  /** Use openStore. */
  constructor(private readonly db: Database, clock: Clock, schemaVersion: number, completionOptions: CompletionRepositoryOptions = {}) {
    this.completions = new CompletionRepository(db, completionOptions);
    this.tasks = new TaskRepository(db, clock);
    this.sessions = new SessionRepository(db, clock);
    this.results = new ResultRepository(db, clock);
    this.groups = new GroupRepository(db, clock);
    this.nodes = new NodeRepository(db);
    this.taskCallbacks = new TaskCallbackRepository(db);
    this.schemaVersion = schemaVersion;
  }

  /**
   * Run `fn` in one IMMEDIATE transaction (a savepoint when nested): all its writes commit together when it returns, or
   * none when it throws (the error is rethrown). `fn` must be synchronous.
   */
  transaction<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }

  /**
   * Null when a write may go now, else a promise resolved when the background checkpointer's write hold ends
   * (checkpointer.ts): writers that can wait without blocking a thread await it before inserting. Never rejects.
   */
  writeGate(): Promise<void> | null {
    return this.checkpointer?.writeGate() ?? null;
  }

  /**
   * Close the database. The WAL is checkpointed into the main file first (SQLite does that only for the last
   * connection, and a background checkpointer's worker may still hold one: it is told to stop, and the serving
   * connection copies what is left itself, waiting up to busy_timeout for the worker's pass).
   */
  close(): void {
    if (this.checkpointer !== null) {
      void this.checkpointer.stop();
      try {
        this.db.run('PRAGMA wal_checkpoint(TRUNCATE)');
      } catch {
        // Busy past busy_timeout: the WAL stays, and the next open replays it (nothing is lost).
      }
    }
    this.db.close(false);
  }
}

/**
 * Open (creating when missing, with its parent directory) and migrate a store.
 * Pragmas: journal_mode=WAL (readers never block the writer), synchronous=NORMAL (a committed transaction survives a
 * process kill; only an OS crash may lose the last ones), busy_timeout; with `checkpoint: 'background'`,
 * a raised wal_autocheckpoint and a checkpoint worker (checkpointer.ts).
 * Source: https://www.sqlite.org/wal.html, https://www.sqlite.org/pragma.html#pragma_synchronous.
 * @param path a file path, or ':memory:' for a private in-memory store (tests).
 * @throws Error naming `path` when the file is not a database; Error when it was migrated by a newer polar.
 */
export function openStore(path: string | ':memory:', options: StoreOptions = {}): Store {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path, { create: true });
  try {
    db.run(`PRAGMA busy_timeout = ${Math.max(0, Math.trunc(options.busyTimeoutMs ?? 5000))}`);
    db.run('PRAGMA journal_mode = WAL');
    db.run('PRAGMA synchronous = NORMAL');
    const clock = options.clock ?? systemClock;
    migrate(db, undefined, clock);
    const { v } = db.query('SELECT MAX(version) AS v FROM schema_version').get() as { v: number };
    const store = new Store(db, clock, v, options.completions);
    if (options.checkpoint === 'background' && path !== ':memory:') {
      store.checkpointer = new WalCheckpointer(db, path, {
        intervalMs: options.checkpointIntervalMs,
        holdPages: options.checkpointHoldPages,
        busyTimeoutMs: options.busyTimeoutMs,
        onFallback: (reason) => console.error(`polar: store ${path}: ${reason}; WAL checkpoints run inline again`),
      });
    }
    return store;
  } catch (error) {
    db.close(false);
    // SQLite's own message does not say which file (a CLI user passed it with --db).
    if ((error as { code?: unknown }).code === 'SQLITE_NOTADB') throw new Error(`${path}: not a polar store (SQLite: file is not a database)`, { cause: error });
    throw error;
  }
}
