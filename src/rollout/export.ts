/**
 * Exports of a results database (`polar export`): trainer rows as JSONL or Parquet (one trace per row), and an
 * accepted-sessions dataset in OpenAI Chat messages form for offline training (COMPLETED sessions with reward > 0).
 * A session with completion records but no SessionResult (a `polar proxy` capture, or a session still running) is
 * *unevaluated*: its trajectory is built from the records with a builder, and its rows carry `reward: null`,
 * `advantage: null` and `metadata.evaluated: false`.
 * Retries of `polar run --max-retries` are folded into the task they re-ran (src/rollout/run-retries.ts finalGroups):
 * a retry's rows carry that task's `task_id`, `group_id` and `sample_index`, advantages are over the task's samples by
 * their last attempts, and the failed attempts a retry replaced are left out (`ExportResult.replacedSessions`).
 * Every trainer row also carries the Trace fields of docs/architecture.md#data-model, `finish_reason` `{unified, raw}` (mask truncated samples with
 * `unified === 'length'`), `prompt_messages`, `response_messages` and `tools`, the messages and tools in the same
 * OpenAI Chat shape as the messages export and the engine's request (`toOpenAiMessages`), and under `metadata` the trajectory's
 * `trajectory_status`, `training_filter`, `reconstruction_stats` and `evaluation` (null for an unevaluated session,
 * whose built trajectory is no verdict).
 * Parquet via hyparquet-writer (https://github.com/hyparam/hyparquet-writer); messages shape:
 * https://platform.openai.com/docs/api-reference/chat/create (messages, tools).
 */
import { writeFileSync } from 'node:fs';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { type FinishReason, type IRMessage, type IRTool } from '../core/ir.ts';
import type { BuilderName, CompletionRecord, SessionResult, Trace } from '../core/records.ts';
import { encodeChatMessages, encodeChatTools, ENGINE_CHAT_ENCODING } from '../dialects/openai-chat/encode-messages.ts';
import type { Store } from '../store/index.ts';
import { buildTrajectory, selectAttempt, trajectoryAttempt } from '../trace/index.ts';
import { isUsable, rewardOf, type GroupRecord } from '../trace/groups.ts';
import { finalGroups } from './run-retries.ts';

/** One trainer row: one trace. Arrays of a row share the length of response_ids except prompt_ids. */
export interface ExportRow {
  prompt_ids: number[];
  response_ids: number[];
  /** 0/1 per response token. */
  loss_mask: number[];
  /** Per response token, or null when the engine gave none. */
  response_logprobs: number[] | null;
  /**
   * Why the trace's last completion ended: `unified` (stop | length | tool-calls | content-filter | error | other;
   * `length` = truncated by the token cap) and the engine's `raw` value (null when it gave none).
   */
  finish_reason: { unified: FinishReason['unified']; raw: string | null };
  /** The conversation before the trace's first response, OpenAI Chat messages. */
  prompt_messages: Record<string, unknown>[];
  /** What the trace's response covers (assistant turns and, when merged, the tool results between them), OpenAI Chat messages. */
  response_messages: Record<string, unknown>[];
  /** Tools offered to the model, OpenAI Chat `{type: 'function', function: {name, description?, parameters}}`. */
  tools: Record<string, unknown>[];
  /** The evaluated reward; null for an unevaluated or cancelled session. */
  reward: number | null;
  /**
   * The session's sample index within its task (0..num_samples-1), for a retry's session the index of the sample it
   * re-ran in the task it re-ran; null for a capture without a task.
   */
  sample_index: number | null;
  /**
   * The session's GRPO advantage within its group; 0 when an evaluated session is not in an evaluated group, null
   * for an unevaluated or cancelled session.
   */
  advantage: number | null;
  /**
   * Trace metadata (session_id, task_id, builder, harness, completion_ids, policy_versions, …) plus `status` (the
   * SessionResult's, or the session's for an unevaluated one), `group_id`, `loo_advantage`, `usable`, `evaluated`,
   * `trajectory_status`, `training_filter`, `reconstruction_stats`, `evaluation`, `session_task_id` (the request the
   * session ran under: `task_id`, or the `polar run` retry `<task_id>~retry<k>` that re-ran the sample; `task_id` is
   * always the task's) and `replaced_sessions` (sessions of the sample's earlier attempts a retry replaced, oldest first;
   * [] when it ran once).
   */
  metadata: Record<string, unknown>;
}

