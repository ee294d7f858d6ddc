/**
 * The `prefix_merging` builder (paper §3.4.2, docs/architecture.md#trajectory-builders): the completions of one agent conversation become
 * one trace `a_1 ‖ u_1 ‖ a_2 ‖ … ‖ a_K`, sampled answers `a` (mask 1, real logprobs) joined by the canonical
 * interstitials `u` (tool results, template glue; mask 0, logprob 0.0) cut from the next prompt.
 *
 * Beyond Polar: a failed split or a prefix break opens a new chain from that completion, so no completion is ever
 * dropped, and a record with an unsound capture gets a chain of its own (masked), so it is never silently merged.
 * Sources: "Polar: Agentic RL on Any Harness at Scale" (arXiv 2605.24220) §3.4.2; Polar's
 * `src/polar/trajectory/builder/prefix_merging.py` (NVIDIA-NeMo/ProRL-Agent-Server), which this follows for the split.
 */
import type { CompletionRecord, ReconstructionStats, Trace } from '../core/records.ts';
import {
  BREAK_REASONS,
  type BreakReason,
  type BuildContext,
  type ChainStart,
  assistantMessage,
  captureProblem,
  singleTrace,
  traceMetadata,
} from './trace-parts.ts';

/** Finish reasons whose last sampled id is the model's own end-of-turn token (vLLM reports tool calls separately). */
const NATURAL_STOPS = new Set(['stop', 'tool-calls']);

interface Chain {
  index: number;
  members: CompletionRecord[];
  startedBy: ChainStart;
  /** prompt_ids of the last member: a later completion joins when this is a strict prefix of its prompt. */
  tip: number[];
  lastResponse: number[];
  /** Sequence number of the last member (ties between equal tips go to the most recent chain). */
  lastSeq: number;
  responseIds: number[];
  lossMask: number[];
  logprobs: number[];
  responseMessages: unknown[];
  /** Request messages already accounted for (the prompt plus every turn merged so far). */
  messagesSeen: number;
  interstitialTokens: number;
  /**
   * Joins where the next prompt did not contain the sampled answer verbatim (the engine re-rendered it: dropped
   * reasoning, re-serialised tool-call JSON, …). The trace still trains on the sampled tokens, but the engine's next
   * turn was conditioned on the re-rendered ones. Chat mode only; token mode keeps it at 0 by construction.
   */
  rerenderMismatches: number;
  /** Set for a closed single-record chain (capture error): built at once, never extended. */
  closed: Trace | null;
}

/**
 * The end-of-turn id detected from the records: the last sampled id of the first sound completion (seq order) that
 * finished naturally (`stop`, or `tool-calls`, which ends on the same template token). Null when there is none.
 */
export function detectEotId(records: readonly CompletionRecord[]): number | null {
  for (const rec of records) {
    if (!NATURAL_STOPS.has(rec.finish_reason?.unified) || captureProblem(rec) !== null) continue;
    const last = rec.response_ids[rec.response_ids.length - 1];
    if (last !== undefined) return last;
  }
  return null;
}

/**
 * True when `tip` is a strict prefix of `ids`. Cheap probes (last, first, middle) reject most non-matching tips in
 * O(1); a match costs one pass over the tip, which no exact check can avoid.
 */
export function isStrictPrefix(tip: readonly number[], ids: readonly number[]): boolean {
  const n = tip.length;
  if (n === 0 || n >= ids.length) return false;
  if (tip[n - 1] !== ids[n - 1] || tip[0] !== ids[0] || tip[n >> 1] !== ids[n >> 1]) return false;
  for (let i = 0; i < n; i++) if (tip[i] !== ids[i]) return false;
  return true;
}

/**
 * Build prefix-merged traces for one session's records (already in seq order).
 * @returns one trace per chain, in order of each chain's first completion, and the reconstruction stats
 *   (`merged` counts completions placed into traces, which is all of them).
 */
