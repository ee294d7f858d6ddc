/**
 * How the rollout server keeps its state in the SQLite store (src/store/repos/rollout.ts): the group record
 * the trainer API serves, and the row types it reads.
 */
import type { SessionResult } from '../core/records.ts';
import type { GroupRecord } from '../trace/groups.ts';
import { GROUP_EVALUATED, type GroupRow, type NodeRecord, type SessionRow, type Store, type TaskCallbackRecord, type TaskRow } from '../store/index.ts';

export type { GroupRecord, GroupSession } from '../trace/groups.ts';

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

/** The rollout server stores through the SQLite store (src/store/) plus its own repositories (store/repos/rollout.ts). */
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
