/**
 * The token-in/token-out endpoints token mode speaks, one codec per engine: SGLang `POST /generate` (input_ids),
 * vLLM `POST /v1/completions` with an int[] prompt (also the simulator's), and llama.cpp `POST /completion`. Every
 * sampling parameter is sent explicitly (engine defaults differ: SGLang caps at 128 new tokens, vLLM at 16, llama.cpp
 * uses top_k 40, top_p 0.95, min_p 0.05), turns end on the tokenizer's stop ids and never on stop strings, and every
 * length that comes back is cross-checked. Sources: docs/protocol-notes.md#inference-engines;
 * https://docs.sglang.ai/basic_usage/native_api.html, https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html,
 * https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md
 */
import { isIntArray, isTokenIds, sameIds, type TokenIds } from '../core/int32-twin.ts';
import { responseFormatSchema, type FinishReason, type IRResponseFormat } from '../core/ir.ts';
import type { EngineCallContext, EngineKind } from './types.ts';

/** Sampling values after defaults were applied: every one is sent. */
export interface TokenSampling {
  temperature: number;
  topP: number;
  /** -1 = off. */
  topK: number;
  minP: number;
  /** Output cap in tokens, always explicit. */
  maxTokens: number;
  seed?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
}

export interface TokenRequestInput {
  /** The prompt (token mode's buffers hand an Int32Array; engines/prompt-ids-json.ts writes it into the body). */
  promptIds: TokenIds;
  sampling: TokenSampling;
  /** Ids that end a sample (end-of-turn first), from the tokenizer. */
  stopIds: readonly number[];
  servedModel: string;
  ctx: EngineCallContext;
  /**
   * Structured output, sent as the endpoint's guided decoding: SGLang `sampling_params.json_schema` (a JSON string),
   * vLLM `response_format`, llama.cpp `json_schema`. The grammar applies from the first sampled token.
   */
  responseFormat?: IRResponseFormat;
}

/** What a token endpoint answered, before parsing the text. */
export interface TokenResult {
  responseIds: number[];
  /** One per sampled id (float32-rounded). */
  logprobs: number[];
  finish: FinishReason;
  /** Prompt tokens served from the engine's prefix cache (0 when unknown). */
  cachedTokens: number;
  weightVersion: string | null;
  /** Every length or field problem found; becomes the record's capture error. */
  problems: string[];
}

/** One engine's token endpoint. */
export interface TokenBackend {
  kind: EngineKind;
  path: string;
  /** The body's key that carries the prompt ids (written by the engine client, engines/prompt-ids-json.ts). */
  idsKey: 'prompt' | 'input_ids';
  /** Where the response ids and logprobs are read from (reported by the probe). */
  fields: { responseIds: string; logprobs: string };
  body(input: TokenRequestInput): Record<string, unknown>;
  /** @param promptIds the prompt sent, to check an echoed prompt or prompt-token count against. */
  read(raw: unknown, promptIds: TokenIds): TokenResult;
}

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

function optional(sampling: TokenSampling, names: { seed: string; presence: string; frequency: string }): Json {
  const out: Json = {};
  if (sampling.seed !== undefined) out[names.seed] = sampling.seed;
  if (sampling.presencePenalty !== undefined) out[names.presence] = sampling.presencePenalty;
  if (sampling.frequencyPenalty !== undefined) out[names.frequency] = sampling.frequencyPenalty;
  return out;
}

function finishOf(name: string | undefined): FinishReason {
  switch (name) {
    case 'stop':
    case 'eos':
    case 'word':
      return { unified: 'stop', raw: name };
    case 'length':
    case 'limit':
      return { unified: 'length', raw: name };
    case 'abort':
      return { unified: 'error', raw: name };
    case undefined:
      return { unified: 'other' };
    default:
      return { unified: 'other', raw: name };
  }
}

function checkLogprobs(logprobs: number[], ids: readonly number[], problems: string[]): number[] {
  const rounded = logprobs.map((lp) => Math.fround(lp));
  if (rounded.some((lp) => !Number.isFinite(lp) || lp > 1e-6)) problems.push('a logprob is not a finite number ≤ 0');
  if (rounded.length !== ids.length) problems.push(`${rounded.length} logprobs for ${ids.length} sampled ids`);
  return rounded;
}

