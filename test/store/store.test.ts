/** Store repositories: CompletionRecord round-trip, packing, idempotent results, group ack, migrations. */
import { Database } from 'bun:sqlite';
import { describe, expect, test } from 'bun:test';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fixedClock } from '../../src/core/clock.ts';
import type { CompletionRecord, SessionResult, TaskRequest } from '../../src/core/records.ts';
import { GROUP_EVALUATED, migrations, openStore, type Store } from '../../src/store/index.ts';
import { migrate } from '../../src/store/migrations.ts';
import { int32ToArray } from '../../src/core/int32-twin.ts';
import { packInt32, unpackFloat32, unpackInt32 } from '../../src/store/packing.ts';
import { useTempStores } from '../support/temp-stores.ts';
import { taskRequest } from '../support/tasks.ts';

const { stores, tempDir } = useTempStores('polar-store-');

function tempDb(): string {
  return join(tempDir(), 'nested', 'polar.db');
}

function open(path: string | ':memory:' = ':memory:'): Store {
  const store = openStore(path, { clock: fixedClock(1_700_000_000_000, 1000) });
  stores.push(store);
  return store;
}

function record(overrides: Partial<CompletionRecord> = {}): CompletionRecord {
  return {
    completion_id: 'cmpl_1',
    session_id: 'ps_a',
    seq: 0,
    attempt: 1,
    dialect: 'anthropic-messages',
    request_body: { model: 'claude', messages: [{ role: 'user', content: 'héllo ✓' }], stream: true },
    ir_request: { model: 'claude', messages: [] } as unknown as CompletionRecord['ir_request'],
    ir_response: { id: 'r1', content: [{ type: 'text', text: 'hi' }] } as unknown as CompletionRecord['ir_response'],
    finish_reason: { unified: 'tool-calls', raw: 'tool_use' },
    prompt_ids: [151644, 872, 198, 0, 2147483647, -2147483648],
    response_ids: [9707, 151645],
    logprobs: [Math.fround(-0.1234567), Math.fround(-1e-8)],
    policy_version: 'v7',
    engine_id: 'sim@http://127.0.0.1:8000',
    logprob_semantics: 'processed',
    mode: 'token',
    capture_error: 'lengths differ: 2 ids, 1 logprob',
    warnings: ['top_k ignored', 'stop truncated'],
    timings: { engine_ms: 12.5, total_ms: 14.25 },
    created_at: 1_700_000_123_456,
    ...overrides,
  };
}

