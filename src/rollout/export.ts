/**
 * Exports of a results database (`polar export`): trainer rows as JSONL or Parquet (one trace per row), and an
 * accepted-sessions dataset in OpenAI Chat messages form for offline training (COMPLETED sessions with reward > 0).
 * Parquet via hyparquet-writer (https://github.com/hyparam/hyparquet-writer); messages shape:
 * https://platform.openai.com/docs/api-reference/chat/create (messages, tools).
 */
import { writeFileSync } from 'node:fs';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { textOf, type IRMessage, type IRTool } from '../core/ir.ts';
import type { CompletionRecord, SessionResult } from '../core/records.ts';
import type { Store } from '../store/index.ts';
import { groupIdOf, isUsable, rewardOf } from './server.ts';
import { groupFromRow } from './store-port.ts';

/** One trainer row: one trace. Arrays of a row share the length of response_ids except prompt_ids. */
export interface ExportRow {
  prompt_ids: number[];
  response_ids: number[];
  /** 0/1 per response token. */
  loss_mask: number[];
  /** Per response token, or null when the engine gave none. */
  response_logprobs: number[] | null;
  reward: number;
  /** The session's GRPO advantage within its group; 0 when the session is not in an evaluated group. */
  advantage: number;
  /** Trace metadata plus status, group_id and the leave-one-out advantage. */
  metadata: Record<string, unknown>;
}

/** Every trace of every stored session result, in task then sample order. */
export function exportRows(store: Store): ExportRow[] {
  const rows: ExportRow[] = [];
  const advantageBySession = new Map<string, { grpo: number; loo: number; group_id: string }>();
  for (const task of store.tasks.list()) {
    const row = store.groups.get(groupIdOf(task.task));
    if (!row) continue;
    const group = groupFromRow(row);
    group.sessions.forEach((s, i) => advantageBySession.set(s.session_id, { grpo: group.grpo_advantages[i] ?? 0, loo: group.loo_advantages[i] ?? 0, group_id: group.group_id }));
  }
  for (const result of orderedResults(store)) {
    const adv = advantageBySession.get(result.session_id);
    for (const trace of result.trajectory.traces) {
      rows.push({
        prompt_ids: trace.prompt_ids,
        response_ids: trace.response_ids,
        loss_mask: trace.loss_mask,
        response_logprobs: trace.response_logprobs,
        reward: trace.reward,
        advantage: adv?.grpo ?? 0,
        metadata: { ...trace.metadata, status: result.status, group_id: adv?.group_id ?? null, loo_advantage: adv?.loo ?? 0, usable: isUsable(result) },
      });
    }
  }
  return rows;
}

function orderedResults(store: Store): SessionResult[] {
  const order = new Map<string, number>();
  let n = 0;
  for (const task of store.tasks.list()) for (const s of store.sessions.listByTask(task.task.task_id)) order.set(s.session_id, n++);
  return store.results.listAll().sort((a, b) => (order.get(a.session_id) ?? Infinity) - (order.get(b.session_id) ?? Infinity));
}

/** Write rows as JSON Lines. @returns the number of rows written. */
export function writeJsonl(rows: readonly ExportRow[], path: string): number {
  writeFileSync(path, rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : ''));
  return rows.length;
}

/**
 * Write rows as Parquet: prompt_ids/response_ids/loss_mask as LIST<INT32>, response_logprobs as optional LIST<FLOAT>,
 * reward/advantage as DOUBLE, metadata as JSON. @returns the number of rows written.
 */
