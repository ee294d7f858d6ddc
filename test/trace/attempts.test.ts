/**
 * Retried attempts never mix: a session re-dispatched under the same id (a resumed `polar run`, the rollout server's
 * re-dispatch after a node loss) builds its trajectory from its own attempt's completions only; the dead attempt's
 * completions stay stored, tagged with their attempt, and never enter a trajectory, `trace verify` or an export.
 * Through the real proxy (fake engine on port 0) and two gateway nodes sharing one store, with a fake runtime whose
 * "harness" makes the model calls.
 */
import { Database } from 'bun:sqlite';
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fixedClock } from '../../src/core/clock.ts';
import type { CompletionRecord, SessionResult, TaskRequest } from '../../src/core/records.ts';
import { createEngineClient } from '../../src/engines/index.ts';
import { GatewayNode, type GatewayStore } from '../../src/gateway/node.ts';
import type { RuntimeFactory } from '../../src/gateway/runtimes/index.ts';
import type { ExecResult, Runtime, RuntimeProcess } from '../../src/gateway/runtimes/types.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { migrate, migrations } from '../../src/store/migrations.ts';
import { packFloat32, packInt32 } from '../../src/store/packing.ts';
import { buildTrajectory, selectAttempt, verifyTraces } from '../../src/trace/index.ts';
import { startFakeEngine, type FakeEngine } from '../support/fake-engine.ts';
import { taskRequest } from '../support/tasks.ts';

const root = resolve(import.meta.dir, '..', '..');
const scratch = mkdtempSync(join(tmpdir(), 'polar-attempts-'));
const SESSION = 'ps_retried_session';
// Long enough that the prompts share more than MIN_SHARED_PROMPT_TOKENS, so attempt 1's rows are stored as deltas.
const INSTRUCTION = 'Create the file out.txt containing ok, then report what you did. '.repeat(3);

let engine: FakeEngine;
beforeAll(async () => {
  engine = await startFakeEngine({ shape: 'vllm', script: (_body, i) => ({ kind: 'text', text: `answer ${i}` }) });
});
afterAll(async () => {
  await engine.stop();
  rmSync(scratch, { recursive: true, force: true });
});

const task = (): TaskRequest =>
  taskRequest('retry-task', { instruction: INSTRUCTION, timeout_seconds: 30, agent: { command: 'agent {{INSTRUCTION}}', model_name: 'm' } });

/**
 * A runtime whose harness makes `calls` chat calls through the node's proxy with the session key (call k sends the
 * conversation so far plus `turn k of <tag>`), then exits 0, or with `hang` waits until it is killed.
 */
function callingRuntime(node: () => GatewayNode, opts: { calls: number; tag: string; hang: boolean; made: () => void }): RuntimeFactory {
  return (_spec, ctx) => {
    const key = ctx.instanceKey;
    const runtime: Runtime = {
      kind: 'fake', workDir: `/fake/${key}/work`, homeDir: `/fake/${key}/home`,
      start: async () => {},
      stop: async () => {},
      exec: async (): Promise<ExecResult> => ({ exitCode: 0, stdout: '', stderr: '', timedOut: false }),
      spawn: (): RuntimeProcess => {
        let finish!: (v: { exitCode: number | null; signal: string | null }) => void;
        const exited = new Promise<{ exitCode: number | null; signal: string | null }>((r) => { finish = r; });
        void (async () => {
          const messages: { role: string; content: string }[] = [{ role: 'user', content: INSTRUCTION }];
          for (let k = 0; k < opts.calls; k++) {
            const response = await fetch(`${node().url}/v1/chat/completions`, {
              method: 'POST',
              headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
              body: JSON.stringify({ model: 'm', messages }),
            });
            const body = (await response.json()) as { choices: { message: { content: string } }[] };
            messages.push({ role: 'assistant', content: body.choices[0]!.message.content }, { role: 'user', content: `turn ${k} of ${opts.tag}` });
            opts.made();
          }
          if (!opts.hang) finish({ exitCode: 0, signal: null });
        })();
        return { pid: null, exited, stdout: () => '', stderr: () => '', kill: async () => { finish({ exitCode: null, signal: 'SIGKILL' }); } };
      },
      upload: async () => {}, download: async () => {}, writeFile: async () => {},
    };
    return runtime;
  };
}

async function proxyEngine() {
  const client = createEngineClient({ kind: 'vllm', url: engine.url, mode: 'chat', timeoutMs: 5000, now: fixedClock() });
  await client.probe();
  return client;
}

