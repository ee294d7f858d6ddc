/**
 * A task's own sampling parameters: what a trainer sets for the behaviour policy of every model call its sessions make,
 * whatever the harness asks for. Two spellings in `agent.settings`, both read by the gateway and never passed to
 * the harness:
 * - `sampling_params`: SGLang's names, as slime's `generate(args, sample, sampling_params)` hands them over
 *   (temperature, top_p, top_k, min_p, max_new_tokens, stop, stop_token_ids, skip_special_tokens, no_stop_trim,
 *   spaces_between_special_tokens), plus what verl's agent loop sends (max_tokens, repetition_penalty 1, logprobs).
 *   Source: https://docs.sglang.ai/basic_usage/sampling_params.html
 * - `model_kwargs`: the Python Polar's (NVIDIA-NeMo/ProRL-Agent-Server AgentSpec.settings.model_kwargs: temperature,
 *   top_p, max_tokens, stop, and `extra_body` with top_k, min_p, stop_token_ids, skip_special_tokens, no_stop_trim).
 * A seed: `sampling_params.sampling_seed` (SGLang's name), `model_kwargs.seed`, or, with either or alone,
 * `sampling_seed`: the Python Polar's per-sample seed (an integer ≥ 0, as its rollout
 * manager writes it from `metadata.eval_sampling_seed_base`); here it replaces the `seed` of every model call, which
 * the engine gets as SGLang's `sampling_seed` / vLLM's `seed`.
 *
 * At the proxy (src/proxy/task-sampling.ts) temperature, top_p, top_k, min_p and the seed replace the request's; max tokens is
 * the smaller of the request's and the task's (a harness's short side request keeps its own cap); stop strings are
 * added to the request's. Keys that only shape detokenised text (skip_special_tokens, no_stop_trim,
 * spaces_between_special_tokens) are accepted and have no effect: the proxy captures token ids, and the harness gets
 * its dialect's text either way. Anything else (repetition_penalty, min_new_tokens, non-empty stop_token_ids, n > 1)
 * is an error naming its path: this server would not honour it (repetition_penalty is accepted at 1, logprobs always
 * are: the capture has them).
 */
import { z } from 'zod';
import type { IRSampling } from '../ir.ts';
import { issueList, type IssueAt } from './issues.ts';

/** The task's sampling, in the IR's names (every field optional; `maxTokens` caps new tokens per call). */
export type TaskSampling = Pick<IRSampling, 'temperature' | 'topP' | 'topK' | 'minP' | 'maxTokens' | 'stop' | 'seed'>;

const stopSchema = z.union([z.string().min(1), z.array(z.string().min(1))]).nullish();
/** Accepted only empty: the engine already stops at the chat template's end-of-turn token. */
const noStopIds = z.array(z.number().int()).max(0, 'not supported by this server (the engine stops at the end-of-turn token; give stop strings instead)').nullish();
const textOnly = z.boolean().nullish();
const temperature = z.number().min(0).nullish();
const topP = z.number().gt(0).max(1).nullish();
const topK = z.number().int().min(-1).nullish();
const minP = z.number().min(0).max(1).nullish();
const maxTokens = z.number().int().positive().nullish();
/** A sampling seed: a non-negative integer (the Python Polar refuses negative seeds too). */
const seedSchema = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).nullish();

/** Accepted at its neutral value only (what verl's agent loop sends by default). */
const neutralRepetitionPenalty = z.literal(1, 'only 1 (no penalty) is supported by this server').nullish();

const samplingParamsSchema = z.strictObject({
  temperature, top_p: topP, top_k: topK, min_p: minP, max_new_tokens: maxTokens, max_tokens: maxTokens, stop: stopSchema,
  stop_token_ids: noStopIds, skip_special_tokens: textOnly, no_stop_trim: textOnly, spaces_between_special_tokens: textOnly,
  n: z.literal(1).nullish(), sampling_seed: seedSchema,
  // verl's agent loop: logprobs are always captured here, whatever it asks.
  repetition_penalty: neutralRepetitionPenalty, logprobs: z.union([z.boolean(), z.number().int().min(0)]).nullish(),
});

const modelKwargsSchema = z.strictObject({
  temperature, top_p: topP, max_tokens: maxTokens, stop: stopSchema, seed: seedSchema,
  extra_body: z.strictObject({ top_k: topK, min_p: minP, stop_token_ids: noStopIds, skip_special_tokens: textOnly, no_stop_trim: textOnly, spaces_between_special_tokens: textOnly }).nullish(),
});

