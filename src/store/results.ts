/** Session results (idempotent per session) and groups (all sessions of a task, handed to the trainer once). */
import type { Database } from 'bun:sqlite';
import type { Clock } from '../core/clock.ts';
import type { SessionResult } from '../core/records.ts';

export class ResultRepository {
  constructor(private readonly db: Database, private readonly clock: Clock) {}

  /**
   * Store the result of a session once.
   * @returns true when stored now; false when the session already had a result (the new one is ignored, the first kept).
   */
  put(result: SessionResult): boolean {
    return (
      this.db
        .query('INSERT INTO results (session_id, task_id, status, node_id, result, created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id) DO NOTHING')
        .run(result.session_id, result.task_id, result.status, result.node_id, JSON.stringify(result), this.clock()).changes > 0
    );
  }

  /** The result of a session, or null. */
  get(sessionId: string): SessionResult | null {
    const row = this.db.query('SELECT result FROM results WHERE session_id = ?').get(sessionId) as { result: string } | null;
    return row === null ? null : (JSON.parse(row.result) as SessionResult);
  }

  /** Results of a task in arrival order. */
  listByTask(taskId: string): SessionResult[] {
    return (this.db.query('SELECT result FROM results WHERE task_id = ? ORDER BY rowid').all(taskId) as { result: string }[]).map((r) => JSON.parse(r.result) as SessionResult);
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
  group_id: string;
  task_id: string;
  /** e.g. 'PENDING' while sessions run, then GROUP_EVALUATED. */
  status: string;
  /** Payload for the trainer: session ids, rewards, advantages, … (JSON). */
  data?: Record<string, unknown>;
}

/** A stored group. Times are Unix ms; `acked_at` is null until the trainer acknowledges it. */
export interface GroupRow {
  group_id: string;
  task_id: string;
  status: string;
  data: Record<string, unknown>;
  created_at: number;
  updated_at: number;
  acked_at: number | null;
}

const groupColumns = 'group_id, task_id, status, data, created_at, updated_at, acked_at';

export class GroupRepository {
  constructor(private readonly db: Database, private readonly clock: Clock) {}

  /** Insert or update a group; `created_at` and `acked_at` of an existing group are kept. */
  upsert(group: GroupInput): void {
    const now = this.clock();
    this.db
      .query(
        `INSERT INTO groups (${groupColumns}) VALUES (?, ?, ?, ?, ?, ?, NULL)
         ON CONFLICT (group_id) DO UPDATE SET task_id = excluded.task_id, status = excluded.status, data = excluded.data, updated_at = excluded.updated_at`,
      )
      .run(group.group_id, group.task_id, group.status, JSON.stringify(group.data ?? {}), now, now);
  }

  /** The group, or null. */
  get(groupId: string): GroupRow | null {
    const row = this.db.query(`SELECT ${groupColumns} FROM groups WHERE group_id = ?`).get(groupId) as RawGroup | null;
    return row === null ? null : decodeGroup(row);
  }

  /** Groups with status GROUP_EVALUATED not yet acknowledged, oldest update first. */
  listReady(): GroupRow[] {
    return (this.db.query(`SELECT ${groupColumns} FROM groups WHERE status = ? AND acked_at IS NULL ORDER BY updated_at, rowid`).all(GROUP_EVALUATED) as RawGroup[]).map(decodeGroup);
  }

  /** Acknowledge a ready group. @returns true when this call acknowledged it; false when unknown, not evaluated or already acknowledged. */
  ack(groupId: string): boolean {
    return this.db.query('UPDATE groups SET acked_at = ? WHERE group_id = ? AND status = ? AND acked_at IS NULL').run(this.clock(), groupId, GROUP_EVALUATED).changes > 0;
  }
}

type RawGroup = Omit<GroupRow, 'data'> & { data: string };

function decodeGroup(row: RawGroup): GroupRow {
  return { ...row, data: JSON.parse(row.data) as Record<string, unknown> };
}