describe('completions', () => {
  test('every field of a CompletionRecord round-trips, logprobs exact after Math.fround', () => {
    const store = open(tempDb());
    const rec = record();
    store.completions.insert(rec);
    expect(store.completions.get('cmpl_1')).toEqual(rec);
    const nulls = record({ completion_id: 'cmpl_2', seq: 1, ir_response: null, policy_version: null, capture_error: null, request_body: null, warnings: [], prompt_ids: [], response_ids: [], logprobs: [] });
    store.completions.insert(nulls);
    expect(store.completions.get('cmpl_2')).toEqual(nulls);
    expect(store.completions.get('nope')).toBeNull();
  });

  test('token arrays are stored as packed Int32/Float32 BLOBs, not JSON', () => {
    const path = tempDb();
    const store = open(path);
    store.completions.insert(record());
    const raw = new Database(path, { readonly: true });
    const row = raw.query('SELECT prompt_ids, response_ids, logprobs, typeof(prompt_ids) AS t FROM completions').get() as Record<string, Uint8Array | string>;
    raw.close();
    expect(row.t).toBe('blob');
    expect((row.prompt_ids as Uint8Array).byteLength).toBe(4 * record().prompt_ids.length);
    expect(unpackInt32(row.response_ids as Uint8Array)).toEqual([9707, 151645]);
    expect(unpackFloat32(row.logprobs as Uint8Array)).toEqual(record().logprobs);
  });

  test('unpacking gives plain arrays with every value exact: int32 extremes, float32 values, empty', () => {
    const ids = [0, 1, -1, 2 ** 31 - 1, -(2 ** 31), 151645];
    const unpacked = unpackInt32(packInt32(ids));
    expect(Array.isArray(unpacked)).toBe(true);
    expect(unpacked).toEqual(ids);
    expect(int32ToArray(new Int32Array(ids).subarray(2, 4))).toEqual([-1, 2 ** 31 - 1]);
    expect(unpackInt32(packInt32([]))).toEqual([]);
    const logprobs = [0, -0.5, Math.fround(-1e-7), Math.fround(-30.25)];
    const back = unpackFloat32(new Uint8Array(Float32Array.from(logprobs).buffer));
    expect(Array.isArray(back)).toBe(true);
    expect(back).toEqual(logprobs);
  });

  test('non-float32 logprobs are stored as their float32 rounding', () => {
    const store = open();
    store.completions.insert(record({ logprobs: [-0.1, -2.718281828] }));
    expect(store.completions.get('cmpl_1')!.logprobs).toEqual([Math.fround(-0.1), Math.fround(-2.718281828)]);
  });

  test('a token id outside int32 or not an integer is rejected, not wrapped', () => {
    const store = open();
    expect(() => store.completions.insert(record({ response_ids: [1, 2 ** 31] }))).toThrow(/index 1 is not an int32/);
    expect(() => store.completions.insert(record({ prompt_ids: [1.5] }))).toThrow(TypeError);
    expect(store.completions.count()).toBe(0);
    expect(() => packInt32([Number.NaN])).toThrow(TypeError);
  });

  test('listBySession orders by seq; nextSeq, listSessionIds and count follow the inserts', () => {
    const store = open();
    expect(store.completions.nextSeq('ps_a')).toBe(0);
    store.completions.insert(record({ completion_id: 'c2', session_id: 'ps_b', seq: 0 }));
    store.completions.insert(record({ completion_id: 'c3', session_id: 'ps_a', seq: 1 }));
    store.completions.insert(record({ completion_id: 'c1', session_id: 'ps_a', seq: 0 }));
    expect(store.completions.listBySession('ps_a').map((r) => r.completion_id)).toEqual(['c1', 'c3']);
    expect(store.completions.nextSeq('ps_a')).toBe(2);
    expect(store.completions.nextSeq('ps_b')).toBe(1);
    expect(store.completions.listSessionIds()).toEqual(['ps_b', 'ps_a']);
    expect(store.completions.count()).toBe(3);
    expect(() => store.completions.insert(record({ completion_id: 'c1' }))).toThrow();
    expect(store.completions.count()).toBe(3);
  });

  test('nextSeq stays right while it is remembered: after inserts, after a rolled-back insert, inside a transaction', () => {
    const store = open();
    expect(store.completions.nextSeq('ps_a')).toBe(0);
    store.completions.insert(record({ completion_id: 'c1', session_id: 'ps_a', seq: 0 }));
    store.completions.insert(record({ completion_id: 'c2', session_id: 'ps_a', seq: 1 }));
    expect(store.completions.nextSeq('ps_a')).toBe(2);
    expect(() =>
      store.transaction(() => {
        store.completions.insert(record({ completion_id: 'c3', session_id: 'ps_a', seq: 2 }));
        expect(store.completions.nextSeq('ps_a')).toBe(3);
        throw new Error('roll back');
      }),
    ).toThrow('roll back');
    expect(store.completions.nextSeq('ps_a')).toBe(2);
    store.completions.insert(record({ completion_id: 'c4', session_id: 'ps_a', seq: 7 }));
    expect(store.completions.nextSeq('ps_a')).toBe(8);
  });
});

const task: TaskRequest = taskRequest('task_1', {
  num_samples: 2, timeout_seconds: 600, agent: { harness: 'pi', model_name: 'qwen3' }, metadata: { group_id: 'g1', agent_timeout: 300 },
});

