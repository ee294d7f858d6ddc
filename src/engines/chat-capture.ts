/**
 * Reading an engine's OpenAI Chat answer: the IR response and the token capture (prompt ids, sampled ids, logprobs)
 * from the engine's extension fields, with every length cross-checked. Field names drift between builds
 * (docs/protocol-notes.md#sglang: field names changed during 2026), so one tolerant reader looks in every known place and
 * reports which it used; a missing or inconsistent field becomes `captureError`, never a silent gap.
 * Sources: vLLM ≥ 0.10.2 `return_token_ids` (top-level `prompt_token_ids`, `choices[0].token_ids`,
 * `choices[0].logprobs.content[k].logprob`); SGLang `return_prompt_token_ids` / `return_meta_info`
 * (`choices[0].prompt_token_ids`, `meta_info.output_token_logprobs` = [[logprob, id, text|null], ...]).
 */
import type { Clock } from '../core/clock.ts';
import type { IdGenerator } from '../core/ids.ts';
import type { FinishReason, IRContentPart, IRResponse, IRToolCall } from '../core/ir.ts';
import type { LogprobSemantics } from '../core/records.ts';
import { GatewayError } from '../core/errors.ts';
import type { TokenCapture } from './types.ts';
import { isIntArray, isTokenIds, sameIds, type TokenIds } from '../core/int32-twin.ts';

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);
// Arrays answer-json.ts built are integers already: ~25,000 checks fewer per 100 KB call.

// https://platform.openai.com/docs/api-reference/chat/object — finish_reason; SGLang/vLLM add `abort`.
const unifiedByFinish: Readonly<Record<string, FinishReason['unified']>> = {
  stop: 'stop',
  eos: 'stop',
  length: 'length',
  tool_calls: 'tool-calls',
  function_call: 'tool-calls',
  content_filter: 'content-filter',
  abort: 'error',
  error: 'error',
};

/** Engine finish_reason → {unified, raw}; unknown values map to `other`. */
export function decodeEngineFinishReason(raw: unknown, hasToolCalls: boolean): FinishReason {
  const name = typeof raw === 'string' ? raw : isObject(raw) && typeof raw.type === 'string' ? raw.type : undefined;
  let unified: FinishReason['unified'] = name !== undefined && Object.hasOwn(unifiedByFinish, name) ? unifiedByFinish[name]! : 'other';
  // Some tool parsers report `stop` although they returned calls; the client must see a tool turn.
  if (hasToolCalls && unified === 'stop') unified = 'tool-calls';
  return name === undefined ? { unified } : { unified, raw: name };
}

/** A JSON.stringify replacer that writes the answer reader's Int32Array of prompt ids as the array it stands for. */
const idsAsArrays = (_key: string, value: unknown) => (value instanceof Int32Array ? Array.from(value) : value);

/** The first choice of a chat completion, or an 'upstream' error (quoting the answer as received) when it has none. */
export function firstChoice(body: unknown): { body: Json; choice: Json } {
  if (!isObject(body) || !Array.isArray(body.choices) || !isObject(body.choices[0])) {
    throw new GatewayError('upstream', `engine answer has no choices[0]: ${JSON.stringify(body, idsAsArrays).slice(0, 200)}`);
  }
  return { body, choice: body.choices[0] };
}

/**
 * Decode the engine's message into an IR response with the *requested* model name restored.
 * @param requestedModel the model name the client asked for.
 */
