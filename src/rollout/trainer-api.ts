/**
 * The trainer's side of the rollout server: evaluated groups (optionally with their token data), advantages under the
 * asked GRPO std, and acknowledgement so a group is served once.
 */
import { grpoAdvantages, type GrpoStd } from '../trace/advantages.ts';
import { HttpError, type RolloutContext } from './context.ts';
import { groupFromRow, type GroupRecord, type GroupTrajectory } from './store-port.ts';

/** A group as the trainer API serves it; `trajectories` only when asked for (`include=trajectories`). */
export type ServedGroup = GroupRecord & { acked_at: number | null; grpo_std: GrpoStd; trajectories?: GroupTrajectory[] };

export class TrainerApi {
  constructor(private readonly ctx: RolloutContext) {}

  /**
   * Evaluated groups not yet acknowledged, oldest first; one per task.
   * @param opts.std GRPO std for `grpo_advantages` (default population, as stored); opts.trajectories adds each group's
   *   GroupTrajectory list (full token data; large).
   */
  readyGroups(opts: { std?: GrpoStd; trajectories?: boolean } = {}): ServedGroup[] {
    return this.ctx.store.groups.listReady().map((row) => this.serve(groupFromRow(row), opts));
  }

  /**
   * The usable sessions of a task's evaluated group with their stored SessionResults (token ids, loss masks, logprobs)
   * and per-session GRPO and leave-one-out advantages, in sample order; acknowledged groups too. Null when the task has
   * no evaluated group.
   */
  groupTrajectories(taskId: string, opts: { std?: GrpoStd } = {}): (ServedGroup & { trajectories: GroupTrajectory[] }) | null {
    const row = this.ctx.store.groups.get(taskId);
    if (!row) return null;
    return this.serve(groupFromRow(row), { ...opts, trajectories: true }) as ServedGroup & { trajectories: GroupTrajectory[] };
  }

  /** The stored group of a task as served (no trajectories), or null. */
  groupOf(taskId: string): ServedGroup | null {
    const row = this.ctx.store.groups.get(taskId);
    return row ? this.serve(groupFromRow(row), {}) : null;
  }

  serve(group: GroupRecord & { acked_at: number | null }, opts: { std?: GrpoStd; trajectories?: boolean }): ServedGroup {
    const std = opts.std ?? 'population';
    const served: ServedGroup = { ...group, grpo_std: std };
    if (std !== 'population') served.grpo_advantages = grpoAdvantages(group.rewards, undefined, std);
    if (!opts.trajectories) return served;
    const results = new Map(this.ctx.store.results.listByTask(group.task_id).map((r) => [r.session_id, r]));
    served.trajectories = group.sessions.flatMap((s, i) => {
      const result = results.get(s.session_id);
      if (!result) return [];
      return [{ ...result, sample_index: s.sample_index, reward: s.reward, grpo_advantage: served.grpo_advantages[i] ?? 0, loo_advantage: group.loo_advantages[i] ?? 0 }];
    });
    return served;
  }

  /**
   * Acknowledge the group of a task so it is never served again. Groups are per task, so the key is the task_id, not
   * the group_id label (which tasks may share).
   * @returns false when it was already acknowledged or is unknown.
   */
  ack(taskId: string): boolean {
    const acked = this.ctx.store.groups.ack(taskId);
    if (acked) this.ctx.events.publish('group_acked', { task_id: taskId, group_id: this.ctx.store.groups.get(taskId)?.group_id ?? taskId });
    return acked;
  }
}

/** `?std=population|unbiased` (default population). @throws HttpError 400 on another value. */
export function stdParam(query: URLSearchParams): GrpoStd {
  const std = query.get('std');
  if (std === null || std === 'population') return 'population';
  if (std === 'unbiased') return 'unbiased';
  throw new HttpError(400, `std must be population or unbiased, got ${std}`);
}