export interface ExportOptions {
  /** Builder for sessions without a SessionResult (default prefix_merging). */
  builder?: BuilderName;
  /** End-of-turn token ids for that builder (default: detected from the records). */
  eotIds?: number[];
  /** Leave out sessions without a SessionResult (the export of evaluated sessions only). */
  onlyEvaluated?: boolean;
}

/** Trainer rows plus how many sessions of each kind they come from. */
export interface ExportResult {
  rows: ExportRow[];
  /** Sessions with a stored SessionResult, cancelled ones left out (never judged). */
  evaluatedSessions: number;
  /** Sessions with records but no SessionResult, built now (0 with `onlyEvaluated`). */
  unevaluatedSessions: number;
  /** Unevaluated sessions left out by `onlyEvaluated`. */
  skippedUnevaluated: number;
  /** Failed attempts (infrastructure failures) left out because a `polar run` retry re-ran their sample. */
  replacedSessions: number;
}

/** Where a session's rows go: its task's sample (a retry's folded into the task it re-ran) and group. */
interface Placement {
  task_id: string;
  sample_index: number;
  session_task_id: string;
  replaced: string[];
  /** The task's evaluated group and this session's index in its `sessions`; null when not in one. */
  group: GroupRecord | null;
  index: number;
}

/**
 * Every session of every stored task placed in its task's group by its last attempt (finalGroups): the placements
 * in task then sample order, and the sessions a retry replaced.
 */
function placements(store: Store): { order: Map<string, number>; place: Map<string, Placement>; replaced: Set<string> } {
  const order = new Map<string, number>();
  const place = new Map<string, Placement>();
  const replaced = new Set<string>();
  for (const final of finalGroups(store, store.tasks.list().map((t) => t.task.task_id))) {
    const index = new Map(final.group?.sessions.map((s, i) => [s.session_id, i]) ?? []);
    for (const sample of final.samples) {
      order.set(sample.session_id, order.size);
      place.set(sample.session_id, {
        task_id: final.task_id, sample_index: sample.sample_index, session_task_id: sample.session_task_id, replaced: sample.replaced,
        group: index.has(sample.session_id) ? final.group : null, index: index.get(sample.session_id) ?? -1,
      });
      for (const id of sample.replaced) replaced.add(id);
    }
  }
  return { order, place, replaced };
}

/** The rows of `exportTraces` alone. */
export function exportRows(store: Store, opts: ExportOptions = {}): ExportRow[] {
  return exportTraces(store, opts).rows;
}

/** A cancelled session was never judged: its rows (traces of a session cancelled in POSTRUN) carry no reward. */
const judged = (result: SessionResult): boolean => result.status !== 'CANCELLED';

/**
 * Every trace of every stored session result, in task then sample order, each with the GRPO group of its task (a
 * `polar run` retry's folded into the task it re-ran; the failed attempts it replaced left out); then (unless
 * `onlyEvaluated`) the traces of every session that has records but no result, built with `opts.builder`, in order of
 * their first record.
 * @throws Error from the builder (a corrupt record set: another session's record, a duplicate completion_id)
 */