/** The settings keys the gateway reads (and removes before the harness sees the settings). */
export const TASK_SAMPLING_KEYS = ['sampling_params', 'model_kwargs', 'sampling_seed'] as const;

/** The two spellings of a task's sampling parameters (one at most). */
const SAMPLING_PARAM_KEYS = ['sampling_params', 'model_kwargs'] as const;


/** The problems of a task's sampling settings as `{path, message}` (empty when there are none or it sets none). */
export function taskSamplingIssues(settings: Record<string, unknown> | undefined): IssueAt[] {
  return readTaskSampling(settings).issues;
}

/**
 * Read a task's sampling from its `agent.settings`. Null when neither key is given.
 * @throws Error `agent.settings.<key>.<path>: message; …` for unknown keys, bad values, unsupported parameters, and
 *   for both spellings at once.
 */
export function taskSamplingOf(settings: Record<string, unknown> | undefined): TaskSampling | null {
  const { sampling, issues } = readTaskSampling(settings);
  if (issues.length > 0) throw new Error(issues.map((i) => `${i.path}: ${i.message}`).join('; '));
  return sampling;
}

function readTaskSampling(settings: Record<string, unknown> | undefined): { sampling: TaskSampling | null; issues: IssueAt[] } {
  if (!settings) return { sampling: null, issues: [] };
  const seed = seedSchema.safeParse(settings.sampling_seed);
  if (!seed.success) return { sampling: null, issues: issueList(seed.error, 'agent.settings.sampling_seed') };
  const withSeed = (r: { sampling: TaskSampling | null; issues: IssueAt[] }) => {
    if (seed.data == null || r.issues.length > 0) return r;
    if (r.sampling?.seed !== undefined && r.sampling.seed !== seed.data) {
      const inner = settings.sampling_params != null ? 'agent.settings.sampling_params.sampling_seed' : 'agent.settings.model_kwargs.seed';
      return { sampling: null, issues: [{ path: 'agent.settings.sampling_seed', message: `conflicts with ${inner}; give one` }] };
    }
    return { sampling: { ...r.sampling, seed: seed.data }, issues: r.issues };
  };
  return withSeed(readSamplingParams(settings));
}

function readSamplingParams(settings: Record<string, unknown>): { sampling: TaskSampling | null; issues: IssueAt[] } {
  const given = SAMPLING_PARAM_KEYS.filter((k) => settings[k] !== undefined && settings[k] !== null);
  if (given.length === 0) return { sampling: null, issues: [] };
  if (given.length > 1) return { sampling: null, issues: [{ path: 'agent.settings.model_kwargs', message: 'conflicts with agent.settings.sampling_params; give one' }] };
  const key = given[0]!;
  const schema = key === 'sampling_params' ? samplingParamsSchema : modelKwargsSchema;
  const parsed = schema.safeParse(settings[key]);
  if (!parsed.success) return { sampling: null, issues: issueList(parsed.error, `agent.settings.${key}`) };
  const p = parsed.data as Record<string, unknown> & { extra_body?: Record<string, unknown> | null };
  const extra = p.extra_body ?? {};
  const out: TaskSampling = {};
  const num = (v: unknown) => (typeof v === 'number' ? v : undefined);
  const set = <K extends keyof TaskSampling>(k: K, v: TaskSampling[K] | undefined) => {
    if (v !== undefined) out[k] = v;
  };
  set('temperature', num(p.temperature));
  set('topP', num(p.top_p));
  set('topK', num(p.top_k ?? extra.top_k));
  set('minP', num(p.min_p ?? extra.min_p));
  set('maxTokens', num(p.max_new_tokens ?? p.max_tokens));
  set('seed', num(p.sampling_seed ?? p.seed));
  if (typeof p.stop === 'string') out.stop = [p.stop];
  else if (Array.isArray(p.stop) && p.stop.length > 0) out.stop = p.stop as string[];
  return { sampling: out, issues: [] };
}

/** Only the gateway-read sampling keys of `settings` (TASK_SAMPLING_KEYS), the part of a task's settings every harness shares. */
export function samplingSettings(settings: Record<string, unknown> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of TASK_SAMPLING_KEYS) if (settings?.[key] !== undefined) out[key] = settings[key];
  return out;
}

/** `agent.settings` without the keys the gateway reads (what the harness adapter gets). */
export function harnessSettings(settings: Record<string, unknown> | undefined): Record<string, unknown> {
  if (!settings) return {};
  const out = { ...settings };
  for (const key of TASK_SAMPLING_KEYS) delete out[key];
  return out;
}
