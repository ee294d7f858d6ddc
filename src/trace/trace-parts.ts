/**
 * Pieces shared by the builders: the soundness check of a record's token capture, IR → message conversion for the
 * human-readable trace fields, and trace metadata. Source: docs/architecture.md#data-model (Trace), docs/architecture.md#trajectory-builders.
 */
import type { IRMessage } from '../core/ir.ts';
import type { BuilderName, CompletionRecord, Trace, TraceMetadata } from '../core/records.ts';

/** Why a chain was opened: the first chain of a session, or the break that forced a new one. */
export type ChainStart = 'first' | BreakReason;

/**
 * Break reasons counted in `reconstruction_stats.breaks`:
 * - `prefix_break`: the prompt extends no open chain's tip (sub-agent, compaction, rewritten history);
 * - `no_eot`: the prompt extends a tip without holding its sampled answer verbatim, and its tail holds no end-of-turn
 *   id, so the split failed;
 * - `eot_unknown`: the same, when no EOT id was configured and none could be detected (no completion finished with
 *   stop);
 * - `capture_error`: the record's token capture is unsound; it gets a chain of its own, masked;
 * - `dropped_message`: a prefix break whose cause is known: the request continues a chain's conversation after the
 *   answer, but dropped the user message(s) the chain's last request ended with (a per-request context message the
 *   harness sends once, e.g. OpenClaw's runtime context). The sampled answer was conditioned on that message and the
 *   next turn is not, so no single token sequence holds both: a new chain, named for what happened;
 * - `history_changed` (token mode): the prompt extends a chain's tip but does not hold its sampled answer verbatim:
 *   the client edited or extended that assistant turn (the proxy started a new token buffer), so joining would train
 *   on a context the engine never saw. Chat mode joins such a prompt and counts `rerender_mismatches` instead.
 */
export type BreakReason = 'prefix_break' | 'no_eot' | 'eot_unknown' | 'capture_error' | 'dropped_message' | 'history_changed';

export const BREAK_REASONS: readonly BreakReason[] = ['prefix_break', 'no_eot', 'eot_unknown', 'capture_error', 'dropped_message', 'history_changed'];

/** What a builder needs besides the records. */
export interface BuildContext {
  session_id: string;
  task_id: string;
  harness: string;
  /** End-of-turn ids (e.g. Qwen3 [151645, 151643]); null = detect from the first completion that finished with stop. */
  eotIds: readonly number[] | null;
}

/**
 * Why a record's token capture cannot be trained on, or null when it is sound. Sound = no `capture_error`, an IR
 * response, a non-empty prompt and one logprob per sampled id.
 */
export function captureProblem(rec: CompletionRecord): string | null {
  if (rec.capture_error) return rec.capture_error;
  if (!Array.isArray(rec.prompt_ids) || !Array.isArray(rec.response_ids) || !Array.isArray(rec.logprobs)) {
    return 'token arrays missing';
  }
  if (rec.ir_response === null) return 'engine returned no response';
  if (rec.prompt_ids.length === 0) return 'empty prompt_ids';
  if (rec.logprobs.length !== rec.response_ids.length) {
    return `logprobs has ${rec.logprobs.length} entries for ${rec.response_ids.length} response ids`;
  }
  return null;
}

/** Tool calls in the record's response that the engine's parser flagged as malformed. */
export function parserInvalidCount(rec: CompletionRecord): number {
  let n = 0;
  for (const call of rec.ir_response?.toolCalls ?? []) if (call.parserInvalid) n++;
  return n;
}

/** The assistant turn a completion produced, as an IR message (null when the engine gave no response). */
export function assistantMessage(rec: CompletionRecord): IRMessage | null {
  const res = rec.ir_response;
  if (!res) return null;
  const msg: IRMessage = { role: 'assistant', content: res.content };
  if (res.reasoning) msg.reasoning = res.reasoning;
  if (res.toolCalls.length > 0) msg.toolCalls = res.toolCalls;
  return msg;
}

/** Metadata of a trace made of `members` (in chain order). */
export function traceMetadata(
  members: readonly CompletionRecord[],
  builder: BuilderName,
  ctx: BuildContext,
  extra: { chain_index: number; started_by: ChainStart; capture_error?: string; interstitial_tokens: number; rerender_mismatches?: number },
): TraceMetadata {
  let invalid = 0;
  for (const m of members) invalid += parserInvalidCount(m);
  const meta: TraceMetadata = {
    session_id: ctx.session_id,
    task_id: ctx.task_id,
    builder,
    harness: ctx.harness,
    completion_ids: members.map((m) => m.completion_id),
    policy_versions: members.map((m) => m.policy_version),
    seqs: members.map((m) => m.seq),
    chain_index: extra.chain_index,
    started_by: extra.started_by,
    interstitial_tokens: extra.interstitial_tokens,
    parser_invalid_tool_calls: invalid,
  };
  if (extra.capture_error !== undefined) meta.capture_error = extra.capture_error;
  if (extra.rerender_mismatches !== undefined) meta.rerender_mismatches = extra.rerender_mismatches;
  return meta;
}

/**
 * A single-completion trace. A sound record gets mask 1 on every sampled id with its real logprobs; an unsound one
 * (capture error) gets mask 0 and 0.0 placeholders, since its tokens or logprobs cannot be trusted.
 */
export function singleTrace(
  rec: CompletionRecord,
  builder: BuilderName,
  ctx: BuildContext,
  chainIndex: number,
  startedBy: ChainStart,
): Trace {
  const problem = captureProblem(rec);
  const responseIds = Array.isArray(rec.response_ids) ? rec.response_ids.slice() : [];
  const n = responseIds.length;
  const assistant = assistantMessage(rec);
  return {
    prompt_ids: Array.isArray(rec.prompt_ids) ? rec.prompt_ids.slice() : [],
    response_ids: responseIds,
    loss_mask: new Array<number>(n).fill(problem === null ? 1 : 0),
    response_logprobs: problem === null ? rec.logprobs.slice() : new Array<number>(n).fill(0),
    prompt_messages: rec.ir_request?.messages?.slice() ?? [],
    response_messages: assistant ? [assistant] : [],
    tools: rec.ir_request?.tools?.slice() ?? [],
    finish_reason: rec.finish_reason,
    reward: 0,
    metadata: traceMetadata([rec], builder, ctx, {
      chain_index: chainIndex,
      started_by: startedBy,
      interstitial_tokens: 0,
      ...(problem === null ? {} : { capture_error: problem }),
    }),
  };
}