export function exportTraces(store: Store, opts: ExportOptions = {}): ExportResult {
  const rows: ExportRow[] = [];
  const { order, place, replaced } = placements(store);
  const all = store.results.listAll();
  const results = sortBy(all.filter((r) => !replaced.has(r.session_id)), order);
  for (const result of results) {
    const at = place.get(result.session_id);
    const group = at?.group ?? null;
    const meta = result.trajectory.metadata;
    const evaluated = judged(result);
    result.trajectory.traces.forEach((trace, t) => {
      rows.push({
        ...traceFields(trace, `session ${result.session_id} trace ${t}`),
        reward: evaluated ? trace.reward : null,
        sample_index: at?.sample_index ?? store.sessions.get(result.session_id)?.sample_index ?? null,
        advantage: evaluated ? group?.grpo_advantages[at!.index] ?? 0 : null,
        metadata: {
          ...trace.metadata, ...folding(at), status: result.status, group_id: group?.group_id ?? null, loo_advantage: group?.loo_advantages[at!.index] ?? 0,
          usable: isUsable(result), evaluated, trajectory_status: result.trajectory.status, training_filter: meta?.training_filter ?? null,
          reconstruction_stats: meta?.reconstruction_stats ?? null, evaluation: meta?.evaluation ?? null,
        },
      });
    });
  }
  const evaluatedSessions = results.filter(judged).length;
  const unevaluated = unevaluatedSessionIds(store, all);
  const counts = { evaluatedSessions, replacedSessions: all.length - results.length };
  if (opts.onlyEvaluated) return { rows, ...counts, unevaluatedSessions: 0, skippedUnevaluated: unevaluated.length };
  const strategy = opts.builder ?? 'prefix_merging';
  for (const sessionId of unevaluated) {
    const session = store.sessions.get(sessionId);
    const at = place.get(sessionId);
    const trajectory = buildTrajectory(store.completions.listBySession(sessionId), {
      strategy,
      ...(opts.eotIds ? { eotIds: opts.eotIds } : {}),
      session_id: sessionId,
      task_id: session?.task_id ?? 'unknown',
      harness: (session ? store.tasks.get(session.task_id)?.task.agent.harness : undefined) ?? 'unknown',
      // Not a verdict: COMPLETED keeps the builder's mask (the training filter zeroes it for any other status).
      status: 'COMPLETED',
    });
    trajectory.traces.forEach((trace, t) => {
      rows.push({
        ...traceFields(trace, `session ${sessionId} trace ${t}`),
        reward: null,
        sample_index: at?.sample_index ?? session?.sample_index ?? null,
        advantage: null,
        metadata: {
          ...trace.metadata,
          ...folding(at),
          status: session?.status ?? null,
          group_id: null,
          loo_advantage: null,
          usable: false,
          evaluated: false,
          trajectory_status: null,
          training_filter: null,
          reconstruction_stats: trajectory.metadata.reconstruction_stats,
          evaluation: null,
        },
      });
    });
  }
  return { rows, ...counts, unevaluatedSessions: unevaluated.length, skippedUnevaluated: 0 };
}

/** The metadata a placement sets: the task's `task_id`, `session_task_id` and `replaced_sessions` ({} for a session of no stored task). */
function folding(at: Placement | undefined): Record<string, unknown> {
  return at ? { task_id: at.task_id, session_task_id: at.session_task_id, replaced_sessions: at.replaced } : {};
}

/**
 * The token and Trace fields of a row: ids, mask and logprobs as stored, finish_reason with `raw` null when absent,
 * messages and tools converted from the IR to OpenAI Chat form.
 * @param where names the trace in errors
 * @throws Error when a message or tool is not in IR form (a corrupt stored trajectory)
 */
function traceFields(trace: Trace, where: string): Pick<ExportRow, 'prompt_ids' | 'response_ids' | 'loss_mask' | 'response_logprobs' | 'finish_reason' | 'prompt_messages' | 'response_messages' | 'tools'> {
  const finish = trace.finish_reason as Partial<FinishReason> | undefined;
  return {
    prompt_ids: trace.prompt_ids,
    response_ids: trace.response_ids,
    loss_mask: trace.loss_mask,
    response_logprobs: trace.response_logprobs,
    finish_reason: { unified: finish?.unified ?? 'other', raw: finish?.raw ?? null },
    prompt_messages: irMessagesToOpenAi(trace.prompt_messages, `${where} prompt_messages`),
    response_messages: irMessagesToOpenAi(trace.response_messages, `${where} response_messages`),
    tools: irToolsToOpenAi(trace.tools, `${where} tools`),
  };
}

const IR_ROLES = new Set(['system', 'user', 'assistant', 'tool']);

function irMessagesToOpenAi(messages: unknown, where: string): Record<string, unknown>[] {
  if (messages === undefined || messages === null) return [];
  if (!Array.isArray(messages)) throw new Error(`${where}: expected an array of messages, got ${typeof messages}`);
  return toOpenAiMessages(messages.map((m, i) => {
    const message = m as { role?: unknown; content?: unknown } | null;
    if (typeof message !== 'object' || message === null || !IR_ROLES.has(message.role as string) || !Array.isArray(message.content)) {
      throw new Error(`${where}[${i}]: not an IR message ({role, content: parts[]})`);
    }
    return message as IRMessage;
  }));
}

function irToolsToOpenAi(tools: unknown, where: string): Record<string, unknown>[] {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) throw new Error(`${where}: expected an array of tools, got ${typeof tools}`);
  return encodeChatTools(tools.map((tool, i) => {
    if (typeof (tool as { name?: unknown } | null)?.name !== 'string') throw new Error(`${where}[${i}]: not an IR tool ({name, parameters})`);
    return tool as IRTool;
  }));
}

