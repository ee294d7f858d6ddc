/**
 * Rollout-server tables (owner: rollout): gateway nodes (registry + last heartbeat) and trainer callbacks (so the
 * trainer's callback_url is called once per finished task, across restarts). Schema: migration 2 in ../migrations.ts.
 */
import type { Database } from 'bun:sqlite';

/** A registered gateway node. Times are Unix ms; capacity and stages are the node's own JSON objects. */
export interface NodeRecord {
  node_id: string;
  url: string;
  capacity: { init_workers: number; ready_buffer: number; max_run_workers: number; postrun_workers: number };
  stages: { init: number; ready: number; running: number; postrun: number; queued: number };
  healthy: boolean;
  draining: boolean;
  last_heartbeat: number;
  registered_at: number;
}

/** Delivery state of a task's trainer callback. */
export interface TaskCallbackRecord {
  task_id: string;
  /** `superseded`: its task id was submitted again while it was pending (the old run's callback is not sent). */
  state: 'pending' | 'done' | 'failed' | 'superseded';
  attempts: number;
  last_error: string | null;
  updated_at: number;
}

export const ROLLOUT_MIGRATION_SQL = `
  CREATE TABLE rollout_nodes (
    node_id        TEXT PRIMARY KEY,
    url            TEXT NOT NULL,
    capacity       TEXT NOT NULL,
    stages         TEXT NOT NULL,
    healthy        INTEGER NOT NULL,
    draining       INTEGER NOT NULL,
    last_heartbeat INTEGER NOT NULL,
    registered_at  INTEGER NOT NULL
  );
  CREATE TABLE rollout_task_callbacks (
    task_id    TEXT PRIMARY KEY,
    state      TEXT NOT NULL,
    attempts   INTEGER NOT NULL,
    last_error TEXT,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX rollout_task_callbacks_by_state ON rollout_task_callbacks (state);
`;

type RawNode = Omit<NodeRecord, 'capacity' | 'stages' | 'healthy' | 'draining'> & { capacity: string; stages: string; healthy: number; draining: number };

export class NodeRepository {
  constructor(private readonly db: Database) {}

  /** Insert or replace a node. */
  upsert(node: NodeRecord): void {
    this.db
      .query(
        `INSERT INTO rollout_nodes (node_id, url, capacity, stages, healthy, draining, last_heartbeat, registered_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (node_id) DO UPDATE SET url = excluded.url, capacity = excluded.capacity, stages = excluded.stages, healthy = excluded.healthy,
           draining = excluded.draining, last_heartbeat = excluded.last_heartbeat, registered_at = excluded.registered_at`,
      )
      .run(node.node_id, node.url, JSON.stringify(node.capacity), JSON.stringify(node.stages), node.healthy ? 1 : 0, node.draining ? 1 : 0, node.last_heartbeat, node.registered_at);
  }

  get(nodeId: string): NodeRecord | null {
    const row = this.db.query('SELECT * FROM rollout_nodes WHERE node_id = ?').get(nodeId) as RawNode | null;
    return row === null ? null : decodeNode(row);
  }

  /** Every node, by node_id. */
  list(): NodeRecord[] {
    return (this.db.query('SELECT * FROM rollout_nodes ORDER BY node_id').all() as RawNode[]).map(decodeNode);
  }
}

function decodeNode(row: RawNode): NodeRecord {
  return { ...row, capacity: JSON.parse(row.capacity), stages: JSON.parse(row.stages), healthy: row.healthy === 1, draining: row.draining === 1 };
}

export class TaskCallbackRepository {
  constructor(private readonly db: Database) {}

  upsert(row: TaskCallbackRecord): void {
    this.db
      .query(
        `INSERT INTO rollout_task_callbacks (task_id, state, attempts, last_error, updated_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (task_id) DO UPDATE SET state = excluded.state, attempts = excluded.attempts, last_error = excluded.last_error, updated_at = excluded.updated_at`,
      )
      .run(row.task_id, row.state, row.attempts, row.last_error, row.updated_at);
  }

  get(taskId: string): TaskCallbackRecord | null {
    return (this.db.query('SELECT * FROM rollout_task_callbacks WHERE task_id = ?').get(taskId) as TaskCallbackRecord | null) ?? null;
  }

  listByState(state: TaskCallbackRecord['state']): TaskCallbackRecord[] {
    return this.db.query('SELECT * FROM rollout_task_callbacks WHERE state = ? ORDER BY updated_at, task_id').all(state) as TaskCallbackRecord[];
  }
}