export function buildPrefixMerged(
  records: readonly CompletionRecord[],
  ctx: BuildContext,
): { traces: Trace[]; stats: ReconstructionStats; eotIds: number[] } {
  const breaks: Record<string, number> = {};
  for (const reason of BREAK_REASONS) breaks[reason] = 0;
  const detected = ctx.eotIds === null ? detectEotId(records) : null;
  const eotIds: number[] = ctx.eotIds !== null ? [...ctx.eotIds] : detected === null ? [] : [detected];
  const eotSet = new Set(eotIds);
  const singleEot = eotIds.length === 1 ? eotIds[0]! : null;

  const chains: Chain[] = [];
  const open: Chain[] = [];

  const openChain = (rec: CompletionRecord, startedBy: ChainStart): Chain => {
    if (startedBy !== 'first') breaks[startedBy] = (breaks[startedBy] ?? 0) + 1;
    const assistant = assistantMessage(rec);
    const chain: Chain = {
      index: chains.length,
      members: [rec],
      startedBy,
      tip: rec.prompt_ids,
      lastResponse: rec.response_ids,
      lastSeq: rec.seq,
      responseIds: rec.response_ids.slice(),
      lossMask: new Array<number>(rec.response_ids.length).fill(1),
      logprobs: rec.logprobs.slice(),
      responseMessages: assistant ? [assistant] : [],
      messagesSeen: (rec.ir_request?.messages?.length ?? 0) + 1,
      interstitialTokens: 0,
      rerenderMismatches: 0,
      closed: null,
    };
    chains.push(chain);
    open.push(chain);
    return chain;
  };

  for (const rec of records) {
    if (captureProblem(rec) !== null) {
      const index = chains.length;
      breaks.capture_error = (breaks.capture_error ?? 0) + 1;
      chains.push({
        index, members: [rec], startedBy: 'capture_error', tip: [], lastResponse: [], lastSeq: rec.seq,
        responseIds: [], lossMask: [], logprobs: [], responseMessages: [], messagesSeen: 0, interstitialTokens: 0, rerenderMismatches: 0,
        closed: singleTrace(rec, 'prefix_merging', ctx, index, 'capture_error'),
      });
      continue;
    }
    const prompt = rec.prompt_ids;
    // Of the chains this prompt extends, the one whose sampled answer it holds verbatim (a retried turn leaves two
    // chains with the same tip: the harness continued one of the answers); of several at that tip, the longest answer
    // (an empty or truncated retry is a prefix of the answer the conversation went on from); else the longest, most
    // recent tip. Tips are compared lazily, longest first; the search stops below the tip of the first verbatim join.
    let join: Join | null = null;
    let extended = false;
    for (const candidate of shorterTips(open, prompt)) {
      if (join?.verbatim && candidate.tip.length < join.chain.tip.length) break;
      if (!isStrictPrefix(candidate.tip, prompt)) continue;
      const found = joinOf(candidate, prompt, eotSet, singleEot);
      if (!extended || (found?.verbatim && !(join?.verbatim && join.chain.lastResponse.length >= found.chain.lastResponse.length))) join = found;
      extended = true;
    }
    if (!extended) {
      openChain(rec, open.length === 0 ? 'first' : droppedMessageOf(open, rec) ? 'dropped_message' : 'prefix_break');
      continue;
    }
    if (join === null) {
      openChain(rec, eotSet.size === 0 ? 'eot_unknown' : 'no_eot');
      continue;
    }
    // Token mode renders every prompt itself and keeps sampled answers verbatim, so a prompt that does not hold the
    // answer means the client changed the history (the proxy started a new token buffer): a new chain, never a
    // re-rendered join. Chat mode joins and counts it (the template re-rendered the answer).
    if (!join.verbatim && rec.mode === 'token') {
      openChain(rec, 'history_changed');
      continue;
    }
    const { chain, from } = join;
    if (!join.verbatim) chain.rerenderMismatches++;
    const { responseIds, lossMask, logprobs } = chain;
    for (let i = from; i < prompt.length; i++) {
      responseIds.push(prompt[i]!);
      lossMask.push(0);
      logprobs.push(0);
    }
    chain.interstitialTokens += prompt.length - from;
    const sampled = rec.response_ids;
    const lps = rec.logprobs;
    for (let i = 0; i < sampled.length; i++) {
      responseIds.push(sampled[i]!);
      lossMask.push(1);
      logprobs.push(lps[i]!);
    }
    const messages = rec.ir_request?.messages ?? [];
    for (let i = chain.messagesSeen; i < messages.length; i++) chain.responseMessages.push(messages[i]);
    const assistant = assistantMessage(rec);
    if (assistant) chain.responseMessages.push(assistant);
    chain.messagesSeen = messages.length + 1;
    chain.members.push(rec);
    chain.tip = prompt;
    chain.lastResponse = sampled;
    chain.lastSeq = rec.seq;
  }

  const traces = chains.map((chain) => chain.closed ?? finishChain(chain, ctx));
  const stats: ReconstructionStats = {
    completions: records.length,
    chains: chains.length,
    merged: chains.reduce((n, c) => n + c.members.length, 0),
    breaks,
    rerender_mismatches: chains.reduce((n, c) => n + c.rerenderMismatches, 0),
  };
  return { traces, stats, eotIds };
}