export function decodeEngineResponse(raw: unknown, requestedModel: string, now: Clock, newId: IdGenerator): IRResponse {
  const { body, choice } = firstChoice(raw);
  const message = isObject(choice.message) ? choice.message : {};
  const toolCallsRaw = Array.isArray(message.tool_calls) ? message.tool_calls : [];
  const reasoningText =
    typeof message.reasoning === 'string' ? message.reasoning : typeof message.reasoning_content === 'string' ? message.reasoning_content : '';
  const toolCalls: IRToolCall[] = [];
  for (const call of toolCallsRaw) {
    if (!isObject(call)) continue;
    const fn = isObject(call.function) ? call.function : {};
    // A call without arguments comes back as "" from some parsers; clients JSON.parse the arguments, so it is {}.
    const args = typeof fn.arguments === 'string' ? fn.arguments : JSON.stringify(fn.arguments ?? {});
    toolCalls.push({
      id: typeof call.id === 'string' && call.id !== '' ? call.id : newId('call'),
      name: typeof fn.name === 'string' ? fn.name : '',
      arguments: args.trim() === '' ? '{}' : args,
    });
  }
  // Whitespace-only text next to tool calls (the parser's gap between </think> and <tool_call>) is no content: token
  // mode drops it too, so a client never sees an empty text block in either mode.
  const text = typeof message.content === 'string' ? message.content : '';
  const content: IRContentPart[] = text === '' || (toolCalls.length > 0 && text.trim() === '') ? [] : [{ type: 'text', text }];
  const usage = isObject(body.usage) ? body.usage : {};
  const meta = metaInfo(body, choice);
  const num = (value: unknown): number | undefined => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);
  const promptDetails = isObject(usage.prompt_tokens_details) ? usage.prompt_tokens_details : {};
  return {
    id: typeof body.id === 'string' && body.id !== '' ? body.id : newId('chatcmpl'),
    model: requestedModel,
    content,
    ...(reasoningText !== '' ? { reasoning: { text: reasoningText } } : {}),
    toolCalls,
    finishReason: withStopSequence(decodeEngineFinishReason(choice.finish_reason ?? meta?.finish_reason, toolCalls.length > 0), matchedStop(choice, meta)),
    usage: {
      inputTokens: num(usage.prompt_tokens) ?? num(meta?.prompt_tokens) ?? 0,
      outputTokens: num(usage.completion_tokens) ?? num(meta?.completion_tokens) ?? 0,
      cachedInputTokens: num(promptDetails.cached_tokens) ?? num(meta?.cached_tokens) ?? 0,
      // The engine's own count; ChatModeEngine replaces it with reasoningTokenCount once the sampled ids are read.
      reasoningTokens: engineReasoningTokens(raw) ?? 0,
    },
    warnings: [],
    createdAt: now(),
  };
}

/**
 * The engine's own count of reasoning tokens, where it sends one: vLLM `usage.completion_tokens_details.reasoning_tokens`
 * (builds with vllm-project/vllm PR #45802: the reasoning parser's `count_reasoning_tokens`, which leaves `<think>` and
 * `</think>` out), SGLang `usage.reasoning_tokens` (sgl-project/sglang PR #15562; always 0 on builds before it) or
 * `meta_info.reasoning_tokens`. Undefined when the answer has none of them.
 */
export function engineReasoningTokens(raw: unknown): number | undefined {
  if (!isObject(raw)) return undefined;
  const usage = isObject(raw.usage) ? raw.usage : {};
  const details = isObject(usage.completion_tokens_details) ? usage.completion_tokens_details : {};
  const choice = Array.isArray(raw.choices) && isObject(raw.choices[0]) ? raw.choices[0] : {};
  const meta = metaInfo(raw, choice);
  for (const value of [details.reasoning_tokens, usage.reasoning_tokens, meta?.reasoning_tokens]) {
    if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return value;
  }
  return undefined;
}

/**
 * IR `usage.reasoningTokens` of a chat-mode answer, in tokens, without tokenising any text. The engine's own count
 * (engineReasoningTokens) wins when it is positive, or when the answer has no reasoning; a 0 next to reasoning text is
 * not believed (SGLang builds before the count existed send 0, and vLLM's span counter gives 0 when the chat template
 * opened `<think>` in the prompt). Otherwise the sampled ids say it, as token mode counts them (token-engine.ts): the
 * tokens before the first end-of-think id; with no end-of-think among them, the whole sample when nothing but reasoning
 * came back (the sample stopped inside its reasoning), else 0 (a family without an end-of-think token, gpt-oss's
 * analysis channel, on an engine that sends no count: unknown).
 * @param response the decoded answer (reasoning, content, tool calls, `usage.outputTokens`).
 * @param reported the engine's own count, or undefined.
 * @param responseIds the sampled ids as captured (empty when the engine returns none).
 * @param thinkCloseId the served model's end-of-think token id (ChatModeEngine learns it at probe), or undefined.
 * @returns a count in [0, outputTokens] unless the engine reported more.
 */
