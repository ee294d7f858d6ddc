/**
 * `polar export`: JSONL and Parquet trainer rows (read back with hyparquet) carry each trace's tokens, mask, logprobs,
 * reward and its group's GRPO advantage; the messages dataset holds only COMPLETED sessions with reward > 0.
 */
import { afterAll, expect, test } from 'bun:test';
import { parquetReadObjects } from 'hyparquet';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { IR_VERSION, type IRRequest } from '../../src/core/ir.ts';
import type { CompletionRecord, SessionResult, Trace, TrajectoryStatus } from '../../src/core/records.ts';
import { acceptedMessages, exportRows } from '../../src/rollout/export.ts';
import { buildGroup } from '../../src/trace/groups.ts';
import { putGroup } from '../../src/rollout/store-port.ts';
import { openStore } from '../../src/store/index.ts';
import { chatCompletionRecord } from '../support/records.ts';
import { taskRequest } from '../support/tasks.ts';

const root = resolve(import.meta.dir, '..', '..');
const bun = join(root, 'node_modules/.bin/bun');
const scratch = mkdtempSync(join(tmpdir(), 'polar-export-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const db = join(scratch, 'results.db');
const rewards = [1, 0, 1];
const statuses: TrajectoryStatus[] = ['COMPLETED', 'COMPLETED', 'ERROR'];

function trace(sessionId: string, reward: number, i: number): Trace {
  return {
    prompt_ids: [10 + i, 11, 12],
    response_ids: [20 + i, 21, 151645],
    loss_mask: [1, 0, 1],
    response_logprobs: [-0.5, 0, -0.25],
    prompt_messages: [],
    response_messages: [],
    tools: [],
    finish_reason: { unified: 'stop', raw: 'stop' },
    reward,
    metadata: { session_id: sessionId, task_id: 't1', builder: 'prefix_merging', harness: 'pi', completion_ids: [`c${i}`], policy_versions: [null] },
  };
}

function record(sessionId: string, i: number): CompletionRecord {
  const ir_request: IRRequest = {
    version: IR_VERSION,
    model: 'sim',
    messages: [
      { role: 'system', content: [{ type: 'text', text: 'You are a coding agent.' }] },
      { role: 'user', content: [{ type: 'text', text: 'fix the bug' }] },
      { role: 'assistant', content: [], toolCalls: [{ id: 'call_1', name: 'bash', arguments: '{"command":"cat a.py"}' }] },
      { role: 'tool', toolCallId: 'call_1', content: [{ type: 'text', text: 'x = 1' }] },
    ],
    tools: [{ name: 'bash', description: 'run a command', parameters: { type: 'object', properties: { command: { type: 'string' } } }, origin: { kind: 'function' } }],
    sampling: {},
    stream: false,
    warnings: [],
  };
  return chatCompletionRecord({
    completion_id: `c${i}`,
    session_id: sessionId,
    seq: 0,
    ir_request,
    ir_response: {
      id: 'r', model: 'sim', content: [{ type: 'text', text: 'done' }], toolCalls: [], finishReason: { unified: 'stop', raw: 'stop' },
      usage: { inputTokens: 3, outputTokens: 3, cachedInputTokens: 0, reasoningTokens: 0 }, warnings: [], createdAt: 0,
    },
    prompt_ids: [10 + i, 11, 12],
    response_ids: [20 + i, 21, 151645],
    logprobs: [-0.5, -0.125, -0.25],
    engine_id: 'sim@http://127.0.0.1:1',
  });
}

{
  const store = openStore(db);
  const task = taskRequest('t1', { instruction: 'fix', num_samples: 3, agent: { harness: 'pi', model_name: 'sim' } });
  store.tasks.upsert(task, 'COMPLETED');
  const results: SessionResult[] = [];
  for (let i = 0; i < 3; i++) {
    const sessionId = `s${i}`;
    store.sessions.insert({ session_id: sessionId, task_id: 't1', sample_index: i, status: statuses[i]!, node_id: 'n1' });
    store.completions.insert(record(sessionId, i));
    const status = statuses[i]!;
    const result: SessionResult = {
      session_id: sessionId, task_id: 't1', status,
      trajectory: { status, traces: [trace(sessionId, rewards[i]!, i)], metadata: { reconstruction_stats: { completions: 1, chains: 1, merged: 0, breaks: {} }, evaluation: { outcome_reward: rewards[i]! }, training_filter: { trainable: status === 'COMPLETED', reasons: [] } } },
      timing: { init_ms: 0, ready_queue_ms: 0, run_ms: 0, postrun_ms: 0, build_ms: 0, eval_ms: 0, e2e_ms: 0 },
      node_id: 'n1', error: null,
    };
    store.results.put(result);
    results.push(result);
  }
  putGroup(store, buildGroup(task, store.sessions.listByTask('t1'), results, false, 0));
  store.close();
}

test('exportRows: one row per trace with the group GRPO advantage (0 outside the group)', () => {
  const store = openStore(db);
  try {
    const rows = exportRows(store);
    expect(rows.map((r) => r.metadata.session_id)).toEqual(['s0', 's1', 's2']);
    // Group = the two COMPLETED sessions, rewards [1, 0] → GRPO ±1 (up to ε).
    expect(rows[0]!.advantage).toBeCloseTo(1, 5);
    expect(rows[1]!.advantage).toBeCloseTo(-1, 5);
    expect(rows[2]!.advantage).toBe(0);
    expect(rows[0]!.loss_mask).toEqual([1, 0, 1]);
  } finally {
    store.close();
  }
});

test('polar export --format parquet round-trips through hyparquet', async () => {
  const out = join(scratch, 'traces.parquet');
  const proc = Bun.spawnSync([bun, 'src/main.ts', 'export', '--db', db, '--format', 'parquet', '--out', out], { cwd: root });
  expect(proc.stderr.toString()).toBe('');
  expect(proc.exitCode).toBe(0);
  const bytes = readFileSync(out);
  const rows = (await parquetReadObjects({ file: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) })) as Record<string, unknown>[];
  expect(rows.length).toBe(3);
  expect(rows[0]!.prompt_ids).toEqual([10, 11, 12]);
  expect(rows[2]!.response_ids).toEqual([22, 21, 151645]);
  expect(rows[1]!.response_logprobs).toEqual([-0.5, 0, -0.25]);
  expect(rows.map((r) => r.reward)).toEqual(rewards);
  expect((rows[0]!.metadata as { session_id: string }).session_id).toBe('s0');
});

test('polar export --format jsonl writes one trace per line', () => {
  const out = join(scratch, 'traces.jsonl');
  const proc = Bun.spawnSync([bun, 'src/main.ts', 'export', '--db', db, '--format', 'jsonl', '--out', out], { cwd: root });
  expect(proc.exitCode).toBe(0);
  const lines = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  expect(lines).toHaveLength(3);
  expect(Object.keys(lines[0]).sort()).toEqual([
    'advantage', 'finish_reason', 'loss_mask', 'metadata', 'prompt_ids', 'prompt_messages', 'response_ids', 'response_logprobs', 'response_messages', 'reward', 'tools',
  ]);
});

test('messages: only COMPLETED sessions with reward > 0, in OpenAI Chat form with tools', () => {
  const store = openStore(db);
  try {
    const rows = acceptedMessages(store);
    expect(rows.map((r) => r.metadata.session_id)).toEqual(['s0']);
    const m = rows[0]!.messages;
    expect(m.map((x) => x.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant']);
    expect(m[2]).toEqual({ role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'bash', arguments: '{"command":"cat a.py"}' } }] });
    expect(m[3]).toEqual({ role: 'tool', tool_call_id: 'call_1', content: 'x = 1' });
    expect(m[4]).toEqual({ role: 'assistant', content: 'done' });
    expect(rows[0]!.tools[0]).toMatchObject({ type: 'function', function: { name: 'bash' } });
  } finally {
    store.close();
  }
});

test('bad usage exits 2 with the error on stderr', () => {
  const proc = Bun.spawnSync([bun, 'src/main.ts', 'export', '--db', db, '--format', 'csv', '--out', join(scratch, 'x')], { cwd: root });
  expect(proc.exitCode).toBe(2);
  expect(proc.stderr.toString()).toContain('--format');
  const missing = Bun.spawnSync([bun, 'src/main.ts', 'export', '--db', join(scratch, 'none.db'), '--format', 'jsonl', '--out', join(scratch, 'x')], { cwd: root });
  expect(missing.exitCode).toBe(2);
});
