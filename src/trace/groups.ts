/**
 * Group math: which sessions of a task enter its group, their outcome rewards, the group's policy versions, and its
 * GRPO and leave-one-out advantages. Pure functions over SessionResults; the rollout server stores and serves the
 * GroupRecord, exports and run summaries read rewards the same way.
 * GRPO: https://arxiv.org/abs/2402.03300 (§4.1.2, outcome supervision).
 */
import type { SessionResult, TaskRequest } from '../core/records.ts';
import { grpoAdvantages, leaveOneOutAdvantages } from './advantages.ts';

/**
 * An evaluated group as the trainer API serves it: the usable sessions of ONE task.
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
  /** Chains of the session's trajectory by role (main / side / retry / compaction; src/trace/roles.ts); null when not recorded. */
  chain_roles: Record<string, number> | null;
  /** Traces the trainer receives for the session (after builder.config dropped any). */
  traces: number;
}

/** The group label of a task (GroupRecord.group_id): metadata.group_id, else the task_id. Tasks may share it. */
export function groupLabelOf(task: TaskRequest): string {
  return typeof task.metadata?.group_id === 'string' && task.metadata.group_id ? task.metadata.group_id : task.task_id;
}

/**
 * The key of a task's group in the store (`store.groups.get`) and in `/rollout/groups/{id}/…`: its task_id, since a
 * group is all sessions of one task.
 * @deprecated use `task.task_id`; the label is `groupLabelOf`.
 */
export function groupIdOf(task: TaskRequest): string {
  return task.task_id;
}

/** Distinct non-null policy versions over the traces of `results`, sorted (numeric-aware: "9" before "10"). */
export function sampledPolicyVersions(results: readonly SessionResult[]): string[] {
  const versions = new Set<string>();
  for (const result of results) {
    for (const trace of result.trajectory.traces) {
      for (const v of trace.metadata?.policy_versions ?? []) if (v !== null && v !== undefined) versions.add(String(v));
    }
  }
  return [...versions].sort(new Intl.Collator('en', { numeric: true }).compare);
}

/** Outcome reward of a session: the evaluation's outcome_reward, else the first trace's reward, else 0. */
export function rewardOf(result: SessionResult): number {
  const evaluation = result.trajectory.metadata.evaluation;
  if (evaluation && typeof evaluation.outcome_reward === 'number') return evaluation.outcome_reward;
  return result.trajectory.traces[0]?.reward ?? 0;
}

/**
 * A result enters the group when COMPLETED, or a TIMEOUT whose traces stayed trainable (agent budget) and that has at
 * least one trace: a session that ran out of its agent budget before any completion came back holds nothing the
 * policy sampled, so its reward 0 would only shift the group's mean (and count towards early stop).
 */
export function isUsable(result: SessionResult): boolean {
  if (result.status === 'COMPLETED') return true;
  return result.status === 'TIMEOUT' && result.trajectory.metadata.training_filter?.trainable === true && result.trajectory.traces.length > 0;
}

/**
 * The evaluated group of a finished task with GRPO (population std) and leave-one-out advantages over its usable
 * sessions in sample order; policy versions as declared by the task and as sampled (over the usable sessions' traces).
 * @param sessions the task's sessions (for their sample_index).
 */
export function buildGroup(
  task: TaskRequest,
  sessions: readonly { session_id: string; sample_index: number }[],
  results: readonly SessionResult[],
  earlyStopped: boolean,
  now: number,
): GroupRecord {
  const sampleIndex = new Map(sessions.map((s) => [s.session_id, s.sample_index]));
  const usable = results.filter(isUsable).sort((a, b) => (sampleIndex.get(a.session_id) ?? 0) - (sampleIndex.get(b.session_id) ?? 0));
  const rewards = usable.map(rewardOf);
  const declared = task.metadata?.policy_version === undefined ? null : String(task.metadata.policy_version);
  const sampled = sampledPolicyVersions(usable);
  return {
    group_id: groupLabelOf(task),
    task_id: task.task_id,
    created_at: now,
    policy_version: sampled.length === 1 ? sampled[0]! : declared,
    declared_policy_version: declared,
    policy_versions: sampled,
    rollout_step: task.metadata?.rollout_step ?? null,
    early_stopped: earlyStopped,
    sessions: usable.map((r, i) => ({
      session_id: r.session_id, sample_index: sampleIndex.get(r.session_id) ?? -1, status: r.status, reward: rewards[i]!,
      chain_roles: r.trajectory.metadata.reconstruction_stats?.chain_roles ?? null, traces: r.trajectory.traces.length,
    })),
    rewards,
    grpo_advantages: grpoAdvantages(rewards),
    loo_advantages: leaveOneOutAdvantages(rewards),
  };
}