export function reasoningTokenCount(response: IRResponse, reported: number | undefined, responseIds: ArrayLike<number>, thinkCloseId: number | undefined): number {
  const reasoned = (response.reasoning?.text ?? '') !== '';
  if (reported !== undefined && (reported > 0 || !reasoned)) return reported;
  if (!reasoned) return 0;
  if (thinkCloseId !== undefined) {
    for (let k = 0; k < responseIds.length; k++) if (responseIds[k] === thinkCloseId) return k;
  }
  return response.content.length === 0 && response.toolCalls.length === 0 ? response.usage.outputTokens : 0;
}

/**
 * The stop string that ended the turn: vLLM `choices[0].stop_reason` (a string for a stop string, an int for a stop
 * token id), SGLang `matched_stop` (on the choice) or `meta_info.finish_reason.matched`.
 */
function matchedStop(choice: Json, meta: Json | undefined): string | undefined {
  const finish = isObject(meta?.finish_reason) ? (meta.finish_reason as Json) : {};
  for (const value of [choice.stop_reason, choice.matched_stop, finish.matched]) if (typeof value === 'string' && value !== '') return value;
  return undefined;
}

/** A stop-string hit is reported as such (Anthropic `stop_sequence`); a turn that did not end with `stop` is unchanged. */
export function withStopSequence(finish: FinishReason, stop: string | undefined): FinishReason {
  return stop !== undefined && finish.unified === 'stop' ? { ...finish, stopSequence: stop } : finish;
}

function metaInfo(body: Json, choice: Json): Json | undefined {
  if (isObject(choice.meta_info)) return choice.meta_info;
  if (isObject(body.meta_info)) return body.meta_info;
  return undefined;
}

/** Where each captured array came from (reported by `probe()` so an operator sees which build they talk to). */
export interface CaptureSources {
  promptIds: string | null;
  responseIds: string | null;
  logprobs: string | null;
}

/**
 * Read prompt ids, sampled ids and logprobs from a chat completion and cross-check them:
 * logprobs vs sampled ids, `usage.completion_tokens` vs sampled ids, `usage.prompt_tokens` vs prompt ids, and
 * `choices[0].token_ids` vs the ids inside `meta_info.output_token_logprobs` when both exist.
 * Logprobs are rounded to float32 (Math.fround) so they survive Float32 storage exactly.
 * @returns the capture (arrays empty where a field was missing) with `captureError` naming every problem, and the
 *   field paths used. Never throws.
 */
