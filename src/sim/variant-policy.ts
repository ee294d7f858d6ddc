/**
 * The simulator's learnable part: a categorical policy over a behaviour script's variants (solve / wrong_fix /
 * give_up …) with one logit per variant, per policy key (the script's `policy`, else its task id). A session's
 * variant is drawn once, at its first model call, by inverse-CDF sampling of softmax(logits) at the uniform
 * u = hash(seed, session_id) (the same draw `chooseVariant` makes from the script's weights), and the choice's
 * log-probability log softmax(logits)[variant] is added to the logprob of the first token that call samples. So the
 * logprobs a trajectory carries are log π(variant) + Σ token logprobs of the scripted text (the toy language model of
 * policy.ts), and a policy gradient on them moves the logits: ∂/∂logit_k log π(v) = 1[k = v] − π(k).
 *
 * Logits are loaded with `POST /update_weights` (each load is a new weight version) and the policy is active only for
 * keys that have logits; without any, variants come from the script's weights and no choice term is added (the
 * simulator behaves as before). Every version's logits are kept so recorded samples can be re-scored:
 * `GET /sim/policy` exports them and `polar trace verify --sim-policy FILE|URL` adds the same term.
 * Sources: softmax policy gradient, Sutton & Barto, "Reinforcement Learning: An Introduction" 2nd ed. §13.2
 * (http://incompleteideas.net/book/RLbook2020.pdf); the sampling rule mirrors src/sim/script.ts chooseVariant.
 */
import { readFileSync } from 'node:fs';
import type { CompletionRecord } from '../core/records.ts';
import { scoreLogprob } from './policy.ts';
import { hashString, type BehaviourScript } from './script.ts';

/** Logits by policy key, then by variant name. */
export type PolicyLogits = Record<string, Record<string, number>>;

/** A session's drawn variant. */
export interface VariantChoice {
  /** The policy key the logits came from. */
  policy: string;
  variant: string;
  /** log softmax(logits)[variant] (natural log, ≤ 0). */
  logprob: number;
  /** Weight version the choice was drawn under. */
  version: string;
}

/** What `GET /sim/policy` returns and `polar trace verify --sim-policy` reads. */
export interface PolicyExport {
  /** The version in force now. */
  version: string;
  /** Every version that loaded logits, oldest first; a version's logits are the merge of all loads up to it. */
  versions: { version: string; logits: PolicyLogits }[];
  /** Per task id: the script's policy key, seed and variants (name → script weight), for re-scoring and trainers. */
  tasks: Record<string, { policy: string; seed: string | number | null; variants: Record<string, number> }>;
}

/** The policy key of a task: the script's `policy` field, else the task id. */
export function policyKeyOf(taskId: string, script: BehaviourScript): string {
  return script.policy ?? taskId;
}

/** The session's uniform draw in [0, 1): the same hash `chooseVariant` uses. */
export function sessionUniform(script: Pick<BehaviourScript, 'seed'>, sessionId: string): number {
  return hashString(`${script.seed ?? ''}\u0000${sessionId}`) / 4294967296;
}

/**
 * log softmax over the script's variants (in script order); a variant without a logit gets −∞ (never drawn).
 * @throws Error when no variant has a finite logit.
 */
export function logSoftmax(variants: readonly string[], logits: Record<string, number>): Record<string, number> {
  const values = variants.map((v) => (Number.isFinite(logits[v]) ? logits[v]! : -Infinity));
  const max = Math.max(...values);
  if (!Number.isFinite(max)) throw new Error(`no variant of ${variants.join(', ')} has a finite logit`);
  const logZ = max + Math.log(values.reduce((s, x) => s + Math.exp(x - max), 0));
  return Object.fromEntries(variants.map((v, i) => [v, values[i]! - logZ]));
}

