/**
 * Chain roles: what each trace of a session is, so trainers and summaries can tell the agent's own conversation
 * from the requests a harness makes on the side.
 * - `main`: the agent conversation: the system prompt and tool set with the most distinct prompts (turns) in the
 *   session; its first chain, and any later chain of it that does not shorten the history.
 * - `side`: a request with another system prompt or tool set (loop detection, next-speaker checks, titles, sub-agents).
 * - `retry`: an attempt the harness abandoned for a re-sample of the same prompt (a client retry after an error or an
 *   unusable answer). A chain whose first prompt repeats an earlier completion's supersedes the latest earlier chain
 *   that ended at that prompt (its answer was never continued): it takes that chain's role, and that chain, when it is
 *   nothing but the abandoned completion, becomes the `retry` (`duplicate`, `source_chain` = the chain that superseded
 *   it). A re-sample of a prompt whose earlier answer the conversation went on from is the `retry` itself (`duplicate`
 *   when it is nothing but that re-sample). So the attempt the harness kept (continued, or sampled last) keeps the role,
 *   in both builders; an abandoned answer inside a longer chain stays in it.
 * - `compaction`: a new chain of the main conversation whose history is shorter than the main conversation had
 *   reached (the harness summarised its history).
 * Each trace gets `metadata.chain_role`, `metadata.source_chain` (the chain_index it came from: the repeated chain,
 * the compacted chain, or for a side chain the main chain it was made alongside; null when none) and
 * `metadata.reward_policy`.
 * `builder.config` decides what training keeps: `side: keep|drop` (default keep), `retries: keep|drop_duplicates|drop`
 * (default drop_duplicates), `side_reward: outcome|zero` (default outcome: a broadcast outcome reward reaches side
 * chains too; zero gives them 0). Dropped traces are counted in `reconstruction_stats.dropped_traces`; their
 * completions stay stored.
 */
import type { z } from 'zod';
import { builderConfigSchema } from '../core/contracts/task.ts';
import type { CompletionRecord, Trace } from '../core/records.ts';

export type ChainRole = 'main' | 'side' | 'retry' | 'compaction';
export const CHAIN_ROLES: readonly ChainRole[] = ['main', 'side', 'retry', 'compaction'];

export type BuilderConfig = Required<z.output<typeof builderConfigSchema>>;
const DEFAULTS: BuilderConfig = { side: 'keep', retries: 'drop_duplicates', side_reward: 'outcome' };

/**
 * Validate a TaskRequest's `builder.config`.
 * @throws Error naming `builder.config.<key>` for an unknown key or a bad value.
 */
export function parseBuilderConfig(config: unknown): BuilderConfig {
  const result = builderConfigSchema.safeParse(config ?? {});
  if (result.success) return { ...DEFAULTS, ...result.data };
  const issue = result.error.issues[0]!;
  const keys = issue.code === 'unrecognized_keys' ? (issue as { keys: string[] }).keys : [];
  const path = ['builder', 'config', ...issue.path.map(String), ...(keys.length > 0 ? [keys[0]!] : [])].join('.');
  throw new Error(`${path}: ${issue.message}`);
}

/** Chains per role. */
export type RoleCounts = Record<ChainRole, number>;

function signature(rec: CompletionRecord): string {
  const messages = rec.ir_request?.messages ?? [];
  let system = '';
  for (const m of messages) {
    if (m.role !== 'system') break;
    for (const part of m.content) if (part.type === 'text') system += part.text;
  }
  const tools = (rec.ir_request?.tools ?? []).map((t) => t.name).sort().join('\u0000');
  return `${system}\u0001${tools}`;
}

/** A key equal for identical prompts: the prompt ids when captured, else the request messages. */
function promptKey(rec: CompletionRecord): string {
  if (Array.isArray(rec.prompt_ids) && rec.prompt_ids.length > 0) {
    let h = 0x811c9dc5;
    for (const id of rec.prompt_ids) h = Math.imul(h ^ id, 0x01000193);
    return `ids:${rec.prompt_ids.length}:${h >>> 0}:${rec.prompt_ids.slice(-16).join(',')}`;
  }
  return `msgs:${JSON.stringify(rec.ir_request?.messages ?? null)}`;
}

/**
 * Label every trace of one session with its chain role (in place) and count them.
 * @param traces the builder's traces; `metadata.completion_ids` and `chain_index` are read.
 * @param records the records the traces were built from.
 */
