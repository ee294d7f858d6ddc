/**
 * Group commit: CompletionRepository.insertMany stores a batch in one transaction exactly as insert would, and a
 * failing record costs no other its place; the proxy's Recorder gathers the records built in one event-loop turn into
 * one insertMany, hands out seqs in call order, and rejects only the call whose record was refused.
 */
import { Database } from 'bun:sqlite';
import { expect, test } from 'bun:test';
import { join } from 'node:path';
import { fixedClock } from '../../src/core/clock.ts';
import type { IRRequest, IRResponse } from '../../src/core/ir.ts';
import type { CompletionRecord } from '../../src/core/records.ts';
import type { EngineClient } from '../../src/engines/types.ts';
import { Recorder, type RecordInput } from '../../src/proxy/recorder.ts';
import { newProxyCounters, type ProxyStore } from '../../src/proxy/types.ts';
import { openStore, type CompletionInsert, type Store } from '../../src/store/index.ts';
import { useTempStores } from '../support/temp-stores.ts';

const { stores, tempDir } = useTempStores('polar-group-commit-');

function open(): { store: Store; path: string } {
  const path = join(tempDir(), 'polar.db');
  const store = openStore(path, { clock: fixedClock(1_700_000_000_000, 1000) });
  stores.push(store);
  return { store, path };
}

/** Turn `turn` of a session: its prompt extends the previous turn's prompt and answer (200 ids per turn). */
function turn(session: string, n: number, overrides: Partial<CompletionRecord> = {}): CompletionRecord {
  const ids = (from: number, count: number) => Array.from({ length: count }, (_, i) => (from + i) * 7 + session.length);
  return {
    completion_id: `${session}_${n}`,
    session_id: session,
    seq: n,
    attempt: 0,
    dialect: 'openai-chat',
    request_body: { model: 'm', messages: Array.from({ length: n + 1 }, (_, i) => ({ role: 'user', content: `turn ${i} of ${session}` })) },
    ir_request: { model: 'm', turn: n } as unknown as CompletionRecord['ir_request'],
    ir_response: { id: `r${n}`, text: `answer ${n}` } as unknown as CompletionRecord['ir_response'],
    finish_reason: { unified: 'stop', raw: 'stop' },
    prompt_ids: ids(0, 200 * (n + 1) - 20),
    response_ids: ids(200 * (n + 1) - 20, 20),
    logprobs: Array.from({ length: 20 }, (_, i) => Math.fround(-i / 8)),
    policy_version: 'v1',
    engine_id: 'sim@test',
    logprob_semantics: 'processed',
    mode: 'token',
    capture_error: null,
    warnings: [],
    timings: { engine_ms: 1, total_ms: 2 },
    created_at: 1_700_000_000_000 + n,
    ...overrides,
  };
}

function baseIds(path: string): Record<string, string | null> {
  const raw = new Database(path, { readonly: true });
  try {
    const rows = raw.query('SELECT completion_id, base_id FROM completions').all() as { completion_id: string; base_id: string | null }[];
    return Object.fromEntries(rows.map((row) => [row.completion_id, row.base_id]));
  } finally {
    raw.close();
  }
}

test('insertMany stores a batch in one transaction: every record reads back equal, a later turn uses an earlier one of the batch as its base', () => {
  const { store, path } = open();
  const batch = [turn('a', 0), turn('b', 0), turn('a', 1), turn('a', 2), turn('b', 1)];
  expect(store.completions.insertMany(batch.map((rec) => ({ rec })))).toEqual([null, null, null, null, null]);
  expect(store.completions.listBySession('a')).toEqual([turn('a', 0), turn('a', 1), turn('a', 2)]);
  expect(store.completions.listBySession('b')).toEqual([turn('b', 0), turn('b', 1)]);
  expect(baseIds(path)).toMatchObject({ a_1: 'a_0', a_2: 'a_1', b_1: 'b_0' });
  expect(store.completions.nextSeq('a')).toBe(3);
  // The caches the batch filled are right: the next turn, inserted alone, builds on the batch's last one.
  store.completions.insert(turn('a', 3));
  expect(store.completions.get('a_3')).toEqual(turn('a', 3));
  expect(baseIds(path).a_3).toBe('a_2');
});

for (const [what, bad, error] of [
  ['a duplicate completion_id (refused by SQLite inside the transaction)', turn('a', 1, { completion_id: 'a_0' }), /UNIQUE|constraint/i],
  ['a token id outside int32 (refused before its row is written)', turn('a', 1, { response_ids: [2 ** 31] , logprobs: [0] }), /not an int32/],
] as const) {
  test(`a batch with ${what}: that record alone gets its error, the others are committed and read back equal`, () => {
    const { store, path } = open();
    store.completions.insert(turn('a', 0));
    const items: CompletionInsert[] = [turn('b', 0), bad, turn('a', 2), turn('b', 1)].map((rec) => ({ rec }));
    const errors = store.completions.insertMany(items);
    expect(errors[0]).toBeNull();
    expect(errors[1]!.message).toMatch(error);
    expect(errors[2]).toBeNull();
    expect(errors[3]).toBeNull();
    // The first try rolled back after it had cached b_0 and a_2 as bases; without forgetting them the retry would
    // build b_0 and a_2 on themselves (a cycle) and these reads would throw.
    expect(store.completions.listBySession('a')).toEqual([turn('a', 0), turn('a', 2)]);
    expect(store.completions.listBySession('b')).toEqual([turn('b', 0), turn('b', 1)]);
    const bases = baseIds(path);
    expect(bases.b_0).toBeNull();
    expect(bases.b_1).toBe('b_0');
    expect(store.completions.count()).toBe(4);
  });
}

