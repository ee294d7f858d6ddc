/**
 * Session results (idempotent per session) and groups (all sessions of ONE task, keyed by task_id, handed to the trainer
 * once). A group's `group_id` is only a label (the task's metadata.group_id); several tasks may share it. Schema:
 * migrations 1 and 5.
 */
import type { Database } from 'bun:sqlite';
import type { Clock } from '../core/clock.ts';
import type { SessionResult } from '../core/records.ts';

export class ResultRepository {
  constructor(private readonly db: Database, private readonly clock: Clock) {}

  /**
   * Store the result of a session: the first result of an attempt is kept, and a result of a later dispatch attempt
   * (top-level `attempt`, absent = 0) replaces one of an earlier attempt, so a stale attempt that finished first never
   * shadows the current one. A placeholder (`trajectory.metadata.placeholder: true`: the server recorded a cancel or a
   * refusal before any trajectory existed) is replaced by the same attempt's real result, so no trajectory is lost.
   * Which attempt is current is the rollout server's decision (sessions.attempt).
   * @returns true when stored now; false when the row kept its result (same or later attempt already there).
   */
  put(result: SessionResult): boolean {
    return (
      this.db
        .query(
          `INSERT INTO results (session_id, task_id, status, node_id, result, created_at) VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT (session_id) DO UPDATE SET task_id = excluded.task_id, status = excluded.status, node_id = excluded.node_id,
             result = excluded.result, created_at = excluded.created_at
           WHERE coalesce(json_extract(excluded.result, '$.attempt'), 0) > coalesce(json_extract(results.result, '$.attempt'), 0)
              OR (coalesce(json_extract(excluded.result, '$.attempt'), 0) = coalesce(json_extract(results.result, '$.attempt'), 0)
                  AND json_extract(results.result, '$.trajectory.metadata.placeholder') = 1
                  AND coalesce(json_extract(excluded.result, '$.trajectory.metadata.placeholder'), 0) = 0)`,
        )
        .run(result.session_id, result.task_id, result.status, result.node_id, JSON.stringify(result), this.clock()).changes > 0
    );
  }

  /** The result of a session, or null. */
  get(sessionId: string): SessionResult | null {
    const row = this.db.query('SELECT result FROM results WHERE session_id = ?').get(sessionId) as { result: string } | null;
    return row === null ? null : (JSON.parse(row.result) as SessionResult);
  }

  /** How many results a task has (no row is decoded). */
  countByTask(taskId: string): number {
    return (this.db.query('SELECT count(*) AS n FROM results WHERE task_id = ?').get(taskId) as { n: number }).n;
  }

  /** Results of a task in arrival order. */
  listByTask(taskId: string): SessionResult[] {
    return (this.db.query('SELECT result FROM results WHERE task_id = ? ORDER BY rowid').all(taskId) as { result: string }[]).map((r) => JSON.parse(r.result) as SessionResult);
  }

  /**
   * Relabel the stored result of a session (the `status` column and the JSON's `status`), only when its current status
   * is one of `from`. Used for sessions the rollout server cancelled: their gateway reports ERROR "cancelled".
   * @returns true when a row changed.
   */
  setStatus(sessionId: string, status: SessionResult['status'], from: readonly SessionResult['status'][]): boolean {
    if (from.length === 0) return false;
    const marks = from.map(() => '?').join(', ');
    return (
      this.db
        .query(`UPDATE results SET status = ?, result = json_set(result, '$.status', ?) WHERE session_id = ? AND status IN (${marks})`)
        .run(status, status, sessionId, ...from).changes > 0
    );
  }

  /**
   * Relabel as CANCELLED every stored result whose session the rollout server cancelled (sessions.status =
   * 'CANCELLED'): results a gateway stored in a shared database while no callback reached the server, including a
   * COMPLETED that arrived after the cancel (the group was built without it, so every view says CANCELLED).
   * @returns the number of results relabelled.
   */
  relabelCancelled(): number {
    return this.db
      .query(
        `UPDATE results SET status = 'CANCELLED', result = json_set(result, '$.status', 'CANCELLED')
         WHERE status IN ('ERROR', 'TIMEOUT', 'COMPLETED') AND session_id IN (SELECT session_id FROM sessions WHERE status = 'CANCELLED')`,
      )
      .run().changes;
  }