/** Sessions with completion records and no SessionResult, in order of their first record. */
export function unevaluatedSessionIds(store: Store, results: readonly SessionResult[] = store.results.listAll()): string[] {
  const evaluated = new Set(results.map((r) => r.session_id));
  return store.completions.listSessionIds().filter((id) => !evaluated.has(id));
}

/** `results` in the order of `order` (session id → position); sessions it lacks last, in their own order. */
function sortBy(results: SessionResult[], order: ReadonlyMap<string, number>): SessionResult[] {
  return results.sort((a, b) => (order.get(a.session_id) ?? Infinity) - (order.get(b.session_id) ?? Infinity));
}

/** Write rows as JSON Lines. @returns the number of rows written. */
export function writeJsonl(rows: readonly ExportRow[], path: string): number {
  writeFileSync(path, rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : ''));
  return rows.length;
}

/**
 * Write rows as Parquet: prompt_ids/response_ids/loss_mask as LIST<INT32>, response_logprobs as optional LIST<FLOAT>,
 * reward/advantage as optional DOUBLE (null for unevaluated sessions); the columns a trainer filters or groups by as
 * plain strings: `finish_reason` (the unified value; the engine's raw one in `finish_reason_raw`), `group_id`,
 * `session_id`, `task_id`, `status` (each also kept inside `metadata`); prompt_messages, response_messages, tools and
 * metadata as JSON. @returns the number of rows written.
 */