function vllmResponseFormat(format: IRResponseFormat): Record<string, unknown> {
  if (format.type === 'json_object') return { type: 'json_object' };
  return { type: 'json_schema', json_schema: { name: format.name ?? 'response', schema: format.schema, ...(format.strict !== undefined ? { strict: format.strict } : {}) } };
}

/** SGLang native `POST /generate` (input_ids in, output_ids + meta_info.output_token_logprobs out). */
export const sglangTokenBackend: TokenBackend = {
  kind: 'sglang',
  path: '/generate',
  idsKey: 'input_ids',
  fields: { responseIds: 'output_ids', logprobs: 'meta_info.output_token_logprobs[k][0]' },
  body: ({ promptIds, sampling, stopIds, ctx, responseFormat }) => ({
    // rid = <session>:<request>: unique per call, attributable per session (the simulator reads the session from it).
    rid: `${ctx.sessionId}:${ctx.requestId}`,
    input_ids: promptIds,
    return_logprob: true,
    stream: false,
    sampling_params: {
      max_new_tokens: sampling.maxTokens,
      temperature: sampling.temperature,
      top_p: sampling.topP,
      top_k: sampling.topK,
      min_p: sampling.minP,
      stop_token_ids: stopIds,
      skip_special_tokens: false,
      no_stop_trim: true,
      ...optional(sampling, { seed: 'sampling_seed', presence: 'presence_penalty', frequency: 'frequency_penalty' }),
      // https://docs.sglang.ai/advanced_features/structured_outputs.html: json_schema is a JSON string.
      ...(responseFormat ? { json_schema: JSON.stringify(responseFormatSchema(responseFormat)) } : {}),
    },
  }),
  read(raw, promptIds) {
    const problems: string[] = [];
    const body = isObject(raw) ? raw : {};
    const meta = isObject(body.meta_info) ? body.meta_info : {};
    let responseIds: number[] = [];
    if (isIntArray(body.output_ids)) responseIds = body.output_ids;
    else problems.push('engine returned no output_ids');
    const logprobs: number[] = [];
    const entryIds: number[] = [];
    if (Array.isArray(meta.output_token_logprobs)) {
      for (const entry of meta.output_token_logprobs) {
        if (!Array.isArray(entry) || typeof entry[0] !== 'number' || !Number.isInteger(entry[1])) {
          problems.push('meta_info.output_token_logprobs has malformed entries');
          break;
        }
        logprobs.push(entry[0]);
        entryIds.push(entry[1] as number);
      }
      if (entryIds.length === logprobs.length && !sameIds(entryIds, responseIds)) problems.push(`output_ids (${responseIds.length}) and meta_info.output_token_logprobs ids (${entryIds.length}) disagree`);
    } else problems.push('engine returned no meta_info.output_token_logprobs (return_logprob ignored?)');
    const rounded = checkLogprobs(logprobs, responseIds, problems);
    if (typeof meta.prompt_tokens === 'number' && meta.prompt_tokens !== promptIds.length) problems.push(`meta_info.prompt_tokens is ${meta.prompt_tokens} but ${promptIds.length} prompt ids were sent`);
    if (typeof meta.completion_tokens === 'number' && meta.completion_tokens !== responseIds.length) problems.push(`meta_info.completion_tokens is ${meta.completion_tokens} but ${responseIds.length} output ids came back`);
    const finishRaw = isObject(meta.finish_reason) ? meta.finish_reason.type : meta.finish_reason;
    const version = meta.weight_version;
    return {
      responseIds,
      logprobs: rounded,
      finish: finishOf(typeof finishRaw === 'string' ? finishRaw : undefined),
      cachedTokens: typeof meta.cached_tokens === 'number' ? meta.cached_tokens : 0,
      weightVersion: typeof version === 'string' || typeof version === 'number' ? String(version) : null,
      problems,
    };
  },
};