  /** Every result in arrival order. */
  listAll(): SessionResult[] {
    return (this.db.query('SELECT result FROM results ORDER BY rowid').all() as { result: string }[]).map((r) => JSON.parse(r.result) as SessionResult);
  }
}

/** Status of a group whose sessions all have results and whose advantages are computed; `listReady` returns these. */
export const GROUP_EVALUATED = 'EVALUATED';

/** What the rollout server stores for a group. */
export interface GroupInput {
  /** The key: a group is all sessions of this one task. */
  task_id: string;
  /** The trainer's label (the task's metadata.group_id, default the task_id); not unique. */
  group_id: string;
  /** e.g. 'PENDING' while sessions run, then GROUP_EVALUATED. */
  status: string;
  /** Payload for the trainer: session ids, rewards, advantages, … (JSON). */
  data?: Record<string, unknown>;
}

/** A stored group. Times are Unix ms; `acked_at` is null until the trainer acknowledges it. */
export interface GroupRow {
  task_id: string;
  group_id: string;
  status: string;
  data: Record<string, unknown>;
  created_at: number;
  updated_at: number;
  acked_at: number | null;
}

const groupColumns = 'task_id, group_id, status, data, created_at, updated_at, acked_at';

export class GroupRepository {
  constructor(private readonly db: Database, private readonly clock: Clock) {}

  /** Insert or update the group of `task_id`; `created_at` and `acked_at` of an existing group are kept. */
  upsert(group: GroupInput): void {
    const now = this.clock();
    this.db
      .query(
        `INSERT INTO groups (${groupColumns}) VALUES (?, ?, ?, ?, ?, ?, NULL)
         ON CONFLICT (task_id) DO UPDATE SET group_id = excluded.group_id, status = excluded.status, data = excluded.data, updated_at = excluded.updated_at`,
      )
      .run(group.task_id, group.group_id, group.status, JSON.stringify(group.data ?? {}), now, now);
  }

  /** The group of a task, or null. */
  get(taskId: string): GroupRow | null {
    const row = this.db.query(`SELECT ${groupColumns} FROM groups WHERE task_id = ?`).get(taskId) as RawGroup | null;
    return row === null ? null : decodeGroup(row);
  }

  /** Groups carrying this label (any status), oldest update first. */
  listByGroupId(groupId: string): GroupRow[] {
    return (this.db.query(`SELECT ${groupColumns} FROM groups WHERE group_id = ? ORDER BY updated_at, rowid`).all(groupId) as RawGroup[]).map(decodeGroup);
  }

  /** Groups with status GROUP_EVALUATED not yet acknowledged, oldest update first. */
  listReady(): GroupRow[] {
    return (this.db.query(`SELECT ${groupColumns} FROM groups WHERE status = ? AND acked_at IS NULL ORDER BY updated_at, rowid`).all(GROUP_EVALUATED) as RawGroup[]).map(decodeGroup);
  }

  /** How many groups listReady would return (no row is decoded). */
  countReady(): number {
    return (this.db.query('SELECT count(*) AS n FROM groups WHERE status = ? AND acked_at IS NULL').get(GROUP_EVALUATED) as { n: number }).n;
  }

  /**
   * Acknowledge the ready group of a task.
   * @returns true when this call acknowledged it; false when unknown, not evaluated or already acknowledged.
   */
  ack(taskId: string): boolean {
    return this.db.query('UPDATE groups SET acked_at = ? WHERE task_id = ? AND status = ? AND acked_at IS NULL').run(this.clock(), taskId, GROUP_EVALUATED).changes > 0;
  }
}

type RawGroup = Omit<GroupRow, 'data'> & { data: string };

function decodeGroup(row: RawGroup): GroupRow {
  return { ...row, data: JSON.parse(row.data) as Record<string, unknown> };
}