export function extractChatCapture(raw: unknown, semantics: LogprobSemantics): { capture: TokenCapture; sources: CaptureSources } {
  const problems: string[] = [];
  const sources: CaptureSources = { promptIds: null, responseIds: null, logprobs: null };
  let body: Json = {};
  let choice: Json = {};
  try {
    ({ body, choice } = firstChoice(raw));
  } catch {
    problems.push('no choices[0] in the engine answer');
  }
  const meta = metaInfo(body, choice);

  let promptIds: TokenIds = [];
  if (isTokenIds(body.prompt_token_ids)) [promptIds, sources.promptIds] = [body.prompt_token_ids, 'prompt_token_ids'];
  else if (isTokenIds(choice.prompt_token_ids)) [promptIds, sources.promptIds] = [choice.prompt_token_ids, 'choices[0].prompt_token_ids'];
  else problems.push('engine returned no prompt token ids');

  // SGLang's meta_info entries are [logprob, token_id, text|null]; they carry ids and logprobs together.
  let metaIds: number[] | null = null;
  let metaLogprobs: number[] | null = null;
  const entries = meta?.output_token_logprobs;
  if (Array.isArray(entries)) {
    const ids: number[] = [];
    const lps: number[] = [];
    let valid = true;
    for (const entry of entries) {
      if (!Array.isArray(entry) || typeof entry[0] !== 'number' || !Number.isInteger(entry[1])) {
        valid = false;
        break;
      }
      lps.push(entry[0]);
      ids.push(entry[1] as number);
    }
    if (valid) [metaIds, metaLogprobs] = [ids, lps];
    else problems.push('meta_info.output_token_logprobs has malformed entries');
  }

  let responseIds: number[] = [];
  if (isIntArray(choice.token_ids)) [responseIds, sources.responseIds] = [choice.token_ids, 'choices[0].token_ids'];
  else if (isIntArray(choice.output_ids)) [responseIds, sources.responseIds] = [choice.output_ids, 'choices[0].output_ids'];
  else if (metaIds) [responseIds, sources.responseIds] = [metaIds, 'meta_info.output_token_logprobs[k][1]'];
  else problems.push('engine returned no sampled token ids');
  if (metaIds && sources.responseIds !== 'meta_info.output_token_logprobs[k][1]' && !sameIds(metaIds, responseIds)) {
    problems.push(`${sources.responseIds} (${responseIds.length}) and meta_info.output_token_logprobs ids (${metaIds.length}) disagree`);
  }

  let logprobs: number[] = [];
  const content = isObject(choice.logprobs) && Array.isArray(choice.logprobs.content) ? choice.logprobs.content : null;
  // SGLang builds may truncate logprobs.content, so meta_info wins when present.
  if (metaLogprobs) [logprobs, sources.logprobs] = [metaLogprobs, 'meta_info.output_token_logprobs[k][0]'];
  else if (content) {
    const values = content.map((entry) => (isObject(entry) ? entry.logprob : undefined));
    if (values.every((v): v is number => typeof v === 'number')) [logprobs, sources.logprobs] = [values, 'choices[0].logprobs.content[k].logprob'];
    else problems.push('choices[0].logprobs.content has entries without a numeric logprob');
  } else problems.push('engine returned no logprobs');

  logprobs = logprobs.map((lp) => Math.fround(lp));
  if (logprobs.some((lp) => !Number.isFinite(lp) || lp > 1e-6)) problems.push('a logprob is not a finite number ≤ 0');
  if (sources.logprobs && sources.responseIds && logprobs.length !== responseIds.length) {
    problems.push(`${logprobs.length} logprobs for ${responseIds.length} sampled ids`);
  }
  const usage = isObject(body.usage) ? body.usage : {};
  if (sources.responseIds && typeof usage.completion_tokens === 'number' && usage.completion_tokens !== responseIds.length) {
    problems.push(`usage.completion_tokens is ${usage.completion_tokens} but ${responseIds.length} sampled ids came back`);
  }
  if (sources.promptIds && typeof usage.prompt_tokens === 'number' && usage.prompt_tokens !== promptIds.length) {
    problems.push(`usage.prompt_tokens is ${usage.prompt_tokens} but ${promptIds.length} prompt ids came back`);
  }
  return {
    capture: { promptIds, responseIds, logprobs, logprobSemantics: semantics, captureError: problems.length ? problems.join('; ') : null },
    sources,
  };
}

/** SGLang `meta_info.weight_version` (or a top-level `weight_version`) as the engine-reported policy version. */
export function engineWeightVersion(raw: unknown): string | null {
  if (!isObject(raw)) return null;
  const choice = Array.isArray(raw.choices) && isObject(raw.choices[0]) ? raw.choices[0] : {};
  const meta = metaInfo(raw, choice);
  const version = meta?.weight_version ?? raw.weight_version;
  return typeof version === 'string' || typeof version === 'number' ? String(version) : null;
}