/** vLLM `POST /v1/completions` with `prompt: int[]`, `return_token_ids`, `logprobs: 0` (also the simulator's). */
export const vllmTokenBackend: TokenBackend = {
  kind: 'vllm',
  path: '/v1/completions',
  idsKey: 'prompt',
  fields: { responseIds: 'choices[0].token_ids', logprobs: 'choices[0].logprobs.token_logprobs' },
  body: ({ promptIds, sampling, stopIds, servedModel, responseFormat }) => ({
    model: servedModel,
    prompt: promptIds,
    max_tokens: sampling.maxTokens,
    temperature: sampling.temperature,
    top_p: sampling.topP,
    top_k: sampling.topK,
    min_p: sampling.minP,
    logprobs: 0,
    return_token_ids: true,
    stop_token_ids: stopIds,
    skip_special_tokens: false,
    spaces_between_special_tokens: false,
    stream: false,
    ...optional(sampling, { seed: 'seed', presence: 'presence_penalty', frequency: 'frequency_penalty' }),
    // vLLM's completions endpoint takes the chat API's response_format (https://docs.vllm.ai/en/latest/features/structured_outputs.html).
    ...(responseFormat ? { response_format: vllmResponseFormat(responseFormat) } : {}),
  }),
  read(raw, promptIds) {
    const problems: string[] = [];
    const body = isObject(raw) ? raw : {};
    const choice = Array.isArray(body.choices) && isObject(body.choices[0]) ? body.choices[0] : null;
    if (!choice) problems.push('no choices[0] in the engine answer');
    const c = choice ?? {};
    let responseIds: number[] = [];
    if (isIntArray(c.token_ids)) responseIds = c.token_ids;
    else problems.push('engine returned no choices[0].token_ids (vLLM < 0.10.2 has no return_token_ids)');
    // An echo byte-equal to what was sent is the sent array itself (answer-json.ts parseEchoedAnswer): sameIds is then immediate.
    if (isTokenIds(c.prompt_token_ids) && !sameIds(c.prompt_token_ids, promptIds)) problems.push(`the engine's prompt_token_ids (${c.prompt_token_ids.length}) differ from the ${promptIds.length} prompt ids sent`);
    let logprobs: number[] = [];
    const lp = isObject(c.logprobs) ? c.logprobs.token_logprobs : undefined;
    if (Array.isArray(lp) && lp.every((v): v is number => typeof v === 'number')) logprobs = lp;
    else problems.push('engine returned no choices[0].logprobs.token_logprobs');
    const rounded = checkLogprobs(logprobs, responseIds, problems);
    const usage = isObject(body.usage) ? body.usage : {};
    if (typeof usage.prompt_tokens === 'number' && usage.prompt_tokens !== promptIds.length) problems.push(`usage.prompt_tokens is ${usage.prompt_tokens} but ${promptIds.length} prompt ids were sent`);
    if (typeof usage.completion_tokens === 'number' && usage.completion_tokens !== responseIds.length) problems.push(`usage.completion_tokens is ${usage.completion_tokens} but ${responseIds.length} sampled ids came back`);
    const cached = isObject(usage.prompt_tokens_details) ? usage.prompt_tokens_details.cached_tokens : undefined;
    return {
      responseIds,
      logprobs: rounded,
      finish: finishOf(typeof c.finish_reason === 'string' ? c.finish_reason : undefined),
      cachedTokens: typeof cached === 'number' ? cached : 0,
      weightVersion: null,
      problems,
    };
  },
};