function result(sessionId: string, reward: number): SessionResult {
  return {
    session_id: sessionId,
    task_id: 'task_1',
    status: 'COMPLETED',
    trajectory: {
      status: 'COMPLETED',
      traces: [],
      metadata: { reconstruction_stats: { completions: 1, chains: 1, merged: 0, breaks: {} }, evaluation: { outcome_reward: reward }, training_filter: { trainable: true, reasons: [] } },
    },
    timing: { init_ms: 1, ready_queue_ms: 2, run_ms: 3, postrun_ms: 4, build_ms: 5, eval_ms: 6, e2e_ms: 21 },
    node_id: 'local',
    error: null,
  };
}

describe('tasks and sessions', () => {
  test('tasks upsert keeps created_at, list filters by status, setStatus reports unknown ids', () => {
    const store = open();
    store.tasks.upsert(task, 'PENDING');
    store.tasks.upsert({ ...task, task_id: 'task_2' }, 'RUNNING');
    store.tasks.upsert({ ...task, instruction: 'changed' }, 'RUNNING');
    const row = store.tasks.get('task_1')!;
    expect(row.task.instruction).toBe('changed');
    expect(row.status).toBe('RUNNING');
    expect(row.updated_at).toBeGreaterThan(row.created_at);
    expect(store.tasks.list().map((t) => t.task.task_id)).toEqual(['task_1', 'task_2']);
    expect(store.tasks.setStatus('task_2', 'COMPLETED')).toBe(true);
    expect(store.tasks.setStatus('nope', 'COMPLETED')).toBe(false);
    expect(store.tasks.list({ status: 'COMPLETED' }).map((t) => t.task.task_id)).toEqual(['task_2']);
    expect(store.tasks.get('nope')).toBeNull();
  });

  test('sessions insert, update, and list by task, status and node', () => {
    const store = open();
    store.sessions.insert({ session_id: 's1', task_id: 'task_1', sample_index: 1, status: 'REGISTERED' });
    store.sessions.insert({ session_id: 's0', task_id: 'task_1', sample_index: 0, status: 'RUNNING', node_id: 'n1', attempt: 2 });
    expect(() => store.sessions.insert({ session_id: 's0', task_id: 'task_1', sample_index: 0, status: 'RUNNING' })).toThrow();
    expect(store.sessions.get('s1')).toMatchObject({ node_id: null, attempt: 0, error: null, metadata: {} });
    expect(store.sessions.listByTask('task_1').map((s) => s.session_id)).toEqual(['s0', 's1']);
    const updated = store.sessions.update('s1', { status: 'RUNNING', node_id: 'n1', metadata: { callback_url: 'http://x' } })!;
    expect(updated).toMatchObject({ status: 'RUNNING', node_id: 'n1', attempt: 0, metadata: { callback_url: 'http://x' } });
    expect(store.sessions.listByStatus('RUNNING').map((s) => s.session_id)).toEqual(['s1', 's0']);
    expect(store.sessions.listByNode('n1').length).toBe(2);
    expect(store.sessions.update('s0', { node_id: null, error: 'node lost' })).toMatchObject({ node_id: null, error: 'node lost', status: 'RUNNING', attempt: 2 });
    expect(store.sessions.listByNode('n1').map((s) => s.session_id)).toEqual(['s1']);
    expect(store.sessions.update('nope', { status: 'ERROR' })).toBeNull();
  });

  test('the dispatch queue: REGISTERED sessions by task dispatch_priority, then age, at most `limit`; counts by status', () => {
    let now = 1000;
    const store = openStore(':memory:', { clock: () => now++ });
    store.tasks.upsert({ ...task, task_id: 'low' }, 'RUNNING');
    store.tasks.upsert({ ...task, task_id: 'high', dispatch_priority: 5 }, 'RUNNING');
    store.tasks.upsert({ ...task, task_id: 'neg', dispatch_priority: -1 }, 'RUNNING');
    for (const [id, taskId] of [['l0', 'low'], ['n0', 'neg'], ['h0', 'high'], ['l1', 'low'], ['h1', 'high'], ['x0', 'unknown']] as const) {
      store.sessions.insert({ session_id: id, task_id: taskId, sample_index: 0, status: 'REGISTERED' });
    }
    store.sessions.update('l1', { status: 'RUNNING' });
    expect(store.sessions.listQueued(10).map((s) => s.session_id)).toEqual(['h0', 'h1', 'l0', 'n0']);
    expect(store.sessions.listQueued(3).map((s) => s.session_id)).toEqual(['h0', 'h1', 'l0']);
    expect(store.sessions.listQueued(0)).toEqual([]);
    expect(store.sessions.listQueued(1)[0]).toMatchObject({ session_id: 'h0', task_id: 'high', status: 'REGISTERED', attempt: 0, metadata: {} });
    expect(store.sessions.countByStatus('REGISTERED')).toBe(5);
    expect(store.sessions.countByStatus('RUNNING')).toBe(1);
    expect(store.sessions.countByStatus('DONE')).toBe(0);
  });
});

