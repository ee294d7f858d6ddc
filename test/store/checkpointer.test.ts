/**
 * Background WAL checkpointer (src/store/checkpointer.ts): openStore wiring, the worker's checkpoints reaching the main
 * database file, WAL restart once the worker has backfilled it, fallback to inline autocheckpoints, stop, and that a
 * background store does not keep the process alive.
 */
import { Database } from 'bun:sqlite';
import { afterAll, afterEach, describe, expect, test } from 'bun:test';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { CompletionRecord } from '../../src/core/records.ts';
import { BACKGROUND_SAFETY_PAGES, INLINE_AUTOCHECKPOINT_PAGES, WalCheckpointer, type CheckpointerStats } from '../../src/store/checkpointer.ts';
import { openStore, type Store, type StoreOptions } from '../../src/store/index.ts';

const root = mkdtempSync(join(tmpdir(), 'polar-ckpt-'));
let counter = 0;
const stores: Store[] = [];
const dbs: Database[] = [];
const checkpointers: WalCheckpointer[] = [];

afterEach(async () => {
  for (const checkpointer of checkpointers.splice(0)) await withDeadline(checkpointer.stop(), 5000, 'checkpointer.stop()');
  for (const store of stores.splice(0)) store.close();
  for (const db of dbs.splice(0)) db.close(false);
});

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

function tempDb(): string {
  counter++;
  return join(root, `case-${counter}`, 'polar.db');
}

function open(path: string | ':memory:', options: StoreOptions = {}): Store {
  const store = openStore(path, options);
  stores.push(store);
  return store;
}

/** The store's serving connection (no public accessor). */
function connection(store: Store): Database {
  return (store as unknown as { db: Database }).db;
}

function autocheckpoint(db: Database): number {
  return (db.query('PRAGMA wal_autocheckpoint').get() as { wal_autocheckpoint: number }).wal_autocheckpoint;
}

function pageSize(db: Database): number {
  return (db.query('PRAGMA page_size').get() as { page_size: number }).page_size;
}