export function writeParquet(rows: readonly ExportRow[], path: string): number {
  const intList = (name: string) => [
    { name, repetition_type: 'REQUIRED' as const, converted_type: 'LIST' as const, num_children: 1 },
    { name: 'list', repetition_type: 'REPEATED' as const, num_children: 1 },
    { name: 'element', type: 'INT32' as const, repetition_type: 'REQUIRED' as const },
  ];
  const buffer = parquetWriteBuffer({
    columnData: [
      { name: 'prompt_ids', data: rows.map((r) => r.prompt_ids) },
      { name: 'response_ids', data: rows.map((r) => r.response_ids) },
      { name: 'loss_mask', data: rows.map((r) => r.loss_mask) },
      { name: 'response_logprobs', data: rows.map((r) => r.response_logprobs) },
      { name: 'reward', data: rows.map((r) => r.reward) },
      { name: 'advantage', data: rows.map((r) => r.advantage) },
      { name: 'metadata', data: rows.map((r) => r.metadata) },
    ],
    schema: [
      { name: 'root', num_children: 7 },
      ...intList('prompt_ids'),
      ...intList('response_ids'),
      ...intList('loss_mask'),
      { name: 'response_logprobs', repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
      { name: 'element', type: 'FLOAT', repetition_type: 'REQUIRED' },
      { name: 'reward', type: 'DOUBLE', repetition_type: 'REQUIRED' },
      { name: 'advantage', type: 'DOUBLE', repetition_type: 'REQUIRED' },
      { name: 'metadata', type: 'BYTE_ARRAY', converted_type: 'JSON', repetition_type: 'REQUIRED' },
    ],
    createdBy: 'polar export',
  });
  writeFileSync(path, new Uint8Array(buffer));
  return rows.length;
}

/** One accepted session in OpenAI Chat form. */
export interface MessagesRow {
  messages: Record<string, unknown>[];
  tools: Record<string, unknown>[];
  metadata: { session_id: string; task_id: string; reward: number; completion_id: string };
}

/**
 * Accepted sessions (COMPLETED, reward > 0) as OpenAI Chat conversations: the request of the session's completion
 * with the longest conversation (the main thread; sub-agent calls are shorter) plus that completion's answer.
 */
export function acceptedMessages(store: Store): MessagesRow[] {
  const out: MessagesRow[] = [];
  for (const result of orderedResults(store)) {
    const reward = rewardOf(result);
    if (result.status !== 'COMPLETED' || !(reward > 0)) continue;
    let best: CompletionRecord | null = null;
    for (const rec of store.completions.listBySession(result.session_id)) {
      if (rec.ir_response && (!best || rec.ir_request.messages.length >= best.ir_request.messages.length)) best = rec;
    }
    if (!best?.ir_response) continue;
    const response = best.ir_response;
    const final: IRMessage = { role: 'assistant', content: response.content, toolCalls: response.toolCalls };
    if (response.reasoning) final.reasoning = response.reasoning;
    out.push({
      messages: [...best.ir_request.messages, final].map(toOpenAiMessage),
      tools: best.ir_request.tools.map(toOpenAiTool),
      metadata: { session_id: result.session_id, task_id: result.task_id, reward, completion_id: best.completion_id },
    });
  }
  return out;
}

/** Write accepted sessions as JSON Lines. @returns the number of sessions written. */
export function writeMessages(rows: readonly MessagesRow[], path: string): number {
  writeFileSync(path, rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : ''));
  return rows.length;
}

function contentOf(parts: IRMessage['content']): string | Record<string, unknown>[] {
  if (parts.every((p) => p.type === 'text')) return textOf(parts);
  return parts.map((p) =>
    p.type === 'text' ? { type: 'text', text: p.text } : { type: 'image_url', image_url: { url: p.url ?? `data:${p.mediaType};base64,${p.data ?? ''}` } },
  );
}

/** IR message → OpenAI Chat message (reasoning as `reasoning_content`, as vLLM/SGLang return it). */
export function toOpenAiMessage(message: IRMessage): Record<string, unknown> {
  switch (message.role) {
    case 'system':
    case 'user':
      return { role: message.role, content: contentOf(message.content) };
    case 'tool':
      return { role: 'tool', tool_call_id: message.toolCallId, content: contentOf(message.content) };
    case 'assistant': {
      const out: Record<string, unknown> = { role: 'assistant', content: textOf(message.content) || null };
      if (message.reasoning?.text) out.reasoning_content = message.reasoning.text;
      if (message.toolCalls?.length) {
        out.tool_calls = message.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
      }
      return out;
    }
  }
}

function toOpenAiTool(tool: IRTool): Record<string, unknown> {
  const fn: Record<string, unknown> = { name: tool.name, parameters: tool.parameters };
  if (tool.description) fn.description = tool.description;
  return { type: 'function', function: fn };
}