/** Run the session's attempt 0 (dies after 2 calls, its result never stored) then attempt 1 (3 calls, completes). */
async function runTwoAttempts(store: Store): Promise<{ result: SessionResult }> {
  const client = await proxyEngine();
  let made0 = 0;
  const ids = (tag: string) => { let n = 0; return (prefix: string) => `${prefix}_${tag}_${++n}`; };
  // Attempt 0: a node whose process "dies" mid-run: its calls are captured, its result is never committed.
  const dead: GatewayStore = { completions: store.completions, results: { put: () => false, get: () => null } };
  const node0: GatewayNode = new GatewayNode({
    nodeId: 'n0', store: dead, workRoot: '/nonexistent', harnessLogDir: null,
    runtimeFactory: callingRuntime(() => node0, { calls: 2, tag: 'attempt 0', hang: true, made: () => made0++ }),
    proxy: (sessions) => createProxyApp({ engine: client, store, sessions, clock: fixedClock(), newId: ids('a0') }),
  });
  await node0.start();
  node0.dispatch({ session_id: SESSION, task: task(), sample_index: 0, attempt: 0 });
  while (made0 < 2) await Bun.sleep(5);
  await node0.stop();

  const node1: GatewayNode = new GatewayNode({
    nodeId: 'n1', store, workRoot: '/nonexistent', harnessLogDir: null,
    runtimeFactory: callingRuntime(() => node1, { calls: 3, tag: 'attempt 1', hang: false, made: () => {} }),
    proxy: (sessions) => createProxyApp({ engine: client, store, sessions, clock: fixedClock(), newId: ids('a1') }),
  });
  await node1.start();
  try {
    node1.dispatch({ session_id: SESSION, task: task(), sample_index: 0, attempt: 1 });
    return { result: await node1.wait(SESSION) };
  } finally {
    await node1.stop();
  }
}

const completionIds = (traces: { metadata: { completion_ids: string[] } }[]) => traces.flatMap((t) => t.metadata.completion_ids).sort();

