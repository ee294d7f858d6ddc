/**
 * Group advantages over the rewards of one task's sessions (docs/architecture.md#data-model, "Group").
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
 * Which standard deviation GRPO divides by. `population`: sqrt(Σ(r − mean)² / n), as the GRPO paper and Polar do.
 * `unbiased`: sqrt(Σ(r − mean)² / (n − 1)) = population × sqrt(n / (n − 1)), as verl (`torch.std`) and TRL do; 0 for n = 1.
 */
export type GrpoStd = 'population' | 'unbiased';

/**
 * GRPO advantages: (r − mean) / (std + eps), with the population standard deviation unless `std` is 'unbiased'.
 * @param rewards one reward per sample of the group (length n ≥ 0)
 * @param eps added to the std so a group with equal rewards gives all-zero advantages (default 1e-6)
 * @param std population (default) or unbiased (Bessel-corrected) standard deviation; see GrpoStd
 * @returns n advantages, in input order
 * @throws Error on a non-finite reward, eps < 0 or an unknown `std`
 */
export function grpoAdvantages(rewards: readonly number[], eps = 1e-6, std: GrpoStd = 'population'): number[] {
  assertRewards(rewards);
  if (!(eps >= 0) || !Number.isFinite(eps)) throw new Error(`eps must be a finite number ≥ 0, got ${String(eps)}`);
  if (std !== 'population' && std !== 'unbiased') throw new Error(`std must be 'population' or 'unbiased', got ${String(std)}`);
  const n = rewards.length;
  if (n === 0) return [];
  let sum = 0;
  for (const r of rewards) sum += r;
  const mean = sum / n;
  let sq = 0;
  for (const r of rewards) sq += (r - mean) * (r - mean);
  const divisor = std === 'unbiased' ? n - 1 : n;
  const sigma = divisor > 0 ? Math.sqrt(sq / divisor) : 0;
  return rewards.map((r) => (r - mean) / (sigma + eps));
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