export function writeParquet(rows: readonly ExportRow[], path: string): number {
  const intList = (name: string) => [
    { name, repetition_type: 'REQUIRED' as const, converted_type: 'LIST' as const, num_children: 1 },
    { name: 'list', repetition_type: 'REPEATED' as const, num_children: 1 },
    { name: 'element', type: 'INT32' as const, repetition_type: 'REQUIRED' as const },
  ];
  const text = (name: string, repetition: 'REQUIRED' | 'OPTIONAL') => ({ name, type: 'BYTE_ARRAY' as const, converted_type: 'UTF8' as const, repetition_type: repetition });
  const json = (name: string) => ({ name, type: 'BYTE_ARRAY' as const, converted_type: 'JSON' as const, repetition_type: 'REQUIRED' as const });
  const metaText = (r: ExportRow, key: string): string | null => (typeof r.metadata[key] === 'string' ? (r.metadata[key] as string) : null);
  const buffer = parquetWriteBuffer({
    columnData: [
      { name: 'prompt_ids', data: rows.map((r) => r.prompt_ids) },
      { name: 'response_ids', data: rows.map((r) => r.response_ids) },
      { name: 'loss_mask', data: rows.map((r) => r.loss_mask) },
      { name: 'response_logprobs', data: rows.map((r) => r.response_logprobs) },
      { name: 'reward', data: rows.map((r) => r.reward) },
      { name: 'advantage', data: rows.map((r) => r.advantage) },
      { name: 'sample_index', data: rows.map((r) => r.sample_index) },
      { name: 'finish_reason', data: rows.map((r) => r.finish_reason.unified) },
      { name: 'finish_reason_raw', data: rows.map((r) => r.finish_reason.raw) },
      { name: 'group_id', data: rows.map((r) => metaText(r, 'group_id')) },
      { name: 'session_id', data: rows.map((r) => metaText(r, 'session_id')) },
      { name: 'task_id', data: rows.map((r) => metaText(r, 'task_id')) },
      { name: 'status', data: rows.map((r) => metaText(r, 'status')) },
      { name: 'prompt_messages', data: rows.map((r) => r.prompt_messages) },
      { name: 'response_messages', data: rows.map((r) => r.response_messages) },
      { name: 'tools', data: rows.map((r) => r.tools) },
      { name: 'metadata', data: rows.map((r) => r.metadata) },
    ],
    schema: [
      { name: 'root', num_children: 17 },
      ...intList('prompt_ids'),
      ...intList('response_ids'),
      ...intList('loss_mask'),
      { name: 'response_logprobs', repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
      { name: 'element', type: 'FLOAT', repetition_type: 'REQUIRED' },
      { name: 'reward', type: 'DOUBLE', repetition_type: 'OPTIONAL' },
      { name: 'advantage', type: 'DOUBLE', repetition_type: 'OPTIONAL' },
      { name: 'sample_index', type: 'INT32', repetition_type: 'OPTIONAL' },
      text('finish_reason', 'REQUIRED'),
      text('finish_reason_raw', 'OPTIONAL'),
      text('group_id', 'OPTIONAL'),
      text('session_id', 'OPTIONAL'),
      text('task_id', 'OPTIONAL'),
      text('status', 'OPTIONAL'),
      json('prompt_messages'),
      json('response_messages'),
      json('tools'),
      json('metadata'),
    ],
    createdBy: 'polar export',
  });
  writeFileSync(path, new Uint8Array(buffer));
  return rows.length;
}

/** One session in OpenAI Chat form: an accepted one, or (when asked for) an unevaluated one with `reward: null`. */
export interface MessagesRow {
  messages: Record<string, unknown>[];
  tools: Record<string, unknown>[];
  /**
   * `task_id` and `sample_index` are the task's (a `polar run` retry's session: the task and sample it re-ran);
   * `sample_index` is null for a capture without a task.
   */
  metadata: { session_id: string; task_id: string; sample_index: number | null; reward: number | null; completion_id: string; evaluated: boolean };
}

/**
 * Accepted sessions (COMPLETED, reward > 0) as OpenAI Chat conversations: the request of the session's completion
 * with the longest conversation (the main thread; sub-agent calls are shorter) plus that completion's answer. With
 * `includeUnevaluated`, then every session that has records but no SessionResult, the same way, with `reward: null`
 * and `evaluated: false` (nobody has judged those conversations: do not train on them as accepted).
 */
export function acceptedMessages(store: Store, opts: { includeUnevaluated?: boolean } = {}): MessagesRow[] {
  const out: MessagesRow[] = [];
  const { order, place } = placements(store);
  const all = store.results.listAll();
  /** The task and sample a session's row names (a retry's: the one it re-ran). */
  const where = (sessionId: string, taskId: string) => {
    const at = place.get(sessionId);
    return at ? { task_id: at.task_id, sample_index: at.sample_index } : { task_id: taskId, sample_index: store.sessions.get(sessionId)?.sample_index ?? null };
  };
  for (const result of sortBy([...all], order)) {
    const reward = rewardOf(result);
    // A replaced attempt failed (ERROR), so it is never accepted.
    if (result.status !== 'COMPLETED' || !(reward > 0)) continue;
    const row = conversationOf(store, result.session_id, where(result.session_id, result.task_id), reward, trajectoryAttempt(result.trajectory) ?? 0);
    if (row) out.push(row);
  }
  if (opts.includeUnevaluated) {
    for (const sessionId of unevaluatedSessionIds(store, all)) {
      const row = conversationOf(store, sessionId, where(sessionId, store.sessions.get(sessionId)?.task_id ?? 'unknown'), null);
      if (row) out.push(row);
    }
  }
  return out;
}

/**
 * The session's main-thread conversation, or null when no record has a response. Only records of `attempt` (the
 * result's; default the latest) count: a killed earlier attempt's conversation is not the one that was judged.
 */
function conversationOf(store: Store, sessionId: string, at: { task_id: string; sample_index: number | null }, reward: number | null, attempt?: number): MessagesRow | null {
  let best: CompletionRecord | null = null;
  for (const rec of selectAttempt(store.completions.listBySession(sessionId), attempt).records) {
    if (rec.ir_response && (!best || rec.ir_request.messages.length >= best.ir_request.messages.length)) best = rec;
  }
  if (!best?.ir_response) return null;
  const response = best.ir_response;
  const final: IRMessage = { role: 'assistant', content: response.content, toolCalls: response.toolCalls };
  if (response.reasoning) final.reasoning = response.reasoning;
  return {
    messages: toOpenAiMessages([...best.ir_request.messages, final]),
    tools: encodeChatTools(best.ir_request.tools),
    metadata: { session_id: sessionId, task_id: at.task_id, sample_index: at.sample_index, reward, completion_id: best.completion_id, evaluated: reward !== null },
  };
}

/** Write accepted sessions as JSON Lines. @returns the number of sessions written. */
export function writeMessages(rows: readonly MessagesRow[], path: string): number {
  writeFileSync(path, rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : ''));
  return rows.length;
}

/**
 * IR messages → OpenAI Chat messages, exactly as the engine received them in chat mode and token mode's renderer
 * read them (the one encoder, dialects/openai-chat/encode-messages.ts, with the engine options).
 */
export function toOpenAiMessages(messages: readonly IRMessage[]): Record<string, unknown>[] {
  return encodeChatMessages(messages, ENGINE_CHAT_ENCODING).messages as unknown as Record<string, unknown>[];
}
