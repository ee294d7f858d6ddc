/** Tasks and their sessions (one session per sample), as the rollout server tracks them. */
import type { Database } from 'bun:sqlite';
import type { Clock } from '../core/clock.ts';
import type { TaskRequest } from '../core/records.ts';

/** A stored task. Times are Unix ms. */
export interface TaskRow {
  task: TaskRequest;
  status: string;
  created_at: number;
  updated_at: number;
}

export class TaskRepository {
  constructor(private readonly db: Database, private readonly clock: Clock) {}

  /** Insert or replace the task body and status; `created_at` of an existing task is kept. */
  upsert(task: TaskRequest, status: string): void {
    const now = this.clock();
    this.db
      .query(
        `INSERT INTO tasks (task_id, task, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (task_id) DO UPDATE SET task = excluded.task, status = excluded.status, updated_at = excluded.updated_at`,
      )
      .run(task.task_id, JSON.stringify(task), status, now, now);
  }

  /** The task, or null when unknown. */
  get(taskId: string): TaskRow | null {
    const row = this.db.query('SELECT task, status, created_at, updated_at FROM tasks WHERE task_id = ?').get(taskId) as RawTask | null;
    return row === null ? null : decodeTask(row);
  }

  /** Tasks in creation order, optionally only those with `status`. */
  list(filter: { status?: string } = {}): TaskRow[] {
    const rows =
      filter.status === undefined
        ? (this.db.query('SELECT task, status, created_at, updated_at FROM tasks ORDER BY created_at, rowid').all() as RawTask[])
        : (this.db.query('SELECT task, status, created_at, updated_at FROM tasks WHERE status = ? ORDER BY created_at, rowid').all(filter.status) as RawTask[]);
    return rows.map(decodeTask);
  }

  /** Set the status; returns false when the task is unknown. */
  setStatus(taskId: string, status: string): boolean {
    return this.db.query('UPDATE tasks SET status = ?, updated_at = ? WHERE task_id = ?').run(status, this.clock(), taskId).changes > 0;
  }

  /**
   * Move a finished run of `taskId` aside so the id can run again: its task, sessions, results, group and trainer
   * callback rows are re-keyed to `<taskId>@run<n>` (n = 1, 2, … the first free one), the JSON bodies with them, so
   * the old run stays in the database (exports, audits) and is never returned as the new run's. Its group, when not
   * acknowledged yet, is marked acknowledged (retired): `GET /rollout/groups?ready=1` no longer serves it, and
   * `GET /rollout/groups/<taskId>@run<n>/trajectories` still reads it.
   * Call inside a transaction. @returns the archived id, or null when the task is unknown.
   */
  archiveRun(taskId: string): string | null {
    if (!this.get(taskId)) return null;
    let n = 1;
    while (this.get(`${taskId}@run${n}`)) n++;
    const to = `${taskId}@run${n}`;
    const rekey = (sql: string) => this.db.query(sql).run(to, to, taskId);
    rekey(`UPDATE tasks SET task_id = ?, task = json_set(task, '$.task_id', ?) WHERE task_id = ?`);
    rekey(`UPDATE results SET task_id = ?, result = json_set(result, '$.task_id', ?) WHERE task_id = ?`);
    rekey(`UPDATE groups SET task_id = ?, data = json_set(data, '$.task_id', ?) WHERE task_id = ?`);
    // The old run's group is superseded: a trainer that read it but had not acknowledged it yet would otherwise be
    // served it again under the archived id (and its ack of the reused id would land on the new run).
    this.db.query('UPDATE groups SET acked_at = ? WHERE task_id = ? AND acked_at IS NULL').run(this.clock(), to);
    this.db.query('UPDATE sessions SET task_id = ? WHERE task_id = ?').run(to, taskId);
    // A callback of the old run still pending (queued, retrying or in flight) is not sent any more: the trainer has
    // moved on to the new run, and an in-flight delivery must not write its outcome onto the new run's id.
    this.db.query(`UPDATE rollout_task_callbacks SET task_id = ?, state = CASE state WHEN 'pending' THEN 'superseded' ELSE state END WHERE task_id = ?`).run(to, taskId);
    return to;
  }
}

interface RawTask {
  task: string;
  status: string;
  created_at: number;
  updated_at: number;
}

function decodeTask(row: RawTask): TaskRow {
  return { task: JSON.parse(row.task) as TaskRequest, status: row.status, created_at: row.created_at, updated_at: row.updated_at };
}

/** Fields given when a session is created. */
export interface SessionInsert {
  session_id: string;
  task_id: string;
  /** 0-based sample number within the task. */
  sample_index: number;
  status: string;
  node_id?: string | null;
  /** Dispatch attempt, 0 for the first; re-dispatch after a node loss increments it. */
  attempt?: number;
}