/** Inverse-CDF draw from a categorical given as log-probabilities (in key order) at uniform `u` ∈ [0, 1). */
export function drawVariant(logprobs: Record<string, number>, u: number): string {
  const entries = Object.entries(logprobs).filter(([, lp]) => lp > -Infinity);
  let point = u;
  for (const [name, lp] of entries) {
    const p = Math.exp(lp);
    if (point < p) return name;
    point -= p;
  }
  return entries[entries.length - 1]![0];
}

/** The logprob a choice's first sampled token carries: its toy-model logprob plus the choice's, float32 like all. */
export function withChoiceLogprob(tokenLogprob: number, choiceLogprob: number): number {
  return Math.fround(tokenLogprob + choiceLogprob);
}

/**
 * The choice of a session from exported logits (what the simulator drew): null when the policy was not active for it.
 * @param version the weight version the session's first call was sampled under.
 */
export function choiceFromExport(policy: PolicyExport, taskId: string, sessionId: string, version: string | null): VariantChoice | null {
  const task = policy.tasks[taskId];
  if (!task || version === null) return null;
  const snapshot = policy.versions.find((v) => v.version === version);
  const logits = snapshot?.logits[task.policy];
  if (!logits) return null;
  const lps = logSoftmax(Object.keys(task.variants), logits);
  const variant = drawVariant(lps, sessionUniform({ seed: task.seed ?? undefined }, sessionId));
  return { policy: task.policy, variant, logprob: lps[variant]!, version };
}

/** Sessions whose choice is remembered (later turns keep the variant drawn at the first). Oldest are forgotten first. */
const MAX_REMEMBERED = 100_000;

/** The simulator's variant policy: logits per key, their version history, and each session's drawn variant. */
export class VariantPolicy {
  #logits: PolicyLogits = {};
  readonly #versions: { version: string; logits: PolicyLogits }[] = [];
  readonly #choices = new Map<string, VariantChoice>();
  readonly #tasks = new Map<string, { policy: string; seed: string | number | null; variants: Record<string, number> }>();