describe('results and groups', () => {
  test('results.put is idempotent per session: the first result wins', () => {
    const store = open();
    expect(store.results.put(result('s0', 1))).toBe(true);
    expect(store.results.put(result('s0', 0))).toBe(false);
    expect(store.results.put(result('s1', 0))).toBe(true);
    expect(store.results.get('s0')).toEqual(result('s0', 1));
    expect(store.results.listByTask('task_1').map((r) => r.session_id)).toEqual(['s0', 's1']);
    expect(store.results.listAll().length).toBe(2);
    expect(store.results.get('nope')).toBeNull();
  });

  test('groups: keyed by task_id (group_id is a shared label); listReady returns evaluated, unacknowledged groups; ack succeeds once', () => {
    const store = open();
    store.groups.upsert({ group_id: 'g1', task_id: 'task_1', status: 'PENDING' });
    expect(store.groups.listReady()).toEqual([]);
    expect(store.groups.countReady()).toBe(0);
    expect(store.groups.ack('task_1')).toBe(false);
    store.groups.upsert({ group_id: 'g1', task_id: 'task_1', status: GROUP_EVALUATED, data: { rewards: [1, 0] } });
    store.groups.upsert({ group_id: 'g1', task_id: 'task_2', status: GROUP_EVALUATED });
    expect(store.groups.listReady().map((g) => [g.task_id, g.group_id])).toEqual([['task_1', 'g1'], ['task_2', 'g1']]);
    expect(store.groups.get('task_1')!.data).toEqual({ rewards: [1, 0] });
    expect(store.groups.listByGroupId('g1').map((g) => g.task_id)).toEqual(['task_1', 'task_2']);
    expect(store.groups.ack('task_1')).toBe(true);
    expect(store.groups.ack('task_1')).toBe(false);
    expect(store.groups.ack('g1')).toBe(false);
    expect(store.groups.listReady().map((g) => g.task_id)).toEqual(['task_2']);
    expect(store.groups.countReady()).toBe(1);
    store.groups.upsert({ group_id: 'g1', task_id: 'task_1', status: GROUP_EVALUATED, data: { rewards: [1, 1] } });
    expect(store.groups.get('task_1')!.acked_at).not.toBeNull();
    expect(store.groups.listReady().map((g) => g.task_id)).toEqual(['task_2']);
  });
});