describe('two attempts of one session through the proxy and the gateway build', () => {
  const dbPath = join(scratch, 'two-attempts.db');
  let result: SessionResult;
  let records: CompletionRecord[];

  beforeAll(async () => {
    const store = openStore(dbPath);
    try {
      ({ result } = await runTwoAttempts(store));
      records = store.completions.listBySession(SESSION);
    } finally {
      store.close();
    }
  });

  test('both attempts stay stored, each record tagged with the attempt that made it; seq runs on across attempts', () => {
    expect(records.map((r) => r.attempt)).toEqual([0, 0, 1, 1, 1]);
    expect(records.map((r) => r.seq)).toEqual([0, 1, 2, 3, 4]);
    expect(records.filter((r) => r.attempt === 0).every((r) => r.completion_id.includes('_a0_'))).toBe(true);
    expect(records.filter((r) => r.attempt === 1).every((r) => r.completion_id.includes('_a1_'))).toBe(true);
  });

  test("the trajectory holds attempt 1's completions only, and says how many of attempt 0 were left out", () => {
    expect(result.status).toBe('COMPLETED');
    const attempt1 = records.filter((r) => r.attempt === 1).map((r) => r.completion_id).sort();
    expect(completionIds(result.trajectory.traces)).toEqual(attempt1);
    expect(result.trajectory.metadata.attempt).toBe(1);
    expect(result.trajectory.traces.every((t) => t.metadata.attempt === 1)).toBe(true);
    expect(result.trajectory.metadata.reconstruction_stats).toMatchObject({ completions: 3, merged: 3, other_attempt_completions: 2 });
    // The reward is attempt 1's, and only attempt 1's traces carry it.
    expect(result.trajectory.traces.every((t) => t.reward === 1)).toBe(true);
  });

  test('the stored result verifies clean against all records; a trajectory mixing in attempt 0 is a violation', () => {
    const store = openStore(dbPath);
    try {
      const stored = store.results.get(SESSION)!;
      expect(stored.trajectory.metadata.attempt).toBe(1);
      const report = verifyTraces(records, stored.trajectory);
      expect(report).toMatchObject({ ok: true, attempt: 1, completions: 3, other_attempt_completions: 2 });
      // What the bug produced: the dead attempt's chains next to the new one's.
      const dead = buildTrajectory(records, { strategy: 'prefix_merging', session_id: SESSION, task_id: 'retry-task', harness: 'shell', status: 'COMPLETED', attempt: 0 });
      expect(completionIds(dead.traces)).toEqual(records.filter((r) => r.attempt === 0).map((r) => r.completion_id).sort());
      const mixed = { ...stored.trajectory, traces: [...stored.trajectory.traces, ...dead.traces] };
      const bad = verifyTraces(records, mixed);
      expect(bad.ok).toBe(false);
      expect(new Set(bad.violations.map((v) => v.kind))).toEqual(new Set(['other_attempt_completion']));
      expect(bad.violations).toHaveLength(2);
    } finally {
      store.close();
    }
  });

  test("attempt 1's rows may sit on attempt 0's as delta base; listBySession({attempt}) still decodes them exactly", () => {
    const raw = new Database(dbPath, { readonly: true });
    const rows = raw.query('SELECT completion_id, attempt, base_id FROM completions ORDER BY seq').all() as { completion_id: string; attempt: number; base_id: string | null }[];
    raw.close();
    const attemptOfId = new Map(rows.map((r) => [r.completion_id, r.attempt]));
    // The first call of attempt 1 repeats attempt 0's opening prompt: its base is an attempt-0 row.
    const first1 = rows.find((r) => r.attempt === 1)!;
    expect(first1.base_id).not.toBeNull();
    expect(attemptOfId.get(first1.base_id!)).toBe(0);
    const fresh = openStore(dbPath); // a cold base cache: bases outside the selection are read by id
    try {
      expect(fresh.completions.listBySession(SESSION, { attempt: 1 })).toEqual(records.filter((r) => r.attempt === 1));
      expect(fresh.completions.listBySession(SESSION, { attempt: 0 })).toEqual(records.filter((r) => r.attempt === 0));
      expect(fresh.completions.listBySession(SESSION, { attempt: 7 })).toEqual([]);
      expect(fresh.completions.attemptCounts(SESSION)).toEqual([{ attempt: 0, completions: 2 }, { attempt: 1, completions: 3 }]);
      expect(fresh.completions.attemptCounts('nobody')).toEqual([]);
    } finally {
      fresh.close();
    }
  });

  test('polar trace verify/show and polar export use the result\'s attempt only', () => {
    const polar = (args: string[]) => Bun.spawnSync([process.execPath, 'src/main.ts', ...args], { cwd: root, stdout: 'pipe', stderr: 'pipe' });
    const verify = polar(['trace', 'verify', '--db', dbPath, '--all']);
    expect(verify.stderr.toString()).toBe('');
    expect(verify.exitCode).toBe(0);
    expect(verify.stdout.toString()).toContain('3 completion(s) of attempt 1 (2 of other attempts left out)');
    const rebuilt = polar(['trace', 'verify', '--db', dbPath, '--all', '--rebuild']);
    expect(rebuilt.exitCode).toBe(0);
    const show = polar(['trace', 'show', '--db', dbPath, '--session', SESSION, '--ids']);
    expect(show.exitCode).toBe(0);
    expect(show.stdout.toString()).toContain('attempt 1 (2 completion(s) of other attempts stored, left out)');
    const out = join(scratch, 'traces.jsonl');
    const exported = polar(['export', '--db', dbPath, '--format', 'jsonl', '--out', out]);
    expect(exported.exitCode).toBe(0);
    const rows = require('node:fs').readFileSync(out, 'utf8').trim().split('\n').map((l: string) => JSON.parse(l)) as { metadata: { completion_ids: string[]; attempt: number } }[];
    expect(rows.flatMap((r) => r.metadata.completion_ids).sort()).toEqual(records.filter((r) => r.attempt === 1).map((r) => r.completion_id).sort());
    expect(rows.every((r) => r.metadata.attempt === 1)).toBe(true);
    const messagesOut = join(scratch, 'messages.jsonl');
    expect(polar(['export', '--db', dbPath, '--format', 'messages', '--out', messagesOut]).exitCode).toBe(0);
    const conversation = JSON.parse(require('node:fs').readFileSync(messagesOut, 'utf8').trim()) as { metadata: { completion_id: string } };
    expect(records.find((r) => r.completion_id === conversation.metadata.completion_id)?.attempt).toBe(1);
  });
});

