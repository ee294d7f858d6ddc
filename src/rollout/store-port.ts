/**
 * How the rollout server keeps its state in the SQLite store (store/index.ts + store/repos/rollout.ts): the group record
 * the trainer API serves, and the row types it reads.
 */
import type { SessionResult } from '../core/records.ts';
import { GROUP_EVALUATED, type GroupRow, type NodeRecord, type SessionRow, type Store, type TaskCallbackRecord, type TaskRow } from '../store/index.ts';

/**
 * An evaluated group as the trainer API serves it: the usable sessions of ONE task (docs/architecture.md#data-model, "Group").
 * Its key is `task_id` (`/rollout/groups/{task_id}/…`); `group_id` is the trainer's label, which tasks may share.
 */
export interface GroupRecord {
  /** The trainer's label: the task's metadata.group_id, else the task_id. Not unique across tasks. */
  group_id: string;
  /** The key of the group: one group per task. */
  task_id: string;
  /** Unix ms when the group was evaluated. */
  created_at: number;
  /** The one sampled version when `policy_versions` has exactly one entry, else `declared_policy_version`. */
  policy_version: string | null;
  /** metadata.policy_version of the TaskRequest (what the trainer declared), or null. */
  declared_policy_version: string | null;
  /** Distinct non-null versions the engine sampled under, over every trace of the group (traces' metadata.policy_versions), sorted. */
  policy_versions: string[];
  rollout_step: number | null;
  /** True when the task stopped early at early_stop_min_usable_sessions. */
  early_stopped: boolean;
  /** Sessions that entered the group (COMPLETED or trainable TIMEOUT), in sample order. */
  sessions: GroupSession[];
  /** One reward per entry of `sessions`. */
  rewards: number[];
  /** GRPO: (r − mean) / (std + ε), one per session; population std unless the response says `grpo_std: 'unbiased'`. */
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

/**
 * One usable session of a group with its token data, as `GET /rollout/groups/{task_id}/trajectories` serves it: the
 * stored SessionResult (trajectory.traces[] with prompt_ids, response_ids, loss_mask, response_logprobs, finish_reason,
 * metadata) plus the session's place and advantages in its group.
 */
export type GroupTrajectory = SessionResult & {
  sample_index: number;
  /** The outcome reward that entered the group. */
  reward: number;
  /** This session's entry of the group's grpo_advantages (same std as the response's `grpo_std`). */
  grpo_advantage: number;
  /** This session's entry of the group's loo_advantages. */
  loo_advantage: number;
};

/** The rollout server stores through the SQLite store (store/index.ts) plus its own repositories (store/repos/rollout.ts). */
export type RolloutStore = Store;
export type NodeRow = NodeRecord;
export type TaskCallbackRow = TaskCallbackRecord;
export type CallbackState = TaskCallbackRecord['state'];
export type { SessionRow, TaskRow };

/** Store a group as EVALUATED with the GroupRecord as its data, under its task_id. */
export function putGroup(store: Store, group: GroupRecord): void {
  store.groups.upsert({ task_id: group.task_id, group_id: group.group_id, status: GROUP_EVALUATED, data: group as unknown as Record<string, unknown> });
}

/**
 * A stored group as the trainer API serves it, with its acknowledgement time (null until acked). Groups stored before
 * the sampled/declared split get `declared_policy_version` = their `policy_version` and empty `policy_versions`.
 */
export function groupFromRow(row: GroupRow): GroupRecord & { acked_at: number | null } {
  const data = row.data as unknown as Partial<GroupRecord>;
  const policy = data.policy_version ?? null;
  return {
    ...(data as GroupRecord),
    group_id: data.group_id ?? row.group_id,
    task_id: row.task_id,
    declared_policy_version: data.declared_policy_version !== undefined ? data.declared_policy_version : policy,
    policy_versions: data.policy_versions ?? [],
    acked_at: row.acked_at,
  };
}