/** llama.cpp `POST /completion` with `prompt: int[]` (prompt ids are not echoed: the proxy knows them). */
export const llamacppTokenBackend: TokenBackend = {
  kind: 'llamacpp',
  path: '/completion',
  idsKey: 'prompt',
  fields: { responseIds: 'tokens', logprobs: 'completion_probabilities[k].logprob' },
  body: ({ promptIds, sampling, responseFormat }) => ({
    prompt: promptIds,
    n_predict: sampling.maxTokens,
    temperature: sampling.temperature,
    top_p: sampling.topP,
    // llama.cpp disables top-k with 0, not -1.
    top_k: sampling.topK < 0 ? 0 : sampling.topK,
    min_p: sampling.minP,
    typical_p: 1,
    repeat_penalty: 1,
    repeat_last_n: 0,
    presence_penalty: sampling.presencePenalty ?? 0,
    frequency_penalty: sampling.frequencyPenalty ?? 0,
    mirostat: 0,
    xtc_probability: 0,
    dry_multiplier: 0,
    top_n_sigma: -1,
    seed: sampling.seed ?? -1,
    ignore_eos: false,
    n_probs: 1,
    post_sampling_probs: false,
    return_tokens: true,
    cache_prompt: true,
    stream: false,
    // llama.cpp converts json_schema to a GBNF grammar (tools/server/README.md, POST /completion options).
    ...(responseFormat ? { json_schema: responseFormatSchema(responseFormat) } : {}),
  }),
  read(raw, promptIds) {
    const problems: string[] = [];
    const body = isObject(raw) ? raw : {};
    let responseIds: number[] = [];
    if (isIntArray(body.tokens)) responseIds = body.tokens;
    else problems.push('engine returned no tokens (return_tokens ignored?)');
    const logprobs: number[] = [];
    const probIds: number[] = [];
    if (Array.isArray(body.completion_probabilities)) {
      for (const entry of body.completion_probabilities) {
        if (!isObject(entry) || typeof entry.logprob !== 'number') {
          problems.push('completion_probabilities has entries without a numeric logprob');
          break;
        }
        logprobs.push(entry.logprob);
        if (Number.isInteger(entry.id)) probIds.push(entry.id as number);
      }
      if (probIds.length === logprobs.length && !sameIds(probIds, responseIds)) problems.push(`tokens (${responseIds.length}) and completion_probabilities ids (${probIds.length}) disagree`);
    } else problems.push('engine returned no completion_probabilities (n_probs ignored?)');
    const rounded = checkLogprobs(logprobs, responseIds, problems);
    if (typeof body.tokens_evaluated === 'number' && body.tokens_evaluated !== promptIds.length) problems.push(`tokens_evaluated is ${body.tokens_evaluated} but ${promptIds.length} prompt ids were sent`);
    const version = body.weight_version;
    return {
      responseIds,
      logprobs: rounded,
      finish: finishOf(typeof body.stop_type === 'string' ? body.stop_type : undefined),
      cachedTokens: typeof body.tokens_cached === 'number' ? body.tokens_cached : 0,
      weightVersion: typeof version === 'string' || typeof version === 'number' ? String(version) : null,
      problems,
    };
  },
};

/** The backend of an engine kind (`sim` speaks the vLLM token contract). Null for `openai`, which has no token endpoint. */
export function tokenBackendFor(kind: EngineKind): TokenBackend | null {
  switch (kind) {
    case 'sglang':
      return sglangTokenBackend;
    case 'vllm':
      return vllmTokenBackend;
    case 'sim':
      return { ...vllmTokenBackend, kind: 'sim' };
    case 'llamacpp':
      return llamacppTokenBackend;
    default:
      return null;
  }
}

/**
 * Reads one streamed token endpoint: `push` takes a chunk and returns the ids it adds; `body()` is the answer a
 * non-streaming call would have given, for the backend's `read` (so both paths share one reader and its checks).
 */
export interface TokenChunkAccumulator {
  push(chunk: Json): number[];
  body(): Json;
  /**
   * Whether a chunk said the answer is finished (a finish reason; llama.cpp's `stop: true`). A body that ends without
   * one broke off, however cleanly the connection closed.
   */
  finished(): boolean;
}

/** Streaming flavour of each backend: the body with streaming switched on, and the chunk accumulator. */
export interface TokenStreaming {
  body(input: TokenRequestInput): Record<string, unknown>;
  accumulator(): TokenChunkAccumulator;
}

/**
 * New elements of a list an engine sends either cumulatively (every chunk repeats what came before; SGLang's default
 * for `output_ids`) or incrementally (each chunk only its own; `--incremental-streaming-output`).
 */
function newPart<T>(seen: readonly T[], next: readonly T[], same: (a: T, b: T) => boolean): T[] {
  if (seen.length > 0 && next.length >= seen.length && seen.every((x, i) => same(x, next[i]!))) return next.slice(seen.length);
  return [...next];
}