describe('attempt selection', () => {
  const rec = (id: string, seq: number, attempt?: number): CompletionRecord => ({
    completion_id: id, session_id: 's', seq, ...(attempt !== undefined ? { attempt } : {}), dialect: 'openai-chat', request_body: {},
    ir_request: { messages: [], tools: [], sampling: {}, stream: false } as unknown as CompletionRecord['ir_request'],
    ir_response: null, finish_reason: { unified: 'stop', raw: 'stop' }, prompt_ids: [1, 2, seq], response_ids: [4, 5],
    logprobs: [-0.5, -0.25], policy_version: null, engine_id: 'e', logprob_semantics: 'raw', mode: 'chat',
    capture_error: null, warnings: [], timings: { engine_ms: 1, total_ms: 1 }, created_at: 0,
  });
  const opts = { strategy: 'per_request' as const, session_id: 's', task_id: 't', harness: 'h', status: 'COMPLETED' as const };

  test('buildTrajectory defaults to the latest attempt; a record without attempt is attempt 0', () => {
    const records = [rec('a', 0), rec('b', 1, 0), rec('c', 2, 2), rec('d', 3, 1)];
    const latest = buildTrajectory(records, opts);
    expect(completionIds(latest.traces)).toEqual(['c']);
    expect(latest.metadata.attempt).toBe(2);
    expect(latest.metadata.reconstruction_stats.other_attempt_completions).toBe(3);
    expect(completionIds(buildTrajectory(records, { ...opts, attempt: 0 }).traces)).toEqual(['a', 'b']);
    // An attempt that captured nothing (it died in INIT) builds an empty trajectory, never one from another attempt.
    const none = buildTrajectory(records, { ...opts, attempt: 5 });
    expect(none.traces).toEqual([]);
    expect(none.metadata.reconstruction_stats).toMatchObject({ completions: 0, other_attempt_completions: 4 });
    expect(buildTrajectory([rec('a', 0)], opts).metadata.reconstruction_stats.other_attempt_completions).toBe(0);
  });

  test('bad attempts are clear errors', () => {
    expect(() => selectAttempt([], -1)).toThrow(/attempt must be a non-negative integer, got -1/);
    expect(() => buildTrajectory([rec('a', 0)], { ...opts, attempt: 1.5 })).toThrow(/attempt must be a non-negative integer, got 1.5/);
  });

  test('verify without a stored attempt checks the latest attempt; old results (no metadata.attempt) check attempt 0', () => {
    const records = [rec('a', 0, 0), rec('b', 1, 1)];
    const built = buildTrajectory(records, opts);
    const { attempt: _dropped, ...oldMetadata } = built.metadata;
    expect(verifyTraces(records, { ...built, metadata: oldMetadata })).toMatchObject({ ok: true, attempt: 1, other_attempt_completions: 1 });
    const old = buildTrajectory([rec('a', 0)], opts);
    expect(verifyTraces([rec('a', 0)], old)).toMatchObject({ ok: true, attempt: 0, completions: 1, other_attempt_completions: 0 });
    // Asked for attempt 0, the attempt-1 trajectory names a foreign completion and leaves attempt 0's unused.
    const report = verifyTraces(records, built, { attempt: 0 });
    expect(report.violations.map((v) => v.kind).sort()).toEqual(['dropped_completion', 'other_attempt_completion']);
  });

  test('rows stored before the attempt column (schema 3) read back as attempt 0', () => {
    const path = join(scratch, 'schema3.db');
    const db = new Database(path, { create: true });
    migrate(db, migrations.slice(0, 3));
    db.query(
      `INSERT INTO completions (completion_id, session_id, seq, dialect, request_body, ir_request, ir_response, finish_reason, prompt_ids, response_ids, logprobs, policy_version, engine_id, logprob_semantics, mode, capture_error, warnings, engine_ms, total_ms, created_at)
       VALUES ('old', 's', 0, 'openai-chat', '{}', '{"messages":[]}', NULL, '{"unified":"stop"}', ?, ?, ?, NULL, 'e', 'raw', 'chat', NULL, '[]', 1, 2, 3)`,
    ).run(packInt32([1, 2]), packInt32([3]), packFloat32([-1]));
    db.close();
    const store = openStore(path);
    try {
      expect(store.schemaVersion).toBe(migrations.length);
      expect(store.completions.get('old')!.attempt).toBe(0);
      expect(store.completions.listBySession('s', { attempt: 0 }).map((r) => r.completion_id)).toEqual(['old']);
    } finally {
      store.close();
    }
  });
});
