/**
 * `polar export` of sessions without a SessionResult (what `polar proxy` captures): their trajectories are built from
 * the records with the chosen builder and exported with `reward: null`, `metadata.evaluated: false`; --only-evaluated
 * keeps the old behaviour; the messages format adds them only with --include-unevaluated. One database captured by a
 * real proxy app in front of the fake engine, and one with hand-made records whose prefix merge is known exactly.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { parquetReadObjects } from 'hyparquet';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fixedClock } from '../../src/core/clock.ts';
import { sequentialIds } from '../../src/core/ids.ts';
import { IR_VERSION } from '../../src/core/ir.ts';
import type { CompletionRecord, SessionResult } from '../../src/core/records.ts';
import { createEngineClient } from '../../src/engines/index.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { adHocSessions } from '../../src/proxy/sessions.ts';
import { acceptedMessages, exportTraces } from '../../src/rollout/export.ts';
import { openStore } from '../../src/store/index.ts';
import { startFakeEngine } from '../support/fake-engine.ts';
import { chatCompletionRecord } from '../support/records.ts';

const root = resolve(import.meta.dir, '..', '..');
const scratch = mkdtempSync(join(tmpdir(), 'polar-export-uneval-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const EOT = 151645;

function record(sessionId: string, seq: number, promptIds: number[], responseIds: number[]): CompletionRecord {
  return chatCompletionRecord({
    completion_id: `${sessionId}-c${seq}`,
    session_id: sessionId,
    seq,
    ir_request: { version: IR_VERSION, model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: `turn ${seq}` }] }], tools: [], sampling: {}, stream: false, warnings: [] },
    ir_response: {
      id: 'r', model: 'm', content: [{ type: 'text', text: `answer ${seq}` }], toolCalls: [], finishReason: { unified: 'stop', raw: 'stop' },
      usage: { inputTokens: promptIds.length, outputTokens: responseIds.length, cachedInputTokens: 0, reasoningTokens: 0 }, warnings: [], createdAt: 0,
    },
    prompt_ids: promptIds,
    response_ids: responseIds,
    logprobs: responseIds.map((_, k) => -(k + 1) / 8),
    engine_id: 'vllm@http://127.0.0.1:1',
  });
}

describe('hand-made records: one evaluated session, one unevaluated two-turn session', () => {
  const db = join(scratch, 'mixed.db');
  beforeAll(() => {
    const store = openStore(db);
    store.completions.insert(record('judged', 0, [5, 6], [7, EOT]));
    const result: SessionResult = {
      session_id: 'judged', task_id: 't1', status: 'COMPLETED',
      trajectory: {
        status: 'COMPLETED',
        traces: [{
          prompt_ids: [5, 6], response_ids: [7, EOT], loss_mask: [1, 1], response_logprobs: [-0.125, -0.25], prompt_messages: [], response_messages: [], tools: [],
          finish_reason: { unified: 'stop', raw: 'stop' }, reward: 1,
          metadata: { session_id: 'judged', task_id: 't1', builder: 'prefix_merging', harness: 'pi', completion_ids: ['judged-c0'], policy_versions: [null] },
        }],
        metadata: { reconstruction_stats: { completions: 1, chains: 1, merged: 1, breaks: {} }, evaluation: { outcome_reward: 1 }, training_filter: { trainable: true, reasons: [] } },
      },
      timing: { init_ms: 0, ready_queue_ms: 0, run_ms: 0, postrun_ms: 0, build_ms: 0, eval_ms: 0, e2e_ms: 0 },
      node_id: 'n1', error: null,
    };
    store.results.put(result);
    // Turn 2's prompt = turn 1's prompt + its sampled ids + the interstitial [20, 21].
    store.completions.insert(record('captured', 0, [1, 2, 3], [10, 11, EOT]));
    store.completions.insert(record('captured', 1, [1, 2, 3, 10, 11, EOT, 20, 21], [30, EOT]));
    store.close();
  });

  test('prefix_merging (default): the unevaluated session is one merged trace with reward null, evaluated false', () => {
    const store = openStore(db);
    try {
      const result = exportTraces(store);
      expect(result.evaluatedSessions).toBe(1);
      expect(result.unevaluatedSessions).toBe(1);
      expect(result.rows.map((r) => [r.metadata.session_id, r.metadata.evaluated, r.reward])).toEqual([
        ['judged', true, 1],
        ['captured', false, null],
      ]);
      const merged = result.rows[1]!;
      expect(merged.prompt_ids).toEqual([1, 2, 3]);
      expect(merged.response_ids).toEqual([10, 11, EOT, 20, 21, 30, EOT]);
      expect(merged.loss_mask).toEqual([1, 1, 1, 0, 0, 1, 1]);
      expect(merged.response_logprobs).toEqual([-0.125, -0.25, -0.375, 0, 0, -0.125, -0.25]);
      expect(merged.advantage).toBeNull();
      expect(merged.metadata).toMatchObject({ builder: 'prefix_merging', completion_ids: ['captured-c0', 'captured-c1'], status: null, group_id: null, usable: false });
    } finally {
      store.close();
    }
  });

  test('a cancelled session (cancelled in POSTRUN, so it has traces) is not counted as evaluated; its rows have no reward or advantage', () => {
    const path = join(scratch, 'cancelled.db');
    const store = openStore(path);
    try {
      store.completions.insert(record('stopped', 0, [5, 6], [7, EOT]));
      const source = openStore(db);
      const base = source.results.get('judged')!;
      source.close();
      const trace = { ...base.trajectory.traces[0]!, reward: 0, metadata: { ...base.trajectory.traces[0]!.metadata, session_id: 'stopped', completion_ids: ['stopped-c0'] } };
      store.results.put({ ...base, session_id: 'stopped', status: 'CANCELLED', error: 'cancelled: by request', trajectory: { ...base.trajectory, traces: [trace] } });
      const result = exportTraces(store);
      expect(result.evaluatedSessions).toBe(0);
      expect(result.rows.map((r) => [r.metadata.session_id, r.metadata.evaluated, r.reward, r.advantage, r.metadata.usable])).toEqual([['stopped', false, null, null, false]]);
    } finally {
      store.close();
    }
  });

  test('per_request: one trace per record; onlyEvaluated: the old behaviour', () => {
    const store = openStore(db);
    try {
      const perRequest = exportTraces(store, { builder: 'per_request' });
      expect(perRequest.rows.filter((r) => r.metadata.evaluated === false).map((r) => r.response_ids)).toEqual([[10, 11, EOT], [30, EOT]]);
      const only = exportTraces(store, { onlyEvaluated: true });
      expect(only.rows.map((r) => r.metadata.session_id)).toEqual(['judged']);
      expect(only.unevaluatedSessions).toBe(0);
      expect(only.skippedUnevaluated).toBe(1);
    } finally {
      store.close();
    }
  });

  test('messages: unevaluated sessions only when asked, marked reward null', () => {
    const store = openStore(db);
    try {
      expect(acceptedMessages(store).map((r) => r.metadata.session_id)).toEqual(['judged']);
      const all = acceptedMessages(store, { includeUnevaluated: true });
      expect(all.map((r) => [r.metadata.session_id, r.metadata.reward, r.metadata.evaluated])).toEqual([
        ['judged', 1, true],
        ['captured', null, false],
      ]);
      // The longest conversation of the session plus its answer.
      expect(all[1]!.messages.at(-1)).toEqual({ role: 'assistant', content: 'answer 1' });
    } finally {
      store.close();
    }
  });
});

describe('polar export of a database captured by the proxy', () => {
  const db = join(scratch, 'capture.db');
  beforeAll(async () => {
    const engine = await startFakeEngine({ shape: 'vllm', script: [{ kind: 'text', text: 'first' }, { kind: 'text', text: 'second' }] });
    const store = openStore(db);
    const client = createEngineClient({ kind: 'vllm', url: engine.url, mode: 'chat', timeoutMs: 5000, now: fixedClock(), newId: sequentialIds() });
    await client.probe();
    const app = createProxyApp({ engine: client, store, sessions: adHocSessions(), clock: fixedClock(), newId: sequentialIds() });
    try {
      for (const [key, text] of [['alice', 'hello'], ['bob', 'hi there']]) {
        const response = await app.fetch(new Request('http://proxy/v1/chat/completions', {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: text }] }),
        }));
        expect(response.status).toBe(200);
      }
    } finally {
      store.close();
      await engine.stop();
    }
  });

  function polarExport(args: string[]) {
    return Bun.spawnSync([process.execPath, 'src/main.ts', 'export', '--db', db, ...args], { cwd: root, stdout: 'pipe', stderr: 'pipe' });
  }

  test('jsonl: every captured session is exported, unevaluated, with the counts printed', () => {
    const out = join(scratch, 'capture.jsonl');
    const proc = polarExport(['--format', 'jsonl', '--out', out]);
    expect(proc.exitCode).toBe(0);
    expect(proc.stdout.toString()).toContain('wrote 2 traces');
    expect(proc.stdout.toString()).toContain('sessions: 0 evaluated, 2 unevaluated');
    expect(proc.stderr.toString()).toContain('reward null');
    const rows = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(rows.map((r) => r.metadata.session_id)).toEqual(['alice', 'bob']);
    for (const row of rows) {
      expect(row.reward).toBeNull();
      expect(row.metadata.evaluated).toBe(false);
      expect(row.response_ids.length).toBeGreaterThan(0);
      expect(row.loss_mask).toEqual(row.response_ids.map(() => 1));
      expect(row.response_logprobs).toHaveLength(row.response_ids.length);
    }
  });

  test('parquet: reward and advantage are null; --only-evaluated writes nothing and says why', async () => {
    const out = join(scratch, 'capture.parquet');
    expect(polarExport(['--format', 'parquet', '--out', out, '--builder', 'per_request']).exitCode).toBe(0);
    const bytes = readFileSync(out);
    const rows = (await parquetReadObjects({ file: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) })) as Record<string, unknown>[];
    expect(rows.map((r) => [r.reward, r.advantage])).toEqual([[null, null], [null, null]]);
    expect((rows[0]!.metadata as { builder: string }).builder).toBe('per_request');
    const only = polarExport(['--format', 'jsonl', '--out', join(scratch, 'only.jsonl'), '--only-evaluated']);
    expect(only.exitCode).toBe(0);
    expect(only.stdout.toString()).toContain('wrote 0 traces');
    expect(only.stderr.toString()).toContain('left out 2 unevaluated');
  });

  test('messages: left out (and said so) unless --include-unevaluated', () => {
    const out = join(scratch, 'capture.messages.jsonl');
    const plain = polarExport(['--format', 'messages', '--out', out]);
    expect(plain.exitCode).toBe(0);
    expect(plain.stdout.toString()).toContain('wrote 0 sessions');
    expect(plain.stderr.toString()).toContain('2 unevaluated session(s) left out');
    const included = polarExport(['--format', 'messages', '--out', out, '--include-unevaluated']);
    expect(included.exitCode).toBe(0);
    const rows = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(rows.map((r) => [r.metadata.session_id, r.metadata.reward, r.metadata.evaluated])).toEqual([['alice', null, false], ['bob', null, false]]);
    expect(rows[1].messages).toEqual([{ role: 'user', content: 'hi there' }, { role: 'assistant', content: 'second' }]);
  });

  test('contradictory or misplaced flags and an unknown builder exit 2', () => {
    const out = join(scratch, 'x.jsonl');
    for (const args of [
      ['--format', 'jsonl', '--out', out, '--builder', 'magic'],
      ['--format', 'jsonl', '--out', out, '--include-unevaluated'],
      ['--format', 'messages', '--out', out, '--only-evaluated'],
    ]) {
      const proc = polarExport(args);
      expect(proc.exitCode).toBe(2);
      expect(proc.stderr.toString()).toMatch(/--builder|--include-unevaluated|--only-evaluated/);
    }
  });

  test('--builder with --format messages exits 2: a messages row is a conversation, built by no trajectory builder', () => {
    const out = join(scratch, 'builder.messages.jsonl');
    const proc = polarExport(['--format', 'messages', '--out', out, '--include-unevaluated', '--builder', 'per_request']);
    expect(proc.exitCode).toBe(2);
    expect(proc.stderr.toString()).toContain('--builder applies to --format jsonl and parquet');
  });
});
