/**
 * The Trace fields (docs/architecture.md#data-model) in trainer rows: finish_reason {unified, raw} (so a trainer can mask truncated samples),
 * prompt_messages / response_messages / tools in OpenAI Chat shape (as the messages export), and under metadata the
 * trajectory's status, training_filter, reconstruction_stats and evaluation; Parquet promotes finish_reason, group_id,
 * session_id, task_id and status to string columns. Both formats are read back.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { parquetReadObjects } from 'hyparquet';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IR_VERSION, type FinishReason, type IRMessage } from '../../src/core/ir.ts';
import type { CompletionRecord, SessionResult, TaskRequest } from '../../src/core/records.ts';
import { exportTraces, writeJsonl, writeParquet, type ExportRow } from '../../src/rollout/export.ts';
import { buildGroup } from '../../src/trace/groups.ts';
import { putGroup } from '../../src/rollout/store-port.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { buildTrajectory } from '../../src/trace/index.ts';
import { chatCompletionRecord } from '../support/records.ts';
import { taskRequest } from '../support/tasks.ts';

const EOT = 151645;
const scratch = mkdtempSync(join(tmpdir(), 'polar-export-fields-'));
const db = join(scratch, 'fields.db');
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const text = (t: string) => [{ type: 'text' as const, text: t }];
const bashTool = { name: 'bash', description: 'run a command', parameters: { type: 'object', properties: { command: { type: 'string' } } }, origin: { kind: 'function' as const } };
const turn1: IRMessage[] = [{ role: 'system', content: text('You are a coding agent.') }, { role: 'user', content: text('fix it') }];
const call: IRMessage = { role: 'assistant', content: [], toolCalls: [{ id: 'call_1', name: 'bash', arguments: '{"command":"ls"}' }] };
const result1: IRMessage = { role: 'tool', toolCallId: 'call_1', content: text('a.py') };

/** Turn 1 calls bash; turn 2 (prompt = turn 1 + its ids + interstitial [40, 41]) answers and ends with `finish`. */
function session(sessionId: string, finish: FinishReason): CompletionRecord[] {
  const response = (content: IRMessage['content'], toolCalls: NonNullable<Extract<IRMessage, { role: 'assistant' }>['toolCalls']>, fr: FinishReason) => ({
    id: 'r', model: 'm', content, toolCalls, finishReason: fr, usage: { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, reasoningTokens: 0 }, warnings: [], createdAt: 0,
  });
  const lastIds = finish.unified === 'length' ? [30, 31] : [30, EOT];
  return [
    chatCompletionRecord({
      completion_id: `${sessionId}-c0`, session_id: sessionId, seq: 0, engine_id: 'vllm@x',
      ir_request: { version: IR_VERSION, model: 'm', messages: turn1, tools: [bashTool], sampling: {}, stream: false, warnings: [] },
      ir_response: response([], [{ id: 'call_1', name: 'bash', arguments: '{"command":"ls"}' }], { unified: 'tool-calls', raw: 'tool_calls' }),
      finish_reason: { unified: 'tool-calls', raw: 'tool_calls' },
      prompt_ids: [1, 2, 3], response_ids: [10, 11, EOT], logprobs: [-0.5, -0.25, -0.125],
    }),
    chatCompletionRecord({
      completion_id: `${sessionId}-c1`, session_id: sessionId, seq: 1, engine_id: 'vllm@x',
      ir_request: { version: IR_VERSION, model: 'm', messages: [...turn1, call, result1], tools: [bashTool], sampling: {}, stream: false, warnings: [] },
      ir_response: response(text('done'), [], finish),
      finish_reason: finish,
      prompt_ids: [1, 2, 3, 10, 11, EOT, 40, 41], response_ids: lastIds, logprobs: [-0.5, -0.25],
    }),
  ];
}

const task: TaskRequest = taskRequest('tf', { instruction: 'fix', num_samples: 2, agent: { harness: 'pi', model_name: 'm' } });

beforeAll(() => {
  const store = openStore(db);
  store.tasks.upsert(task, 'COMPLETED');
  const results: SessionResult[] = [];
  const plan: Array<[string, FinishReason, number]> = [['ok', { unified: 'stop', raw: 'stop' }, 1], ['cut', { unified: 'length', raw: 'length' }, 0]];
  plan.forEach(([id, finish, reward], i) => {
    const records = session(id, finish);
    for (const rec of records) store.completions.insert(rec);
    store.sessions.insert({ session_id: id, task_id: 'tf', sample_index: i, status: 'COMPLETED', node_id: 'n1' });
    const trajectory = buildTrajectory(records, { strategy: 'prefix_merging', session_id: id, task_id: 'tf', harness: 'pi', status: 'COMPLETED' });
    trajectory.metadata.evaluation = { outcome_reward: reward, details: { judge: 'test' } };
    for (const trace of trajectory.traces) trace.reward = reward;
    const result: SessionResult = {
      session_id: id, task_id: 'tf', status: 'COMPLETED', trajectory,
      timing: { init_ms: 0, ready_queue_ms: 0, run_ms: 0, postrun_ms: 0, build_ms: 0, eval_ms: 0, e2e_ms: 0 }, node_id: 'n1', error: null,
    };
    store.results.put(result);
    results.push(result);
  });
  putGroup(store, buildGroup(task, store.sessions.listByTask('tf'), results, false, 0));
  // A capture without a result (polar proxy): exported unevaluated, truncated by the token cap.
  for (const rec of session('raw', { unified: 'length', raw: 'max_tokens' })) store.completions.insert(rec);
  store.close();
});

