/**
 * How the rollout server keeps its state in the SQLite store (contract 1 + store/repos/rollout.ts): the group record
 * the trainer API serves, and the row types it reads.
 */
import { GROUP_EVALUATED, type GroupRow, type NodeRecord, type SessionRow, type Store, type TaskCallbackRecord, type TaskRow } from '../store/index.ts';

/** An evaluated group as the trainer API serves it. */
export interface GroupRecord {
  group_id: string;
  task_id: string;
  /** Unix ms when the group was evaluated. */
  created_at: number;
  policy_version: string | null;
  rollout_step: number | null;
  /** True when the task stopped early at early_stop_min_usable_sessions. */
  early_stopped: boolean;
  /** Sessions that entered the group (COMPLETED or trainable TIMEOUT), in sample order. */
  sessions: GroupSession[];
  /** One reward per entry of `sessions`. */
  rewards: number[];
  /** GRPO: (r − mean) / (std + ε), one per session. */
  grpo_advantages: number[];
  /** Leave-one-out: r − mean of the others, one per session. */
  loo_advantages: number[];
}

export interface GroupSession {
  session_id: string;
  sample_index: number;
  status: string;
  reward: number;
}

/** The rollout server stores through the SQLite store (contract 1) plus its own repositories (store/repos/rollout.ts). */
export type RolloutStore = Store;
export type NodeRow = NodeRecord;
export type TaskCallbackRow = TaskCallbackRecord;
export type CallbackState = TaskCallbackRecord['state'];
export type { SessionRow, TaskRow };

/** Store a group as EVALUATED with the GroupRecord as its data. */
export function putGroup(store: Store, group: GroupRecord): void {
  store.groups.upsert({ group_id: group.group_id, task_id: group.task_id, status: GROUP_EVALUATED, data: group as unknown as Record<string, unknown> });
}

/** A stored group as the trainer API serves it, with its acknowledgement time (null until acked). */
export function groupFromRow(row: GroupRow): GroupRecord & { acked_at: number | null } {
  return { ...(row.data as unknown as GroupRecord), acked_at: row.acked_at };
}