  /**
   * Load logits (merged over the current ones, key by key: a key given replaces that key's logits) as `version`.
   * @throws Error naming the path of a logit that is not a finite number.
   */
  load(logits: unknown, version: string): void {
    if (!logits || typeof logits !== 'object' || Array.isArray(logits)) throw new Error('policy must be an object {policy_key: {variant: logit}}');
    const next: PolicyLogits = { ...this.#logits };
    for (const [key, table] of Object.entries(logits as Record<string, unknown>)) {
      if (!table || typeof table !== 'object' || Array.isArray(table)) throw new Error(`policy.${key} must be an object {variant: logit}`);
      const entries = Object.entries(table as Record<string, unknown>);
      if (entries.length === 0) throw new Error(`policy.${key} has no variants`);
      for (const [variant, value] of entries) {
        if (typeof value !== 'number' || !Number.isFinite(value)) throw new Error(`policy.${key}.${variant} must be a finite number, got ${JSON.stringify(value)}`);
      }
      next[key] = { ...(table as Record<string, number>) };
    }
    this.#logits = next;
    const existing = this.#versions.findIndex((v) => v.version === version);
    if (existing >= 0) this.#versions.splice(existing, 1);
    this.#versions.push({ version, logits: next });
  }

  /** Whether any logits are loaded. */
  get active(): boolean {
    return this.#versions.length > 0;
  }

  /**
   * The variant of a session: the one remembered from its first call, else a draw under the current logits (then
   * remembered). Null when the task's policy key has no logits (the script's weights decide, no choice term).
   * @throws Error when the script has variants the logits give no finite value to and none that they do.
   */
  choose(taskId: string, script: BehaviourScript, sessionId: string, version: string): { choice: VariantChoice; first: boolean } | null {
    const key = policyKeyOf(taskId, script);
    this.#tasks.set(taskId, { policy: key, seed: script.seed ?? null, variants: Object.fromEntries(Object.entries(script.variants).map(([n, v]) => [n, v.weight])) });
    const remembered = sessionId ? this.#choices.get(sessionId) : undefined;
    if (remembered && remembered.policy === key && remembered.variant in script.variants) return { choice: remembered, first: false };
    const logits = this.#logits[key];
    if (!logits) return null;
    const lps = logSoftmax(Object.keys(script.variants), logits);
    const variant = drawVariant(lps, sessionUniform(script, sessionId));
    const choice: VariantChoice = { policy: key, variant, logprob: lps[variant]!, version };
    if (sessionId) {
      this.#choices.set(sessionId, choice);
      if (this.#choices.size > MAX_REMEMBERED) this.#choices.delete(this.#choices.keys().next().value!);
    }
    return { choice, first: true };
  }

  /** The remembered choice of a session, or null. */
  choiceOf(sessionId: string): VariantChoice | null {
    return this.#choices.get(sessionId) ?? null;
  }

  /** Current logits, version history and the tasks seen (see {@link PolicyExport}). */
  export(version: string): PolicyExport {
    return {
      version,
      versions: this.#versions.map((v) => ({ version: v.version, logits: v.logits })),
      tasks: Object.fromEntries(this.#tasks),
    };
  }

  /** Note a task's script (so the export lists it) before any session of it ran. */
  noteTask(taskId: string, script: BehaviourScript): void {
    this.#tasks.set(taskId, { policy: policyKeyOf(taskId, script), seed: script.seed ?? null, variants: Object.fromEntries(Object.entries(script.variants).map(([n, v]) => [n, v.weight])) });
  }
}

/**
 * A `verifyTraces` rescore function for one session sampled under the variant policy: the toy model's logprob
 * (policy.ts `scoreLogprob`), plus the choice's logprob on token 0 of the session's first completion (lowest seq),
 * drawn as the simulator drew it from `policy`'s logits at that completion's policy_version. Without logits for the
 * session's task at that version, it is plain `scoreLogprob`. The records' policy_version must be the simulator's
 * weight version (set both together, as the Python client's `weight_sync` does).
 */
export function sessionRescorer(
  policy: PolicyExport | null,
  taskId: string | null,
  sessionId: string,
  records: readonly CompletionRecord[],
): (contextIds: ArrayLike<number>, token: number, at?: { record: CompletionRecord; index: number }) => number {
  const first = records.reduce<CompletionRecord | null>((min, r) => (min === null || r.seq < min.seq ? r : min), null);
  const choice = policy && taskId && first ? choiceFromExport(policy, taskId, sessionId, first.policy_version) : null;
  return (contextIds, token, at) => {
    const lp = scoreLogprob(contextIds, token);
    return choice && at && at.index === 0 && at.record.completion_id === first!.completion_id ? withChoiceLogprob(lp, choice.logprob) : lp;
  };
}

/**
 * Read a policy export from a file or an `http(s)://` URL (a running simulator's base URL or its `/sim/policy`).
 * @throws Error naming the source when it cannot be read or is not an export.
 */
export async function readPolicyExport(source: string): Promise<PolicyExport> {
  let raw: unknown;
  try {
    if (/^https?:\/\//.test(source)) {
      const url = source.replace(/\/+$/, '').endsWith('/sim/policy') ? source : `${source.replace(/\/+$/, '')}/sim/policy`;
      const response = await fetch(url, { signal: AbortSignal.timeout(30_000) });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      raw = await response.json();
    } else {
      raw = JSON.parse(readFileSync(source, 'utf8'));
    }
  } catch (error) {
    throw new Error(`cannot read the simulator policy from ${source}: ${error instanceof Error ? error.message : String(error)}`);
  }
  const v = raw as PolicyExport;
  if (!v || typeof v !== 'object' || !Array.isArray(v.versions) || typeof v.tasks !== 'object' || v.tasks === null) {
    throw new Error(`${source}: not a simulator policy export (expected {version, versions: [...], tasks: {...}})`);
  }
  return v;
}