async function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Poll `stats()` until `ok` holds; fails (never hangs) after `ms`. Returns the stats that satisfied it. */
async function waitForStats(checkpointer: WalCheckpointer, ok: (stats: CheckpointerStats) => boolean, what: string, ms = 5000): Promise<CheckpointerStats> {
  const deadline = Date.now() + ms;
  let last: CheckpointerStats | undefined;
  while (Date.now() < deadline) {
    last = await withDeadline(checkpointer.stats(), 2000, 'checkpointer.stats()');
    if (ok(last)) return last;
    await Bun.sleep(5);
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}; last stats ${JSON.stringify(last)}`);
}

async function waitFor(ok: () => boolean, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await Bun.sleep(5);
  }
}

/** A deterministic, incompressible-enough ASCII filler of `n` characters (SQLite does not compress anyway). */
function filler(seed: number, n: number): string {
  let x = (seed * 2654435761) >>> 0 || 1;
  let out = '';
  for (let i = 0; i < n; i++) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    out += String.fromCharCode(97 + (x % 26));
  }
  return out;
}

/** A CompletionRecord whose request body alone is ~`bodyChars` characters (about one 4 KiB page at 3,500). */
function record(i: number, bodyChars = 3500): CompletionRecord {
  return {
    completion_id: `cmpl_${i}`,
    session_id: `ps_${i}`,
    seq: 0,
    attempt: 1,
    dialect: 'anthropic-messages',
    request_body: { model: 'claude', messages: [{ role: 'user', content: filler(i + 1, bodyChars) }], stream: true },
    ir_request: { model: 'claude', messages: [] } as unknown as CompletionRecord['ir_request'],
    ir_response: { id: `r${i}`, content: [{ type: 'text', text: 'hi' }] } as unknown as CompletionRecord['ir_response'],
    finish_reason: { unified: 'stop', raw: 'end_turn' },
    prompt_ids: [151644, 872, 198, i],
    response_ids: [9707, 151645],
    logprobs: [Math.fround(-0.125), Math.fround(-0.5)],
    policy_version: 'v1',
    engine_id: 'sim@http://127.0.0.1:8000',
    logprob_semantics: 'processed',
    mode: 'token',
    capture_error: null,
    warnings: [],
    timings: { engine_ms: 1, total_ms: 2 },
    created_at: 1_700_000_000_000 + i,
  };
}

/** Insert `rows` rows of ~`bytes` random bytes each into `scratch` (created if missing), in one transaction. */
function burst(db: Database, rows: number, bytes = 3500, from = 0): void {
  db.run('CREATE TABLE IF NOT EXISTS scratch (id INTEGER PRIMARY KEY, payload BLOB NOT NULL)');
  const insert = db.query('INSERT INTO scratch (id, payload) VALUES (?, randomblob(?))');
  db.transaction(() => {
    for (let i = 0; i < rows; i++) insert.run(from + i, bytes);
  }).immediate();
}

/** A plain WAL database (not a Store) for WalCheckpointer constructed directly. */
function walDb(): { db: Database; path: string } {
  const path = tempDb();
  const store = openStore(path); // creates the directory and a migrated file; closed right away
  store.close();
  const db = new Database(path);
  dbs.push(db);
  // Like openStore: the worker's connection can hold the WAL write lock for a moment (re-reading a wal-index header
  // torn by a concurrent commit), so a writer with busy_timeout 0 may see SQLITE_BUSY.
  db.run('PRAGMA busy_timeout = 5000');
  db.run('PRAGMA journal_mode = WAL');
  return { db, path };
}

/** Rows of the scratch table, read by a fresh read-only connection. */
function scratchRowsOf(path: string): number {
  const reader = new Database(path, { readonly: true });
  try {
    return (reader.query('SELECT COUNT(*) AS n FROM scratch').get() as { n: number }).n;
  } finally {
    reader.close();
  }
}

describe('openStore wiring', () => {
  test('the default (inline) store has no checkpointer and SQLite\'s default autocheckpoint of 1000 pages', () => {
    const store = open(tempDb());
    expect(store.checkpointer).toBeNull();
    expect(INLINE_AUTOCHECKPOINT_PAGES).toBe(1000);
    expect(autocheckpoint(connection(store))).toBe(INLINE_AUTOCHECKPOINT_PAGES);
    const explicit = open(tempDb(), { checkpoint: 'inline' });
    expect(explicit.checkpointer).toBeNull();
    expect(autocheckpoint(connection(explicit))).toBe(INLINE_AUTOCHECKPOINT_PAGES);
  });

  test("':memory:' with checkpoint 'background' has no checkpointer and keeps autocheckpoint 1000", () => {
    const store = open(':memory:', { checkpoint: 'background', checkpointIntervalMs: 10 });
    expect(store.checkpointer).toBeNull();
    expect(autocheckpoint(connection(store))).toBe(INLINE_AUTOCHECKPOINT_PAGES);
  });

  test("checkpoint 'background' starts a running checkpointer and raises autocheckpoint to BACKGROUND_SAFETY_PAGES", async () => {
    const store = open(tempDb(), { checkpoint: 'background', checkpointIntervalMs: 10 });
    expect(store.checkpointer).toBeInstanceOf(WalCheckpointer);
    expect(store.checkpointer!.running).toBe(true);
    expect(store.checkpointer!.fallback).toBeNull();
    expect(BACKGROUND_SAFETY_PAGES).toBeGreaterThan(INLINE_AUTOCHECKPOINT_PAGES);
    expect(autocheckpoint(connection(store))).toBe(BACKGROUND_SAFETY_PAGES);
    const stats = await waitForStats(store.checkpointer!, (s) => s.passes >= 2, 'two passes');
    expect(stats.busy).toBe(0);
    expect(store.writeGate()).toBeNull(); // a near-empty WAL: no write hold
    expect(open(tempDb()).writeGate()).toBeNull(); // inline: never
  });
});

describe('background checkpoints', () => {
  test('the worker copies WAL pages into the main file although the serving connection never reached its cap', async () => {
    const path = tempDb();
    const store = open(path, { checkpoint: 'background', checkpointIntervalMs: 10, completions: { format: 1 } });
    const db = connection(store);
    const page = pageSize(db);
    const sizeAfterOpen = statSync(path).size;
    const checkpointer = store.checkpointer!;
    const before = await withDeadline(checkpointer.stats(), 2000, 'stats()');

    // ~300 records of ~1 page each, one transaction: a few hundred WAL frames, far below both 1000 and the 4000 cap,
    // so the serving connection cannot have checkpointed them itself.
    const n = 300;
    store.transaction(() => {
      for (let i = 0; i < n; i++) store.completions.insert(record(i));
    });
    const walPages = statSync(`${path}-wal`).size / page;
    expect(walPages).toBeGreaterThan(200);
    expect(walPages).toBeLessThan(INLINE_AUTOCHECKPOINT_PAGES);

    // A pass that saw the burst (at least 200 frames in the WAL) and then backfilled it.
    const seen = await waitForStats(checkpointer, (s) => s.passes > before.passes && s.maxWalFrames >= 200, 'a pass over the burst');
    expect(seen.maxWalFrames).toBeLessThan(BACKGROUND_SAFETY_PAGES);
    await waitFor(() => statSync(path).size >= sizeAfterOpen + 200 * page, 'the main database file to grow by 200 pages');
    expect(statSync(path).size).toBeGreaterThan(sizeAfterOpen);
    expect(autocheckpoint(db)).toBe(BACKGROUND_SAFETY_PAGES);
    expect(checkpointer.running).toBe(true);
    expect(checkpointer.fallback).toBeNull();

    // A second, independent connection sees every row.
    const reader = new Database(path, { readonly: true });
    try {
      expect((reader.query('SELECT COUNT(*) AS n FROM completions').get() as { n: number }).n).toBe(n);
      const ids = (reader.query('SELECT completion_id FROM completions ORDER BY created_at').all() as { completion_id: string }[]).map((r) => r.completion_id);
      expect(ids).toEqual(Array.from({ length: n }, (_, i) => `cmpl_${i}`));
    } finally {
      reader.close();
    }
    expect(store.completions.get('cmpl_299')).toEqual(record(299));
  });

  test('control: without the worker the same burst stays in the WAL and the main file does not grow', async () => {
    const path = tempDb();
    const store = open(path, { completions: { format: 1 } });
    const db = connection(store);
    const page = pageSize(db);
    db.run('PRAGMA wal_checkpoint(TRUNCATE)'); // migrations into the main file, so only the burst is in the WAL
    const sizeAfterOpen = statSync(path).size;
    store.transaction(() => {
      for (let i = 0; i < 300; i++) store.completions.insert(record(i));
    });
    expect(statSync(`${path}-wal`).size / page).toBeGreaterThan(200);
    await Bun.sleep(100);
    expect(statSync(path).size).toBe(sizeAfterOpen);
  });

  test('the WAL restarts at the next write once the worker has backfilled it', async () => {
    const path = tempDb();
    const store = open(path, { checkpoint: 'background', checkpointIntervalMs: 10 });
    const db = connection(store);
    const checkpointer = store.checkpointer!;

    burst(db, 400);
    const afterBurst = await waitForStats(checkpointer, (s) => s.walFrames >= 400, 'a pass that sees the burst');
    expect(afterBurst.maxWalFrames).toBeGreaterThanOrEqual(400);
    expect(afterBurst.maxWalFrames).toBeLessThan(BACKGROUND_SAFETY_PAGES);
    // One more pass after the one that saw it: the WAL is fully backfilled and the writer is idle.
    await waitForStats(checkpointer, (s) => s.passes > afterBurst.passes, 'one more pass');

    db.run('INSERT INTO scratch (id, payload) VALUES (?, randomblob(100))', [100_000]);
    const restarted = await waitForStats(checkpointer, (s) => s.walFrames < afterBurst.maxWalFrames, 'walFrames below the burst (WAL restart)');
    expect(restarted.walFrames).toBeLessThan(afterBurst.maxWalFrames);
    expect(restarted.walFrames).toBeLessThan(50);
    expect(restarted.maxWalFrames).toBeGreaterThanOrEqual(afterBurst.maxWalFrames);
    expect((db.query('SELECT COUNT(*) AS n FROM scratch').get() as { n: number }).n).toBe(401);
    expect(checkpointer.fallback).toBeNull();
  });
});

describe('fallback and stop', () => {
  test('a worker that exits unasked falls back to inline autocheckpoints and reports once', async () => {
    const { db, path } = walDb();
    const reasons: string[] = [];
    const checkpointer = new WalCheckpointer(db, path, { intervalMs: 10, onFallback: (reason) => reasons.push(reason) });
    checkpointers.push(checkpointer);
    expect(autocheckpoint(db)).toBe(BACKGROUND_SAFETY_PAGES);
    await waitForStats(checkpointer, (s) => s.passes >= 1, 'a first pass');

    (checkpointer as unknown as { worker: Worker }).worker.terminate();
    await waitFor(() => !checkpointer.running, 'running to turn false');
    expect(typeof checkpointer.fallback).toBe('string');
    expect(checkpointer.fallback!.length).toBeGreaterThan(0);
    expect(autocheckpoint(db)).toBe(INLINE_AUTOCHECKPOINT_PAGES);
    await Bun.sleep(50); // any second report would arrive by now
    expect(reasons).toEqual([checkpointer.fallback!]);

    // After the fallback: stats are zeros, stop() resolves at once, and the database still takes writes.
    expect(await withDeadline(checkpointer.stats(), 1000, 'stats()')).toMatchObject({ passes: 0, walFrames: 0, maxWalFrames: 0, busy: 0 });
    await withDeadline(checkpointer.stop(), 1000, 'stop()');
    burst(db, 10);
    expect((db.query('SELECT COUNT(*) AS n FROM scratch').get() as { n: number }).n).toBe(10);
    expect(reasons.length).toBe(1);
  });

  test('a database not in WAL mode is refused with an error naming journal_mode', () => {
    const path = join(root, `plain-${++counter}.db`);
    const db = new Database(path, { create: true });
    dbs.push(db);
    db.run('CREATE TABLE t (x)');
    expect((db.query('PRAGMA journal_mode').get() as { journal_mode: string }).journal_mode).toBe('delete');
    expect(() => new WalCheckpointer(db, path)).toThrow(/journal_mode/);
    expect(autocheckpoint(db)).toBe(INLINE_AUTOCHECKPOINT_PAGES); // left untouched
  });

  test('stop() resolves, stops running, reports no fallback, and the database still writes and closes', async () => {
    const { db, path } = walDb();
    const reasons: string[] = [];
    const checkpointer = new WalCheckpointer(db, path, { intervalMs: 10, onFallback: (reason) => reasons.push(reason) });
    await waitForStats(checkpointer, (s) => s.passes >= 1, 'a first pass');
    expect(checkpointer.running).toBe(true);

    const stopping = checkpointer.stop();
    expect(checkpointer.running).toBe(false);
    await withDeadline(stopping, 5000, 'stop()');
    await withDeadline(checkpointer.stop(), 1000, 'a second stop()');
    await Bun.sleep(50); // the worker's close event has fired by now; it must not count as a failure
    expect(checkpointer.running).toBe(false);
    expect(checkpointer.fallback).toBeNull();
    expect(reasons).toEqual([]);
    expect(await withDeadline(checkpointer.stats(), 1000, 'stats()')).toMatchObject({ passes: 0, walFrames: 0, maxWalFrames: 0, busy: 0 });

    burst(db, 20);
    expect((db.query('SELECT COUNT(*) AS n FROM scratch').get() as { n: number }).n).toBe(20);
    dbs.splice(dbs.indexOf(db), 1);
    db.close(true);
    expect(scratchRowsOf(path)).toBe(20);
  });

  test('Store.close() stops the checkpointer without a fallback; the worker, last to close, leaves no WAL behind', async () => {
    const path = tempDb();
    const store = openStore(path, { checkpoint: 'background', checkpointIntervalMs: 10 });
    const checkpointer = store.checkpointer!;
    await waitForStats(checkpointer, (s) => s.passes >= 1, 'a first pass');
    burst(connection(store), 50);
    store.close();
    expect(checkpointer.running).toBe(false);
    await withDeadline(checkpointer.stop(), 5000, 'stop() after close');
    await Bun.sleep(50);
    expect(checkpointer.fallback).toBeNull();
    await waitFor(() => !existsSync(`${path}-wal`), 'the -wal file to be removed by the last connection');
    expect(scratchRowsOf(path)).toBe(50);
  });

  test('a worker that cannot open the database reports an error and falls back', async () => {
    const { db } = walDb();
    const reasons: string[] = [];
    const checkpointer = new WalCheckpointer(db, join(root, 'missing-dir', 'nope.db'), { intervalMs: 10, onFallback: (reason) => reasons.push(reason) });
    checkpointers.push(checkpointer);
    await waitFor(() => !checkpointer.running, 'running to turn false');
    expect(checkpointer.fallback).toMatch(/^checkpoint worker/);
    expect(reasons).toEqual([checkpointer.fallback!]);
    expect(autocheckpoint(db)).toBe(INLINE_AUTOCHECKPOINT_PAGES);
  });

  test('a background store that is closed does not keep the process from exiting', () => {
    const dir = mkdtempSync(join(root, 'exit-'));
    const script = join(dir, 'script.ts');
    const index = resolve(import.meta.dir, '../../src/store/index.ts');
    writeFileSync(
      script,
      [
        `import { openStore } from ${JSON.stringify(index)};`,
        `const store = openStore(${JSON.stringify(join(dir, 'polar.db'))}, { checkpoint: 'background', checkpointIntervalMs: 10 });`,
        `if (!store.checkpointer?.running) throw new Error('no checkpointer');`,
        `store.completions.insert(${JSON.stringify(record(7, 100))});`,
        `await new Promise((r) => setTimeout(r, 50));`,
        `store.close();`,
        `console.log('done');`,
      ].join('\n'),
    );
    const started = Date.now();
    const child = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 15_000 });
    const elapsed = Date.now() - started;
    expect(child.error).toBeUndefined();
    expect(child.signal).toBeNull();
    expect(child.stdout.trim()).toBe('done');
    expect(child.stderr).not.toContain('WAL checkpoints run inline again');
    expect(child.status).toBe(0);
    expect(elapsed).toBeLessThan(10_000);
    const reader = new Database(join(dir, 'polar.db'), { readonly: true });
    try {
      expect(reader.query('SELECT completion_id FROM completions').all()).toEqual([{ completion_id: 'cmpl_7' }]);
    } finally {
      reader.close();
    }
  });
});