test('insertMany inside an outer transaction inserts one by one and rolls back with it', () => {
  const { store } = open();
  expect(() =>
    store.transaction(() => {
      expect(store.completions.insertMany([{ rec: turn('a', 0) }, { rec: turn('a', 1) }])).toEqual([null, null]);
      throw new Error('roll back');
    }),
  ).toThrow('roll back');
  expect(store.completions.count()).toBe(0);
  store.completions.insertMany([{ rec: turn('a', 0) }, { rec: turn('a', 1) }]);
  expect(store.completions.listBySession('a')).toEqual([turn('a', 0), turn('a', 1)]);
});

// --- the Recorder ---

const engine = { kind: 'vllm', id: 'vllm@test', mode: 'token' } as unknown as EngineClient;

function input(session: string, id: string): RecordInput {
  const response = { id, content: [{ type: 'text', text: 'ok' }], toolCalls: [], finishReason: { unified: 'stop', raw: 'stop' }, warnings: [] } as unknown as IRResponse;
  return {
    completionId: id,
    sessionId: session,
    dialect: 'openai-chat',
    requestBody: { model: 'm', id },
    irRequest: { model: 'm', messages: [], warnings: [] } as unknown as IRRequest,
    completion: { response, capture: { promptIds: [1, 2, 3], responseIds: [4, 5], logprobs: [-0.5, -0.25], logprobSemantics: 'processed', captureError: null } as never, policyVersion: null, warnings: [], engineMs: 3 },
    policyVersion: null,
    warnings: [],
    startedAt: 1_700_000_000_000,
  };
}

/** A file store whose insertMany calls are counted (batch sizes, in order). */
function spiedStore(): { store: Store; batches: number[] } {
  const { store } = open();
  const batches: number[] = [];
  const insertMany = store.completions.insertMany.bind(store.completions);
  store.completions.insertMany = (items) => {
    batches.push(items.length);
    return insertMany(items);
  };
  return { store, batches };
}

test('the Recorder commits the records built in one event-loop turn as one group, seqs in call order; the next turn is the next group', async () => {
  const { store, batches } = spiedStore();
  const counters = newProxyCounters();
  const committed: string[] = [];
  const recorder = new Recorder(store, engine, fixedClock(1_700_000_000_005), counters, (rec) => committed.push(rec.completion_id));
  store.completions.insert(turn('s', 0, { completion_id: 'old' }));
  const first = await Promise.all(['c1', 'c2', 'c3', 'c4'].map((id, i) => recorder.commit(input(i % 2 === 0 ? 's' : 't', id))));
  expect(batches).toEqual([4]);
  expect(first.map((r) => [r.session_id, r.seq])).toEqual([['s', 1], ['t', 0], ['s', 2], ['t', 1]]);
  expect(store.completions.listBySession('s').map((r) => r.completion_id)).toEqual(['old', 'c1', 'c3']);
  expect(committed).toEqual(['c1', 'c2', 'c3', 'c4']);
  expect(counters.completions).toBe(4);
  const again = await recorder.commit(input('s', 'c5'));
  expect(batches).toEqual([4, 1]);
  expect(again.seq).toBe(3);
});

test('the Recorder rejects only the call whose record the store refuses; the others of its group are committed', async () => {
  const { store, batches } = spiedStore();
  const counters = newProxyCounters();
  const recorder = new Recorder(store, engine, fixedClock(1_700_000_000_005), counters);
  await recorder.commit(input('s', 'taken'));
  const settled = await Promise.allSettled(['a', 'taken', 'b'].map((id) => recorder.commit(input('s', id))));
  expect(batches).toEqual([1, 3]);
  expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  expect(String((settled[1] as PromiseRejectedResult).reason)).toMatch(/UNIQUE|constraint/i);
  expect(store.completions.listBySession('s').map((r) => [r.completion_id, r.seq])).toEqual([['taken', 0], ['a', 1], ['b', 3]]);
  expect(counters.completions).toBe(3);
  // The refused record's seq is not handed out again while its group was outstanding, and afterwards the store's
  // own answer (max seq + 1) takes over.
  expect((await recorder.commit(input('s', 'c'))).seq).toBe(4);
});

test('a store without insertMany gets one insert per record, in call order', async () => {
  const { store } = open();
  const order: string[] = [];
  const plain: ProxyStore = {
    completions: {
      insert: (rec, opts) => {
        order.push(rec.completion_id);
        store.completions.insert(rec, opts);
      },
      listBySession: (id) => store.completions.listBySession(id),
      nextSeq: (id) => store.completions.nextSeq(id),
    },
  };
  const recorder = new Recorder(plain, engine, fixedClock(1_700_000_000_005), newProxyCounters());
  const records = await Promise.all(['x', 'y', 'z'].map((id) => recorder.commit(input('s', id))));
  expect(order).toEqual(['x', 'y', 'z']);
  expect(records.map((r) => r.seq)).toEqual([0, 1, 2]);
  expect(store.completions.listBySession('s').map((r) => r.completion_id)).toEqual(['x', 'y', 'z']);
});