function rowsOf(store: Store): ExportRow[] {
  return exportTraces(store).rows;
}

const expectedPrompt = [
  { role: 'system', content: 'You are a coding agent.' },
  { role: 'user', content: 'fix it' },
];
const expectedResponse = [
  { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'bash', arguments: '{"command":"ls"}' } }] },
  { role: 'tool', tool_call_id: 'call_1', content: 'a.py' },
  { role: 'assistant', content: 'done' },
];
const expectedTools = [{ type: 'function', function: { name: 'bash', description: 'run a command', parameters: bashTool.parameters } }];

test('rows carry finish_reason, OpenAI-shaped messages and tools, and the trajectory metadata', () => {
  const store = openStore(db);
  try {
    const rows = rowsOf(store);
    expect(rows.map((r) => [r.metadata.session_id, r.finish_reason])).toEqual([
      ['ok', { unified: 'stop', raw: 'stop' }],
      ['cut', { unified: 'length', raw: 'length' }],
      ['raw', { unified: 'length', raw: 'max_tokens' }],
    ]);
    for (const row of rows) {
      expect(row.prompt_messages).toEqual(expectedPrompt);
      expect(row.response_messages).toEqual(expectedResponse);
      expect(row.tools).toEqual(expectedTools);
    }
    const ok = rows[0]!;
    expect(ok.metadata).toMatchObject({
      status: 'COMPLETED', group_id: 'tf', evaluated: true, trajectory_status: 'COMPLETED',
      training_filter: { trainable: true, reasons: [] }, evaluation: { outcome_reward: 1, details: { judge: 'test' } },
      reconstruction_stats: { completions: 2, chains: 1 },
    });
    const raw = rows[2]!;
    expect(raw.metadata).toMatchObject({ evaluated: false, trajectory_status: null, training_filter: null, evaluation: null, reconstruction_stats: { completions: 2, chains: 1 } });
  } finally {
    store.close();
  }
});

test('JSONL reads back with the same fields', () => {
  const store = openStore(db);
  try {
    const rows = rowsOf(store);
    const out = join(scratch, 'fields.jsonl');
    expect(writeJsonl(rows, out)).toBe(3);
    const back = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as ExportRow);
    expect(back).toEqual(JSON.parse(JSON.stringify(rows)));
    // What a trainer does with it: drop truncated samples.
    expect(back.filter((r) => r.finish_reason.unified !== 'length').map((r) => r.metadata.session_id)).toEqual(['ok']);
  } finally {
    store.close();
  }
});

test('Parquet has real string columns for finish_reason, group_id, session_id, task_id, status; JSON columns read back', async () => {
  const store = openStore(db);
  try {
    const rows = rowsOf(store);
    const out = join(scratch, 'fields.parquet');
    expect(writeParquet(rows, out)).toBe(3);
    const bytes = readFileSync(out);
    const back = (await parquetReadObjects({ file: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) })) as Record<string, unknown>[];
    expect(back.map((r) => [r.session_id, r.task_id, r.group_id, r.status, r.finish_reason, r.finish_reason_raw])).toEqual([
      ['ok', 'tf', 'tf', 'COMPLETED', 'stop', 'stop'],
      ['cut', 'tf', 'tf', 'COMPLETED', 'length', 'length'],
      ['raw', 'unknown', null, null, 'length', 'max_tokens'], // a capture without a session row has no task
    ]);
    expect(back[0]!.prompt_messages).toEqual(expectedPrompt);
    expect(back[1]!.response_messages).toEqual(expectedResponse);
    expect(back[2]!.tools).toEqual(expectedTools);
    expect((back[0]!.metadata as Record<string, unknown>).training_filter).toEqual({ trainable: true, reasons: [] });
    expect(back[2]!.response_ids).toEqual([10, 11, EOT, 40, 41, 30, 31]);
  } finally {
    store.close();
  }
});

test('a stored trajectory whose messages are not IR messages fails the export with the session and field named', () => {
  const store = openStore(join(scratch, 'corrupt.db'));
  try {
    const records = session('bad', { unified: 'stop', raw: 'stop' });
    for (const rec of records) store.completions.insert(rec);
    const trajectory = buildTrajectory(records, { strategy: 'per_request', session_id: 'bad', task_id: 'tf', harness: 'pi', status: 'COMPLETED' });
    trajectory.traces[1]!.prompt_messages = [{ role: 'user', content: 'a string, not parts' }];
    store.results.put({
      session_id: 'bad', task_id: 'tf', status: 'COMPLETED', trajectory,
      timing: { init_ms: 0, ready_queue_ms: 0, run_ms: 0, postrun_ms: 0, build_ms: 0, eval_ms: 0, e2e_ms: 0 }, node_id: 'n1', error: null,
    });
    expect(() => exportTraces(store)).toThrow('session bad trace 1 prompt_messages[0]: not an IR message');
  } finally {
    store.close();
  }
});