describe('store lifecycle', () => {
  test('WAL mode, schema_version rows, and reopening re-runs no migration and keeps data', () => {
    const path = tempDb();
    const first = open(path);
    expect(first.schemaVersion).toBe(migrations.length);
    first.tasks.upsert(task, 'PENDING');
    first.close();
    stores.pop();
    const second = open(path);
    expect(second.tasks.get('task_1')!.status).toBe('PENDING');
    const raw = new Database(path);
    expect((raw.query('PRAGMA journal_mode').get() as { journal_mode: string }).journal_mode).toBe('wal');
    const versions = raw.query('SELECT version FROM schema_version ORDER BY version').all() as { version: number }[];
    expect(versions.map((v) => v.version)).toEqual(migrations.map((m) => m.version));
    expect(migrate(raw)).toEqual([]);
    raw.close();
  });

  test('version 6 drops the redundant completions_by_session index from a version-5 store; its rows and their order stay', () => {
    const path = tempDb();
    mkdirSync(dirname(path), { recursive: true });
    const db = new Database(path, { create: true });
    migrate(db, migrations.slice(0, 5));
    const indexes = () => (db.query("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'completions' AND sql IS NOT NULL ORDER BY name").all() as { name: string }[]).map((r) => r.name);
    expect(indexes()).toEqual(['completions_by_session', 'completions_by_session_attempt']);
    db.close();
    const store = open(path);
    for (const seq of [0, 1, 2]) store.completions.insert(record({ completion_id: `cmpl_v6_${seq}`, session_id: 'v6', seq }));
    store.close();
    stores.pop();
    const reopened = new Database(path);
    expect((reopened.query("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'completions' AND sql IS NOT NULL").all() as { name: string }[]).map((r) => r.name)).toEqual(['completions_by_session_attempt']);
    reopened.close();
    const again = open(path);
    expect(again.completions.listBySession('v6').map((r) => r.completion_id)).toEqual(['cmpl_v6_0', 'cmpl_v6_1', 'cmpl_v6_2']);
    expect(again.completions.nextSeq('v6')).toBe(3);
  });

  test('a later migration applies once on top of an existing database', () => {
    const db = new Database(':memory:');
    expect(migrate(db)).toEqual(migrations.map((m) => m.version));
    const extended = [...migrations, { version: migrations.length + 1, name: 'nodes', sql: 'CREATE TABLE nodes (node_id TEXT PRIMARY KEY)' }];
    expect(migrate(db, extended)).toEqual([migrations.length + 1]);
    expect(migrate(db, extended)).toEqual([]);
    expect(() => migrate(db)).toThrow(/newer than this polar binary/);
    expect(() => migrate(db, [{ ...extended[0]!, version: 5 }])).toThrow(/numbered 1..n/);
    db.close();
  });

  test('a failing migration leaves no trace and no schema_version row', () => {
    const db = new Database(':memory:');
    const broken = [...migrations, { version: migrations.length + 1, name: 'bad', sql: 'CREATE TABLE t (a); SELECT * FROM missing_table' }];
    expect(() => migrate(db, broken)).toThrow();
    expect((db.query('SELECT MAX(version) AS v FROM schema_version').get() as { v: number }).v).toBe(migrations.length);
    expect(db.query("SELECT name FROM sqlite_master WHERE name = 't'").get()).toBeNull();
    db.close();
  });

  test('store.transaction commits together or rolls back together', () => {
    const store = open();
    expect(() =>
      store.transaction(() => {
        store.tasks.upsert(task, 'PENDING');
        store.completions.insert(record());
        throw new Error('boom');
      }),
    ).toThrow('boom');
    expect(store.tasks.get('task_1')).toBeNull();
    expect(store.completions.count()).toBe(0);
    const n = store.transaction(() => {
      store.tasks.upsert(task, 'PENDING');
      store.completions.insert(record());
      return store.completions.count();
    });
    expect(n).toBe(1);
    expect(store.tasks.get('task_1')).not.toBeNull();
  });

  test('a file that is not a database gives a clear error', async () => {
    const path = tempDb();
    await Bun.write(path, 'this is not sqlite, just text long enough to be a header........................................');
    expect(() => openStore(path)).toThrow(`${path}: not a polar store (SQLite: file is not a database)`);
  });
});