/**
 * Whether `rec` continues the conversation of an open chain except for the trailing user message(s) that chain's last
 * request ended with: its messages repeat that request's up to those messages, then go on with an assistant message
 * (the answer) where the dropped ones stood. Compares the request messages (the ids cannot say which message a token
 * came from).
 */
function droppedMessageOf(open: readonly Chain[], rec: CompletionRecord): boolean {
  const next = rec.ir_request?.messages;
  if (!next) return false;
  for (const chain of open) {
    const prev = chain.members[chain.members.length - 1]!.ir_request?.messages;
    if (!prev || prev.length === 0 || prev[prev.length - 1]!.role !== 'user') continue;
    let same = 0;
    while (same < prev.length && same < next.length && JSON.stringify(prev[same]) === JSON.stringify(next[same])) same++;
    if (same === prev.length || next[same]?.role !== 'assistant') continue;
    let droppedAreUser = true;
    for (let i = same; i < prev.length; i++) if (prev[i]!.role !== 'user') droppedAreUser = false;
    if (droppedAreUser && same > 0) return true;
  }
  return false;
}

/** The open chains whose tip is shorter than `prompt`, longest tip first (ties: the most recently extended first). */
function shorterTips(open: readonly Chain[], prompt: readonly number[]): Chain[] {
  const candidates: Chain[] = [];
  for (const chain of open) if (chain.tip.length < prompt.length) candidates.push(chain);
  return candidates.sort((a, b) => b.tip.length - a.tip.length || b.lastSeq - a.lastSeq);
}

/** Where a prompt joins a chain: the interstitial starts at `from`; `verbatim` when the prompt holds the sampled answer. */
interface Join {
  chain: Chain;
  from: number;
  verbatim: boolean;
}

/**
 * How `prompt` continues `chain` (whose tip it extends). When the tail starts with the chain's last sampled answer,
 * verbatim, the interstitial starts right after it, whatever id that answer ended on (a stop id other than the
 * end-of-turn one, such as Qwen's `<|endoftext|>`, or none when truncated). Otherwise the answer was re-rendered, and
 * the first end-of-turn id after the tip closes it as the engine saw it. Null when neither finds the split. Reads only
 * the tail, so O(new tokens).
 */
function joinOf(chain: Chain, prompt: readonly number[], eotSet: ReadonlySet<number>, singleEot: number | null): Join | null {
  const start = chain.tip.length;
  const sampled = chain.lastResponse;
  if (start + sampled.length <= prompt.length) {
    let same = 0;
    while (same < sampled.length && prompt[start + same] === sampled[same]) same++;
    if (same === sampled.length) return { chain, from: start + same, verbatim: true };
  }
  let eotAt = -1;
  if (singleEot !== null) {
    for (let i = start; i < prompt.length; i++) if (prompt[i] === singleEot) { eotAt = i; break; }
  } else if (eotSet.size > 0) {
    for (let i = start; i < prompt.length; i++) if (eotSet.has(prompt[i]!)) { eotAt = i; break; }
  }
  if (eotAt < 0) return null;
  const prevLast = chain.lastResponse[chain.lastResponse.length - 1];
  // A truncated answer has no EOT of its own: the interstitial then starts at the canonical EOT that closes it.
  // tail[0, from) is the previous answer as the engine saw it in this prompt, which differs from the sampled one.
  return { chain, from: prevLast !== undefined && eotSet.has(prevLast) ? eotAt + 1 : eotAt, verbatim: false };
}

function finishChain(chain: Chain, ctx: BuildContext): Trace {
  const first = chain.members[0]!;
  const last = chain.members[chain.members.length - 1]!;
  return {
    prompt_ids: first.prompt_ids.slice(),
    response_ids: chain.responseIds,
    loss_mask: chain.lossMask,
    response_logprobs: chain.logprobs,
    prompt_messages: first.ir_request?.messages?.slice() ?? [],
    response_messages: chain.responseMessages,
    tools: first.ir_request?.tools?.slice() ?? [],
    finish_reason: last.finish_reason,
    reward: 0,
    metadata: traceMetadata(chain.members, 'prefix_merging', ctx, {
      chain_index: chain.index,
      started_by: chain.startedBy,
      interstitial_tokens: chain.interstitialTokens,
      rerender_mismatches: chain.rerenderMismatches,
    }),
  };
}

export type { BreakReason };
