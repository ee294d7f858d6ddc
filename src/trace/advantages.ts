/**
 * Group advantages over the rewards of one task's sessions (ARCHITECTURE.md §2 "Group").
 * Sources: GRPO, Shao et al. 2024 (arXiv 2402.03300) §4.1.2; leave-one-out baseline (RLOO), Ahmadian et al. 2024
 * (arXiv 2402.14740) §3.
 */

function assertRewards(rewards: readonly number[]): void {
  if (!Array.isArray(rewards)) throw new Error('rewards must be an array of numbers');
  rewards.forEach((r, i) => {
    if (typeof r !== 'number' || !Number.isFinite(r)) throw new Error(`rewards[${i}] must be a finite number, got ${String(r)}`);
  });
}

/**
 * GRPO advantages: (r − mean) / (std + eps), with the population standard deviation.
 * @param rewards one reward per sample of the group (length n ≥ 0)
 * @param eps added to the std so a group with equal rewards gives all-zero advantages (default 1e-6)
 * @returns n advantages, in input order
 * @throws Error on a non-finite reward or eps < 0
 */
export function grpoAdvantages(rewards: readonly number[], eps = 1e-6): number[] {
  assertRewards(rewards);
  if (!(eps >= 0) || !Number.isFinite(eps)) throw new Error(`eps must be a finite number ≥ 0, got ${String(eps)}`);
  const n = rewards.length;
  if (n === 0) return [];
  let sum = 0;
  for (const r of rewards) sum += r;
  const mean = sum / n;
  let sq = 0;
  for (const r of rewards) sq += (r - mean) * (r - mean);
  const std = Math.sqrt(sq / n);
  return rewards.map((r) => (r - mean) / (std + eps));
}

/**
 * Leave-one-out advantages: r_i − mean of the other rewards; 0 for a group of one (no baseline exists).
 * @param rewards one reward per sample of the group (length n ≥ 0)
 * @returns n advantages, in input order
 * @throws Error on a non-finite reward
 */
export function leaveOneOutAdvantages(rewards: readonly number[]): number[] {
  assertRewards(rewards);
  const n = rewards.length;
  if (n <= 1) return rewards.map(() => 0);
  let sum = 0;
  for (const r of rewards) sum += r;
  return rewards.map((r) => r - (sum - r) / (n - 1));
}
