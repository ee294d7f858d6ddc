/**
 * One simulated generation: the planned text is "sampled" as its token ids (plus the end-of-turn id on a normal
 * stop), each scored by the toy policy, then cut by stop strings, stop token ids and the token limit the way vLLM
 * and SGLang cut real samples. Source: docs/protocol-notes.md#inference-engines (finish reasons, EOS in token_ids).
 */
import type { LoadedTokenizer } from '../tokenization/tokenizer.ts';
import { rescoreCompletion } from './policy.ts';

export interface GenerateInput {
  promptIds: readonly number[];
  /** The planned assistant text, without the end-of-turn token. */
  text: string;
  /** Token limit of the sample (max_tokens / max_new_tokens / n_predict), ≥ 0. */
  maxTokens: number;
  /** Extra stop ids (vLLM `stop_token_ids`); the sample ends after the first one, which it keeps. */
  stopTokenIds?: readonly number[];
  /** Stop strings: the text ends before the first match (excluded), without an end-of-turn token. */
  stop?: readonly string[];
  /** vLLM/SGLang `ignore_eos`: no end-of-turn token is appended. */
  ignoreEos?: boolean;
  /** The token id that ends this sample (default: the tokenizer's first eos; gpt-oss ends a tool call on `<|call|>`). */
  endTokenId?: number;
}

export interface Generation {
  /** Sampled ids, including the end-of-turn id when the sample stopped on it. */
  ids: number[];
  /** One logprob per id, from the toy policy (float32-exact). */
  logprobs: number[];
  finish: 'stop' | 'length';
  /** What stopped it: the EOS or stop token id, the stop string, or null (length). */
  matched: number | string | null;
  /** True when `matched` is one of the tokenizer's end-of-turn ids. */
  matchedEos: boolean;
}

/** Run one generation (pure; no timing). */
export function generate(tokenizer: LoadedTokenizer, input: GenerateInput): Generation {
  let text = input.text;
  let matched: number | string | null = null;
  let cut = -1;
  for (const stop of input.stop ?? []) {
    const at = stop === '' ? -1 : input.text.indexOf(stop);
    if (at >= 0 && (cut < 0 || at < cut)) {
      cut = at;
      matched = stop;
    }
  }
  const cutByString = cut >= 0;
  if (cutByString) text = text.slice(0, cut);
  const ids = tokenizer.encode(text);
  const eos = input.endTokenId ?? tokenizer.eosTokenIds[0];
  let matchedEos = false;
  if (!cutByString && !input.ignoreEos && eos !== undefined) {
    ids.push(eos);
    matched = eos;
    matchedEos = true;
  }
  const stopIds = new Set(input.stopTokenIds ?? []);
  if (stopIds.size > 0) {
    const at = ids.findIndex((id) => stopIds.has(id));
    if (at >= 0 && at < ids.length - (matchedEos ? 1 : 0)) {
      ids.length = at + 1;
      matched = ids[at]!;
      matchedEos = tokenizer.eosTokenIds.includes(ids[at]!);
    }
  }
  let finish: Generation['finish'] = cutByString || matchedEos || stopIds.has(ids[ids.length - 1] ?? -1) ? 'stop' : 'length';
  if (ids.length > input.maxTokens) {
    ids.length = Math.max(0, input.maxTokens);
    finish = 'length';
    matched = null;
    matchedEos = false;
  } else if (!cutByString && input.ignoreEos) {
    // With ignore_eos a real engine keeps sampling up to the limit; the script has nothing more to say, so it ends here.
    finish = 'stop';
  }
  return { ids, logprobs: rescoreCompletion(input.promptIds as number[], ids), finish, matched, matchedEos };
}