const sameJson = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** SGLang `/generate` with `stream: true`: SSE of whole objects ({text, output_ids, meta_info}), ending in [DONE]. */
export const sglangStreaming: TokenStreaming = {
  body: (input) => ({ ...sglangTokenBackend.body(input), stream: true }),
  accumulator() {
    const ids: number[] = [];
    const entries: unknown[] = [];
    let last: Json = {};
    return {
      push(chunk) {
        last = chunk;
        const added = isIntArray(chunk.output_ids) ? newPart(ids, chunk.output_ids, (a, b) => a === b) : [];
        ids.push(...added);
        const meta = isObject(chunk.meta_info) ? chunk.meta_info : {};
        if (Array.isArray(meta.output_token_logprobs)) entries.push(...newPart(entries, meta.output_token_logprobs, sameJson));
        return added;
      },
      body() {
        const meta = isObject(last.meta_info) ? last.meta_info : {};
        return { ...last, output_ids: ids, meta_info: { ...meta, output_token_logprobs: entries } };
      },
      finished: () => isObject(last.meta_info) && last.meta_info.finish_reason !== null && last.meta_info.finish_reason !== undefined,
    };
  },
};

/** vLLM `/v1/completions` with `stream: true`: per chunk `choices[0].token_ids` and `logprobs.token_logprobs` deltas. */
export const vllmStreaming: TokenStreaming = {
  body: (input) => ({ ...vllmTokenBackend.body(input), stream: true, stream_options: { include_usage: true } }),
  accumulator() {
    const ids: number[] = [];
    const logprobs: unknown[] = [];
    let promptIds: TokenIds | undefined;
    let finish: unknown = null;
    let stopReason: unknown = null;
    let usage: Json | undefined;
    return {
      push(chunk) {
        if (isObject(chunk.usage)) usage = chunk.usage;
        const choice = Array.isArray(chunk.choices) && isObject(chunk.choices[0]) ? chunk.choices[0] : null;
        if (!choice) return [];
        if (isTokenIds(choice.prompt_token_ids)) promptIds = choice.prompt_token_ids;
        if (choice.finish_reason !== null && choice.finish_reason !== undefined) finish = choice.finish_reason;
        if (choice.stop_reason !== null && choice.stop_reason !== undefined) stopReason = choice.stop_reason;
        const lp = isObject(choice.logprobs) ? choice.logprobs.token_logprobs : undefined;
        if (Array.isArray(lp)) logprobs.push(...lp);
        const added = isIntArray(choice.token_ids) ? choice.token_ids : [];
        ids.push(...added);
        return added;
      },
      body() {
        const choice: Json = { index: 0, token_ids: ids, logprobs: { token_logprobs: logprobs }, finish_reason: finish, stop_reason: stopReason };
        if (promptIds) choice.prompt_token_ids = promptIds;
        return { choices: [choice], ...(usage ? { usage } : {}) };
      },
      finished: () => finish !== null,
    };
  },
};

/** llama.cpp `/completion` with `stream: true`: per chunk `tokens` and `completion_probabilities`; the last has `stop: true`. */
export const llamacppStreaming: TokenStreaming = {
  body: (input) => ({ ...llamacppTokenBackend.body(input), stream: true }),
  accumulator() {
    const ids: number[] = [];
    const probabilities: unknown[] = [];
    let last: Json = {};
    return {
      push(chunk) {
        last = chunk;
        if (Array.isArray(chunk.completion_probabilities)) probabilities.push(...chunk.completion_probabilities);
        const added = isIntArray(chunk.tokens) ? chunk.tokens : [];
        ids.push(...added);
        return added;
      },
      body: () => ({ ...last, tokens: ids, completion_probabilities: probabilities }),
      finished: () => last.stop === true,
    };
  },
};

/** The streaming flavour of a backend (by its path, so `sim`, which speaks vLLM's, gets vLLM's). */
export function tokenStreamingFor(backend: TokenBackend): TokenStreaming {
  if (backend.path === sglangTokenBackend.path) return sglangStreaming;
  if (backend.path === llamacppTokenBackend.path) return llamacppStreaming;
  return vllmStreaming;
}