/** A stored session. Times are Unix ms. */
export interface SessionRow {
  session_id: string;
  task_id: string;
  sample_index: number;
  status: string;
  node_id: string | null;
  attempt: number;
  /** Why the session failed, when it did. */
  error: string | null;
  /** Free-form extras (e.g. callback_url, timings) so callers need no migration for small additions. */
  metadata: Record<string, unknown>;
  created_at: number;
  updated_at: number;
}

/** Fields `sessions.update` may change. */
export type SessionPatch = Partial<Pick<SessionRow, 'status' | 'node_id' | 'attempt' | 'error' | 'metadata'>>;

const sessionColumns = 'session_id, task_id, sample_index, status, node_id, attempt, error, metadata, created_at, updated_at';

export class SessionRepository {
  constructor(private readonly db: Database, private readonly clock: Clock) {}

  /** Create a session. @throws SQLiteError (constraint) when `session_id` exists. */
  insert(session: SessionInsert): void {
    const now = this.clock();
    this.db
      .query(`INSERT INTO sessions (${sessionColumns}) VALUES (?, ?, ?, ?, ?, ?, NULL, '{}', ?, ?)`)
      .run(session.session_id, session.task_id, session.sample_index, session.status, session.node_id ?? null, session.attempt ?? 0, now, now);
  }

  /** The session, or null when unknown. */
  get(sessionId: string): SessionRow | null {
    const row = this.db.query(`SELECT ${sessionColumns} FROM sessions WHERE session_id = ?`).get(sessionId) as RawSession | null;
    return row === null ? null : decodeSession(row);
  }

  /** Apply `patch` (fields left out are kept; `metadata` replaces the whole object); returns the new row, or null when unknown. */
  update(sessionId: string, patch: SessionPatch): SessionRow | null {
    const sets: string[] = [];
    const values: (string | number | null)[] = [];
    for (const key of ['status', 'node_id', 'attempt', 'error'] as const) {
      if (patch[key] !== undefined) {
        sets.push(`${key} = ?`);
        values.push(patch[key]);
      }
    }
    if (patch.metadata !== undefined) {
      sets.push('metadata = ?');
      values.push(JSON.stringify(patch.metadata));
    }
    sets.push('updated_at = ?');
    values.push(this.clock());
    // The SET list has at most 6 shapes, so query()'s statement cache stays small.
    const changed = this.db.query(`UPDATE sessions SET ${sets.join(', ')} WHERE session_id = ?`).run(...values, sessionId).changes;
    return changed > 0 ? this.get(sessionId) : null;
  }

  /** Sessions of a task by sample_index. */
  listByTask(taskId: string): SessionRow[] {
    return this.list('task_id = ? ORDER BY sample_index, rowid', taskId);
  }

  /** Sessions with this status, oldest first. */
  listByStatus(status: string): SessionRow[] {
    return this.list('status = ? ORDER BY created_at, rowid', status);
  }

  /** How many sessions have this status (no row is decoded). */
  countByStatus(status: string): number {
    return (this.db.query('SELECT count(*) AS n FROM sessions WHERE status = ?').get(status) as { n: number }).n;
  }

  /**
   * The first `limit` REGISTERED sessions in dispatch order: higher `dispatch_priority` of their task first (absent =
   * 0), then oldest first. Sessions of an unknown task are left out. Reads only the rows it returns, so a dispatch pass
   * costs what it can dispatch, not the length of the queue.
   */
  listQueued(limit: number): SessionRow[] {
    if (limit <= 0) return [];
    const rows = this.db
      .query(
        `SELECT ${sessionColumns.split(', ').map((c) => `s.${c}`).join(', ')} FROM sessions s
         JOIN (SELECT task_id, coalesce(json_extract(task, '$.dispatch_priority'), 0) AS priority FROM tasks
               WHERE task_id IN (SELECT DISTINCT task_id FROM sessions WHERE status = 'REGISTERED')) t ON t.task_id = s.task_id
         WHERE s.status = 'REGISTERED' ORDER BY t.priority DESC, s.created_at, s.rowid LIMIT ?`,
      )
      .all(limit) as RawSession[];
    return rows.map(decodeSession);
  }

  /** Sessions assigned to this node, oldest first. */
  listByNode(nodeId: string): SessionRow[] {
    return this.list('node_id = ? ORDER BY created_at, rowid', nodeId);
  }

  private list(where: string, value: string): SessionRow[] {
    return (this.db.query(`SELECT ${sessionColumns} FROM sessions WHERE ${where}`).all(value) as RawSession[]).map(decodeSession);
  }
}

type RawSession = Omit<SessionRow, 'metadata'> & { metadata: string };

function decodeSession(row: RawSession): SessionRow {
  return { ...row, metadata: JSON.parse(row.metadata) as Record<string, unknown> };
}