export function labelChainRoles(traces: Trace[], records: readonly CompletionRecord[], config: BuilderConfig = parseBuilderConfig({})): RoleCounts {
  const counts: RoleCounts = { main: 0, side: 0, retry: 0, compaction: 0 };
  const byId = new Map(records.map((r) => [r.completion_id, r]));
  const chainOf = new Map<string, number>();
  for (const trace of traces) for (const id of trace.metadata.completion_ids) chainOf.set(id, trace.metadata.chain_index as number);
  // The main signature: the one with the most distinct prompts (turns; retries count once), the earliest on a tie.
  const tally = new Map<string, Set<string>>();
  // Each record's prompt key once (a hash over its whole prompt): the tally, the retry check and the chain ends read it.
  const keys = new Map<CompletionRecord, string>(records.map((rec) => [rec, promptKey(rec)]));
  const keyOf = (rec: CompletionRecord) => keys.get(rec)!;
  for (const rec of [...records].sort((a, b) => a.seq - b.seq)) {
    const sig = signature(rec);
    let prompts = tally.get(sig);
    if (!prompts) tally.set(sig, (prompts = new Set()));
    prompts.add(keyOf(rec));
  }
  let mainSig: string | null = null;
  for (const [sig, prompts] of tally) if (mainSig === null || prompts.size > tally.get(mainSig)!.size) mainSig = sig;

  /** Prompt key of a labelled chain's last completion → the latest such chain (and that completion's seq). */
  const endedAt = new Map<string, { trace: Trace; lastSeq: number }>();
  const firstOf = (trace: Trace) => byId.get(trace.metadata.completion_ids[0]!);
  const ordered = traces.filter((t) => firstOf(t) !== undefined).sort((a, b) => firstOf(a)!.seq - firstOf(b)!.seq);
  const sorted = [...records].sort((a, b) => a.seq - b.seq);
  const seenPrompts = new Map<string, CompletionRecord>();
  let cursor = 0;
  /** The latest main-signature record before the current chain, and the longest history the main conversation had. */
  let lastMain: CompletionRecord | null = null;
  let mainChainSeen = false;
  for (const trace of ordered) {
    const first = firstOf(trace)!;
    while (cursor < sorted.length && sorted[cursor]!.seq < first.seq) {
      const rec = sorted[cursor++]!;
      const key = keyOf(rec);
      if (!seenPrompts.has(key)) seenPrompts.set(key, rec);
      if (signature(rec) === mainSig) lastMain = rec;
    }
    const firstKey = keyOf(first);
    const repeated = seenPrompts.get(firstKey);
    // The latest earlier chain that ended at this very prompt: the harness asked it again instead of going on from that
    // chain's answer, so that answer was abandoned and this re-sample is the one the harness kept.
    const held = repeated === undefined ? undefined : endedAt.get(firstKey);
    const original = held !== undefined && held.lastSeq < first.seq ? held.trace : undefined;
    let role: ChainRole;
    let source: number | null = null;
    if (original !== undefined) {
      role = original.metadata.chain_role as ChainRole;
      source = (original.metadata.source_chain as number | null) ?? null;
      if (original.metadata.completion_ids.length === 1) {
        counts[role]--;
        counts.retry++;
        original.metadata.chain_role = 'retry';
        original.metadata.source_chain = trace.metadata.chain_index as number;
        original.metadata.duplicate = true;
        original.metadata.reward_policy = 'outcome';
      }
    } else if (repeated) {
      role = 'retry';
      source = chainOf.get(repeated.completion_id) ?? null;
      trace.metadata.duplicate = trace.metadata.completion_ids.length === 1;
    } else if (signature(first) !== mainSig) {
      role = 'side';
      source = lastMain ? (chainOf.get(lastMain.completion_id) ?? null) : null;
    } else if (!mainChainSeen) {
      role = 'main';
      mainChainSeen = true;
    } else if (lastMain && (first.ir_request?.messages?.length ?? 0) < (lastMain.ir_request?.messages?.length ?? 0)) {
      role = 'compaction';
      source = chainOf.get(lastMain.completion_id) ?? null;
    } else role = 'main';
    trace.metadata.chain_role = role;
    trace.metadata.source_chain = source;
    const lastId = trace.metadata.completion_ids.at(-1);
    const last = lastId === undefined ? undefined : byId.get(lastId);
    if (last !== undefined) endedAt.set(keyOf(last), { trace, lastSeq: last.seq });
    trace.metadata.reward_policy = role === 'side' && config.side_reward === 'zero' ? 'zero' : 'outcome';
    counts[role]++;
  }
  return counts;
}

/** Whether training keeps a labelled trace under `config`. */
export function keepsTrace(trace: Trace, config: BuilderConfig): boolean {
  const role = trace.metadata.chain_role;
  if (role === 'side') return config.side === 'keep';
  if (role === 'retry') return config.retries === 'keep' || (config.retries === 'drop_duplicates' && trace.metadata.duplicate !== true);
  return true;
}
