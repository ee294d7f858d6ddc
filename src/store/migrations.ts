/**
 * Numbered schema migrations. APPEND-ONLY: never edit or reorder a migration that has shipped; add a new one with the
 * next version. Each runs once, in its own IMMEDIATE transaction together with its schema_version row.
 */
import type { Database } from 'bun:sqlite';
import { ROLLOUT_MIGRATION_SQL } from './repos/rollout.ts';

export interface Migration {
  /** 1, 2, 3, … with no gaps. */
  version: number;
  /** Short description, stored in schema_version. */
  name: string;
  sql: string;
}

export const migrations: readonly Migration[] = [
  {
    version: 1,
    name: 'completions, tasks, sessions, results, groups',
    sql: `
      CREATE TABLE completions (
        completion_id     TEXT PRIMARY KEY,
        session_id        TEXT NOT NULL,
        seq               INTEGER NOT NULL,
        dialect           TEXT NOT NULL,
        request_body      TEXT NOT NULL,
        ir_request        TEXT NOT NULL,
        ir_response       TEXT,
        finish_reason     TEXT NOT NULL,
        prompt_ids        BLOB NOT NULL,  -- Int32 little-endian
        response_ids      BLOB NOT NULL,  -- Int32 little-endian
        logprobs          BLOB NOT NULL,  -- Float32 little-endian
        policy_version    TEXT,
        engine_id         TEXT NOT NULL,
        logprob_semantics TEXT NOT NULL,
        mode              TEXT NOT NULL,
        capture_error     TEXT,
        warnings          TEXT NOT NULL,
        engine_ms         REAL NOT NULL,
        total_ms          REAL NOT NULL,
        created_at        INTEGER NOT NULL
      );
      CREATE INDEX completions_by_session ON completions (session_id, seq);

      CREATE TABLE tasks (
        task_id    TEXT PRIMARY KEY,
        task       TEXT NOT NULL,
        status     TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      );
      CREATE INDEX tasks_by_status ON tasks (status);

      CREATE TABLE sessions (
        session_id   TEXT PRIMARY KEY,
        task_id      TEXT NOT NULL,
        sample_index INTEGER NOT NULL,
        status       TEXT NOT NULL,
        node_id      TEXT,
        attempt      INTEGER NOT NULL DEFAULT 0,
        error        TEXT,
        metadata     TEXT NOT NULL DEFAULT '{}',
        created_at   INTEGER NOT NULL,
        updated_at   INTEGER NOT NULL
      );
      CREATE INDEX sessions_by_task ON sessions (task_id, sample_index);
      CREATE INDEX sessions_by_status ON sessions (status);
      CREATE INDEX sessions_by_node ON sessions (node_id);

      CREATE TABLE results (
        session_id TEXT PRIMARY KEY,
        task_id    TEXT NOT NULL,
        status     TEXT NOT NULL,
        node_id    TEXT NOT NULL,
        result     TEXT NOT NULL,
        created_at INTEGER NOT NULL
      );
      CREATE INDEX results_by_task ON results (task_id);

      CREATE TABLE groups (
        group_id   TEXT PRIMARY KEY,
        task_id    TEXT NOT NULL,
        status     TEXT NOT NULL,
        data       TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        acked_at   INTEGER
      );
      CREATE INDEX groups_ready ON groups (status, acked_at);
    `,
  },
  {
    version: 2,
    name: 'rollout nodes and trainer callbacks',
    sql: ROLLOUT_MIGRATION_SQL,
  },
  {
    // Rows written before this keep format 1 (full prompt_ids, plain JSON text) and still read. Format 2 (delta.ts,
    // completions.ts): prompt_ids holds the suffix after `prompt_prefix` tokens of the base record's
    // prompt_ids ++ response_ids; request_body/ir_request/ir_response are BLOBs `[codec][prefix:suffix:middle]`
    // relative to the base's texts. A base is always an earlier, committed row of the same session.
    version: 3,
    name: 'completion records: prefix-delta prompt ids, compressed JSON',
    sql: `
      ALTER TABLE completions ADD COLUMN format INTEGER NOT NULL DEFAULT 1;
      ALTER TABLE completions ADD COLUMN base_id TEXT;
      ALTER TABLE completions ADD COLUMN prompt_prefix INTEGER NOT NULL DEFAULT 0;
    `,
  },
  {
    // A resumed or re-dispatched session runs again under the same session id; its calls are told apart by the
    // dispatch attempt, so a trajectory is built from one attempt only. Rows stored before this are attempt 0.
    version: 4,
    name: 'completion records: dispatch attempt',
    sql: `
      ALTER TABLE completions ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
      CREATE INDEX completions_by_session_attempt ON completions (session_id, attempt, seq);
    `,
  },
  {
    // A group is all sessions of ONE task (docs/architecture.md#data-model), so the key is task_id; group_id stays as the trainer's
    // label (metadata.group_id, default the task_id), which several tasks may share (slime reuses per-step indices).
    // Existing rows keep their data and acknowledgement; a task_id held by two old rows keeps the later-updated one.
    version: 5,
    name: 'groups keyed by task_id; group_id is a label',
    sql: `
      CREATE TABLE groups_by_task (
        task_id    TEXT PRIMARY KEY,
        group_id   TEXT NOT NULL,
        status     TEXT NOT NULL,
        data       TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        acked_at   INTEGER
      );
      INSERT INTO groups_by_task (task_id, group_id, status, data, created_at, updated_at, acked_at)
        SELECT task_id, group_id, status, data, created_at, updated_at, acked_at FROM groups WHERE true ORDER BY updated_at, rowid
        ON CONFLICT (task_id) DO UPDATE SET group_id = excluded.group_id, status = excluded.status, data = excluded.data,
          created_at = excluded.created_at, updated_at = excluded.updated_at, acked_at = excluded.acked_at;
      DROP TABLE groups;
      ALTER TABLE groups_by_task RENAME TO groups;
      CREATE INDEX groups_ready ON groups (status, acked_at);
      CREATE INDEX groups_by_label ON groups (group_id);
    `,
  },
  {
    // completions_by_session_attempt (session_id, attempt, seq) finds every row completions_by_session (session_id,
    // seq) found, and each insert paid for both (~98 µs per insert with it, 58–81 without). Ordering a session's rows
    // by seq is now a sort of that session's index entries (completions.ts reads the newest row through them).
    version: 6,
    name: 'completions: drop the index completions_by_session_attempt makes redundant',
    sql: `
      DROP INDEX IF EXISTS completions_by_session;
    `,
  },
];

/**
 * Bring `db` to the latest schema version. Safe to call on every open and from several processes at once: the version
 * is re-read inside an IMMEDIATE transaction, so a migration another process just applied is skipped.
 * @returns the versions applied by this call (empty when the schema was current).
 * @throws Error when the database has a newer schema than this binary knows, or `list` is not numbered 1..n.
 */
export function migrate(db: Database, list: readonly Migration[] = migrations, now: () => number = Date.now): number[] {
  list.forEach((migration, index) => {
    if (migration.version !== index + 1) throw new Error(`store migrations must be numbered 1..n; #${index} has version ${migration.version}`);
  });
  db.run('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
  const currentVersion = () => (db.query('SELECT MAX(version) AS v FROM schema_version').get() as { v: number | null }).v ?? 0;
  const applied: number[] = [];
  for (const migration of list) {
    db.transaction(() => {
      if (currentVersion() >= migration.version) return;
      db.run(migration.sql);
      db.query('INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)').run(migration.version, migration.name, now());
      applied.push(migration.version);
    }).immediate();
  }
  const version = currentVersion();
  if (version > list.length) {
    throw new Error(`database schema version ${version} is newer than this polar binary knows (${list.length}); upgrade polar`);
  }
  return applied;
}
