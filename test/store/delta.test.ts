/**
 * Completion rows in format 2 (prefix-delta prompt ids, delta + zstd JSON texts): exact round trips of random agent
 * sessions (append-only turns, breaks, compaction, fresh prompts, interleaved sub-agents, transactions that roll
 * back, cache evictions, reopened stores), format-1 rows written before migration 3, the chain-depth cap, text-delta
 * edge cases (surrogate pairs) and clear errors on a corrupt chain.
 */
import { Database } from 'bun:sqlite';
import { describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import type { CompletionRecord } from '../../src/core/records.ts';
import { MAX_BASE_DEPTH, migrations, openStore, type CompletionRepositoryOptions, type Store } from '../../src/store/index.ts';
import { migrate } from '../../src/store/migrations.ts';
import { BaseCache, type BaseEntry } from '../../src/store/base-cache.ts';
import { applyBytesDelta, applyTextDelta, bytesDelta, commonSegmentPrefix, compactSegments, cutSegments, decodeColumn, decodeTextColumn, encodeBytesColumn, MAX_SEGMENTS, MIN_COMPRESS_BYTES } from '../../src/store/delta.ts';
import { encodeTextColumn, textDelta } from '../support/legacy-text-delta.ts';
import { packFloat32, packInt32 } from '../../src/store/packing.ts';
import { pairInt32 } from '../../src/core/int32-twin.ts';
import { useTempStores } from '../support/temp-stores.ts';

const { stores, tempDir } = useTempStores('polar-store-delta-');

function tempDb(): string {
  return join(tempDir(), 'polar.db');
}

function open(path: string, completions: CompletionRepositoryOptions = {}): Store {
  const store = openStore(path, { completions });
  stores.push(store);
  return store;
}

function reopen(store: Store, path: string, completions: CompletionRepositoryOptions = {}): Store {
  store.close();
  stores.splice(stores.indexOf(store), 1);
  return open(path, completions);
}

/** xorshift32: deterministic randomness from a seed. */
function rng(seed: number): { int(n: number): number; chance(p: number): boolean } {
  let state = (seed * 2654435761) >>> 0 || 1;
  const next = () => {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state;
  };
  return { int: (n) => next() % n, chance: (p) => next() / 0x100000000 < p };
}

const words = ['ls -l', 'héllo ✓', '😀 ok', '😁', 'src/pkg/module.py', '"quoted"', 'line\nbreak', '中文', 'x'.repeat(40)];

interface Agent {
  /** prompt_ids ++ response_ids of this agent's last call. */
  history: number[];
  messages: { role: string; content: string }[];
}

interface Insert {
  rec: CompletionRecord;
  requestBodyJson?: string;
}

/**
 * A random session: agents (a main agent and sub-agents sharing its system prompt) take turns at random; each turn
 * appends to the agent's history (usually), or breaks it (compaction keeps a random prefix), or starts afresh.
 */
function randomSession(seed: number, sessionId: string, turns: number, firstSeq = 0): Insert[] {
  const r = rng(seed);
  const system = Array.from({ length: 80 + r.int(200) }, () => r.int(151936));
  const agents: Agent[] = Array.from({ length: 1 + r.int(3) }, () => ({ history: [...system], messages: [{ role: 'system', content: 'You are a coding agent. '.repeat(20) }] }));
  const out: Insert[] = [];
  for (let t = 0; t < turns; t++) {
    const agent = agents[r.int(agents.length)]!;
    const roll = r.int(20);
    if (roll === 0) {
      agent.history = Array.from({ length: r.int(300) }, () => r.int(151936)); // fresh prompt, nothing shared
      agent.messages = [{ role: 'user', content: words[r.int(words.length)]! }];
    } else if (roll <= 2) {
      agent.history = agent.history.slice(0, r.int(agent.history.length + 1)); // compaction / break mid-history
      agent.messages = agent.messages.slice(0, 1 + r.int(agent.messages.length));
    }
    const added = Array.from({ length: r.int(120) }, () => r.int(151936));
    if (r.chance(0.1) && agent.history.length > 0) agent.history[r.int(agent.history.length)]! ^= 1; // a re-tokenized token
    const prompt_ids = [...agent.history, ...added];
    const response_ids = Array.from({ length: r.int(60) }, () => r.int(151936));
    agent.messages.push({ role: t % 2 ? 'tool' : 'user', content: Array.from({ length: 1 + r.int(6) }, () => words[r.int(words.length)]).join(' ') });
    const tools = [{ name: 'bash', description: 'run a shell command '.repeat(10) }];
    const request_body = { model: 'qwen3', messages: agent.messages.map((m) => ({ ...m })), tools, stream: r.chance(0.5) };
    const noCapture = r.chance(0.05);
    const rec: CompletionRecord = {
      completion_id: `${sessionId}-c${t}`,
      session_id: sessionId,
      seq: firstSeq + t,
      // A resumed session continues its seq under a new attempt; its rows may sit on an earlier attempt's as base.
      attempt: Math.floor((firstSeq + t) / 8),
      dialect: 'openai-chat',
      request_body,
      ir_request: { model: 'qwen3', messages: agent.messages.map((m) => ({ role: m.role, content: [{ type: 'text', text: m.content }] })), tools, warnings: [] } as unknown as CompletionRecord['ir_request'],
      ir_response: r.chance(0.1) ? null : ({ id: `r${t}`, content: [{ type: 'text', text: words[r.int(words.length)] }], finishReason: { unified: 'stop' } } as unknown as CompletionRecord['ir_response']),
      finish_reason: { unified: 'tool-calls', raw: 'tool_calls' },
      prompt_ids: noCapture ? [] : prompt_ids,
      response_ids: noCapture ? [] : response_ids,
      logprobs: noCapture ? [] : response_ids.map(() => Math.fround(-r.int(100000) / 10000)),
      policy_version: r.chance(0.5) ? `v${r.int(3)}` : null,
      engine_id: 'sim@test',
      logprob_semantics: 'processed',
      mode: 'token',
      capture_error: noCapture ? 'no capture' : null,
      warnings: r.chance(0.2) ? ['top_k ignored'] : [],
      timings: { engine_ms: r.int(1000), total_ms: r.int(1000) + 1 },
      created_at: 1_700_000_000_000 + t,
    };
    // Sometimes the proxy's exact request text (other whitespace than JSON.stringify).
    const requestBodyJson = r.chance(0.3) ? JSON.stringify(request_body, null, r.int(3)) : undefined;
    out.push(requestBodyJson === undefined ? { rec } : { rec, requestBodyJson });
    if (!noCapture) agent.history = [...prompt_ids, ...response_ids];
  }
  return out;
}

/** The proxy's text as received; every other one also with the UTF-8 bytes it was decoded from (what the proxy passes). */
function insertOptions({ rec, requestBodyJson }: Insert): { requestBodyJson?: string; requestBodyUtf8?: Uint8Array } | undefined {
  if (requestBodyJson === undefined) return undefined;
  // The text alone, the text with its bytes, the bytes alone (what the proxy passes for a valid UTF-8 body).
  const bytes = new TextEncoder().encode(requestBodyJson);
  return [{ requestBodyJson }, { requestBodyJson, requestBodyUtf8: bytes }, { requestBodyUtf8: bytes }][rec.seq % 3];
}

/** What a round trip must return: JSON fields as parsed from the stored text. */
function expected({ rec, requestBodyJson }: Insert): CompletionRecord {
  return { ...rec, request_body: requestBodyJson === undefined ? rec.request_body : JSON.parse(requestBodyJson) };
}

function rawDb(path: string): Database {
  return new Database(path, { readonly: true });
}

describe('format 2 round trip', () => {
  test('random interleaved sessions round-trip exactly through listBySession and get, across evictions, rollbacks and reopen', () => {
    const path = tempDb();
    // A tiny cache: sessions evict one another, so the read-the-newest-row fallback runs too.
    const options = { cacheBytes: 40_000, cachePerSession: 2 };
    let store = open(path, options);
    const sessions = Array.from({ length: 6 }, (_, s) => randomSession(100 + s, `ps_${s}`, 40 + s * 5));
    const cursors = sessions.map(() => 0);
    const committed = new Map<string, Insert[]>();
    const r = rng(7);
    let inserted = 0;
    while (cursors.some((c, s) => c < sessions[s]!.length)) {
      const s = r.int(sessions.length);
      const item = sessions[s]![cursors[s]!];
      if (item === undefined) continue;
      cursors[s]!++;
      const roll = r.int(12);
      if (roll === 0) {
        // Rolled back: the row must vanish and never serve as a base.
        expect(() =>
          store.transaction(() => {
            store.completions.insert(item.rec, insertOptions(item));
            throw new Error('rollback');
          }),
        ).toThrow('rollback');
        expect(store.completions.get(item.rec.completion_id)).toBeNull();
        continue;
      }
      const write = () => store.completions.insert(item.rec, insertOptions(item));
      if (roll === 1) store.transaction(write);
      else write();
      committed.set(item.rec.session_id, [...(committed.get(item.rec.session_id) ?? []), item]);
      if (++inserted % 70 === 0) store = reopen(store, path, options);
    }
    let deltaRows = 0;
    for (const [sessionId, items] of committed) {
      const want = items.map(expected);
      expect(store.completions.listBySession(sessionId)).toEqual(want);
      for (const w of want) expect(store.completions.get(w.completion_id)).toEqual(w);
    }
    const raw = rawDb(path);
    deltaRows = (raw.query('SELECT COUNT(*) AS n FROM completions WHERE base_id IS NOT NULL AND prompt_prefix > 0').get() as { n: number }).n;
    const crossSession = raw.query('SELECT COUNT(*) AS n FROM completions c JOIN completions b ON b.completion_id = c.base_id WHERE b.session_id <> c.session_id OR b.rowid >= c.rowid').get() as { n: number };
    raw.close();
    expect(deltaRows).toBeGreaterThan(inserted / 2); // most turns extend an earlier call
    expect(crossSession.n).toBe(0); // a base is always an earlier row of the same session
  });

  test('several seeds, default options: every field survives', () => {
    for (const seed of [1, 2, 3]) {
      const path = tempDb();
      const store = open(path);
      const items = randomSession(seed, `s${seed}`, 60);
      for (const item of items) store.completions.insert(item.rec, insertOptions(item));
      expect(store.completions.listBySession(`s${seed}`)).toEqual(items.map(expected));
      const last = items.at(-1)!;
      expect(store.completions.get(last.rec.completion_id)).toEqual(expected(last));
    }
  });

  test('prompt ids paired with an Int32Array twin (as the engine answer reader pairs them) store the same rows as plain ids', () => {
    const plainPath = tempDb();
    const pairedPath = tempDb();
    const plain = open(plainPath);
    const paired = open(pairedPath);
    const items = randomSession(5, 's5', 40);
    for (const item of items) {
      plain.completions.insert(item.rec, insertOptions(item));
      const rec = { ...item.rec, prompt_ids: [...item.rec.prompt_ids] };
      pairInt32(rec.prompt_ids, Int32Array.from(rec.prompt_ids));
      paired.completions.insert(rec, insertOptions(item));
    }
    expect(paired.completions.listBySession('s5')).toEqual(items.map(expected));
    const rows = (path: string) => {
      const raw = rawDb(path);
      const all = raw.query('SELECT prompt_ids, prompt_prefix, base_id FROM completions ORDER BY rowid').all();
      raw.close();
      return all;
    };
    expect(rows(pairedPath)).toEqual(rows(plainPath));
  });

  test('a 64-turn append-only session stores each prompt token about once and compresses the JSON', () => {
    const path = tempDb();
    const store = open(path);
    const legacy = open(tempDb(), { format: 1 });
    const r = rng(11);
    let history = Array.from({ length: 2000 }, () => r.int(151936));
    const messages: { role: string; content: string }[] = [];
    let fullPromptTokens = 0;
    for (let t = 0; t < 64; t++) {
      const prompt_ids = [...history, ...Array.from({ length: 300 }, () => r.int(151936))];
      const response_ids = Array.from({ length: 50 }, () => r.int(151936));
      messages.push({ role: 'tool', content: `-rw-r--r-- 1 dev dev ${r.int(90000)} src/pkg_${t}/module_${r.int(977)}.py\n`.repeat(20) });
      const rec: CompletionRecord = {
        completion_id: `c${t}`, session_id: 'long', seq: t, attempt: 0, dialect: 'openai-chat',
        request_body: { model: 'm', messages, tools: [{ name: 'bash' }] }, ir_request: { messages } as unknown as CompletionRecord['ir_request'],
        ir_response: null, finish_reason: { unified: 'stop' }, prompt_ids, response_ids, logprobs: response_ids.map(() => -0.5),
        policy_version: null, engine_id: 'e', logprob_semantics: 'raw', mode: 'token', capture_error: null, warnings: [],
        timings: { engine_ms: 1, total_ms: 2 }, created_at: t,
      };
      store.completions.insert(rec);
      legacy.completions.insert(rec);
      fullPromptTokens += prompt_ids.length;
      history = [...prompt_ids, ...response_ids];
    }
    const raw = rawDb(path);
    const stored = raw.query('SELECT SUM(length(prompt_ids)) AS ids, SUM(length(request_body) + length(ir_request)) AS json FROM completions').get() as { ids: number; json: number };
    raw.close();
    const finalPrompt = store.completions.get('c63')!.prompt_ids.length;
    // Every prompt token stored exactly once: the earlier responses inside the final prompt live in response_ids.
    expect(stored.ids).toBe(4 * (finalPrompt - 63 * 50));
    expect(stored.ids).toBeLessThan((4 * fullPromptTokens) / 20);
    const legacyRows = legacy.completions.listBySession('long');
    const legacyJson = legacyRows.reduce((n, rec) => n + JSON.stringify(rec.request_body).length + JSON.stringify(rec.ir_request).length, 0);
    expect(stored.json).toBeLessThan(legacyJson / 20);
    expect(store.completions.listBySession('long')).toEqual(legacyRows);
  });
});

describe('format 1 rows and the chain', () => {
  test('rows written before migration 3 read back, and new rows may use them as base', () => {
    const path = tempDb();
    const db = new Database(path, { create: true });
    migrate(db, migrations.slice(0, 2));
    const prompt = Array.from({ length: 500 }, (_, i) => (i * 7919) % 151936);
    db.query(
      `INSERT INTO completions (completion_id, session_id, seq, dialect, request_body, ir_request, ir_response, finish_reason, prompt_ids, response_ids, logprobs, policy_version, engine_id, logprob_semantics, mode, capture_error, warnings, engine_ms, total_ms, created_at)
       VALUES ('old', 's', 0, 'openai-chat', ?, '{"messages":[]}', NULL, '{"unified":"stop"}', ?, ?, ?, 'v1', 'e', 'raw', 'chat', NULL, '[]', 1, 2, 3)`,
    ).run(JSON.stringify({ messages: [{ role: 'user', content: 'héllo ✓ '.repeat(100) }] }), packInt32(prompt), packInt32([5, 6]), packFloat32([-1, -2]));
    db.close();
    const store = open(path);
    expect(store.schemaVersion).toBe(migrations.length);
    const old = store.completions.get('old')!;
    expect(old.prompt_ids).toEqual(prompt);
    expect(old.request_body).toEqual({ messages: [{ role: 'user', content: 'héllo ✓ '.repeat(100) }] });
    const next: CompletionRecord = { ...old, completion_id: 'new', seq: 1, prompt_ids: [...prompt, 5, 6, 7, 8], request_body: { messages: [{ role: 'user', content: 'héllo ✓ '.repeat(100) }, { role: 'user', content: 'more' }] } };
    store.completions.insert(next);
    const raw = rawDb(path);
    expect(raw.query("SELECT base_id, prompt_prefix, format FROM completions WHERE completion_id = 'new'").get()).toEqual({ base_id: 'old', prompt_prefix: 502, format: 2 });
    raw.close();
    expect(store.completions.listBySession('s')).toEqual([old, next]);
  });

  test('the format-1 writer stores a body given only as UTF-8 bytes as its text, exactly', () => {
    const store = open(tempDb(), { format: 1 });
    const text = '{ "messages": [{"role": "user", "content": "héllo ✓ 🚀"}], "model" :"m"}';
    const rec: CompletionRecord = {
      completion_id: 'f1', session_id: 's', seq: 0, attempt: 0, dialect: 'openai-chat', request_body: null, ir_request: { messages: [] } as unknown as CompletionRecord['ir_request'],
      ir_response: null, finish_reason: { unified: 'stop' }, prompt_ids: [1, 2], response_ids: [3], logprobs: [-1], policy_version: null, engine_id: 'e',
      logprob_semantics: 'raw', mode: 'chat', capture_error: null, warnings: [], timings: { engine_ms: 0, total_ms: 0 }, created_at: 0,
    };
    store.completions.insert(rec, { requestBodyUtf8: new TextEncoder().encode(text) });
    expect(store.completions.get('f1')!.request_body).toEqual(JSON.parse(text));
  });

  test(`chains stop at depth ${MAX_BASE_DEPTH}: the next record is stored in full`, () => {
    const path = tempDb();
    const store = open(path);
    let history: number[] = [];
    const all: CompletionRecord[] = [];
    for (let t = 0; t < MAX_BASE_DEPTH + 5; t++) {
      const prompt_ids = [...history, ...Array.from({ length: 70 }, (_, i) => t * 100 + i)];
      const rec: CompletionRecord = {
        completion_id: `d${t}`, session_id: 'deep', seq: t, attempt: 0, dialect: 'openai-chat', request_body: null, ir_request: { t } as unknown as CompletionRecord['ir_request'],
        ir_response: null, finish_reason: { unified: 'stop' }, prompt_ids, response_ids: [1], logprobs: [-1], policy_version: null, engine_id: 'e',
        logprob_semantics: 'raw', mode: 'token', capture_error: null, warnings: [], timings: { engine_ms: 0, total_ms: 0 }, created_at: t,
      };
      store.completions.insert(rec);
      all.push(rec);
      history = [...prompt_ids, 1];
    }
    const raw = rawDb(path);
    const full = raw.query('SELECT completion_id FROM completions WHERE base_id IS NULL ORDER BY rowid').all() as { completion_id: string }[];
    raw.close();
    expect(full.map((f) => f.completion_id)).toEqual(['d0', `d${MAX_BASE_DEPTH + 1}`]);
    expect(store.completions.listBySession('deep')).toEqual(all);
    expect(store.completions.get(`d${MAX_BASE_DEPTH}`)).toEqual(all[MAX_BASE_DEPTH]!);
  });

  test('a missing base row is a clear error, not a wrong record', () => {
    const path = tempDb();
    const store = open(path);
    const items = randomSession(5, 'x', 4);
    for (const item of items) store.completions.insert({ ...item.rec, prompt_ids: [...Array(100).keys(), item.rec.seq] });
    const db = new Database(path);
    const child = db.query("SELECT completion_id, base_id FROM completions WHERE base_id IS NOT NULL LIMIT 1").get() as { completion_id: string; base_id: string };
    db.query('DELETE FROM completions WHERE completion_id = ?').run(child.base_id);
    db.close();
    expect(() => store.completions.get(child.completion_id)).toThrow(new RegExp(`refers to base record ${child.base_id}, which is missing`));
    expect(() => store.completions.listBySession('x')).toThrow(/missing/);
  });
});

describe('text deltas', () => {
  test('never split a surrogate pair and rebuild exactly', () => {
    const base = `{"a":"${'x'.repeat(300)}😀${'y'.repeat(300)}"}`;
    const text = `{"a":"${'x'.repeat(300)}😁${'y'.repeat(300)}"}`; // same high surrogate, different low one
    const delta = textDelta(text, base);
    expect(delta.prefix).toBe(306);
    expect(delta.middle).toBe('😁');
    // U+1F200 and U+1F600 share the low surrogate (\uDE00): the common suffix must not start inside the pair.
    const other = `{"a":"${'x'.repeat(300)}\u{1F200}${'y'.repeat(300)}"}`;
    const suffixDelta = textDelta(other, base);
    expect(suffixDelta.middle).toBe('\u{1F200}');
    for (const [d, t] of [[delta, text], [suffixDelta, other]] as const) {
      for (const compress of [true, false]) {
        const decoded = decodeTextColumn(encodeTextColumn(d, compress, 1));
        expect(decoded).toEqual(d);
        expect(applyTextDelta(decoded, base)).toBe(t);
      }
    }
  });

  test('prefix and suffix never overlap when the new text repeats the base', () => {
    const base = 'ab'.repeat(500);
    for (const text of ['ab'.repeat(501), 'ab'.repeat(499), base, `${base}c${base}`]) {
      const delta = textDelta(text, base);
      expect(delta.prefix + delta.suffix).toBeLessThanOrEqual(Math.min(text.length, base.length));
      expect(applyTextDelta(delta, base)).toBe(text);
    }
  });

  test('too little in common: stored whole; a corrupt column is a clear error', () => {
    expect(textDelta('{"a":1}', '{"a":2}')).toEqual({ prefix: 0, suffix: 0, middle: '{"a":1}' });
    expect(() => decodeTextColumn(new Uint8Array([9, 1, 2]))).toThrow(/unknown codec 9/);
    expect(() => decodeTextColumn(new Uint8Array([0, 65]))).toThrow(/malformed delta header/);
    expect(() => applyTextDelta({ prefix: 10, suffix: 10, middle: '' }, 'short')).toThrow(/does not fit/);
  });
});

describe('byte deltas (what new rows store)', () => {
  const utf8 = (text: string) => new TextEncoder().encode(text);
  const text = (bytes: Uint8Array) => new TextDecoder('utf-8', { fatal: true }).decode(bytes);

  test('never split a UTF-8 sequence and rebuild exactly, raw and zstd', () => {
    // The texts differ inside a 4-byte sequence (U+1F600 vs U+1F601) and inside a 3-byte one (✓ vs ✔) at the end.
    const base = `${'é✓'.repeat(200)}\u{1F600}${'x'.repeat(1300)}✓`;
    const other = `${'é✓'.repeat(200)}\u{1F601}${'x'.repeat(1300)}✔`;
    const delta = bytesDelta(utf8(other), utf8(base));
    expect(delta.prefix).toBe(utf8('é✓'.repeat(200)).byteLength);
    expect(text(delta.middle)).toBe(`\u{1F601}${'x'.repeat(1300)}✔`);
    const appended = bytesDelta(utf8(`${base}🎉 more`), utf8(base));
    expect(appended).toEqual({ prefix: utf8(base).byteLength, suffix: 0, middle: utf8('🎉 more') });
    for (const [d, t] of [[delta, other], [appended, `${base}🎉 more`]] as const) {
      for (const compress of [true, false]) {
        const column = encodeBytesColumn(d, compress, 1);
        // The codec byte: zstd (3) only when asked and the middle is at least MIN_COMPRESS_BYTES, else raw (2).
        expect(column[0]).toBe(compress && d.middle.byteLength >= MIN_COMPRESS_BYTES ? 3 : 2);
        const decoded = decodeColumn(column);
        expect(decoded.unit).toBe('utf8');
        if (decoded.unit !== 'utf8') continue;
        expect({ prefix: decoded.prefix, suffix: decoded.suffix, middle: Array.from(decoded.middle) }).toEqual({ prefix: d.prefix, suffix: d.suffix, middle: Array.from(d.middle) });
        expect(text(applyBytesDelta(decoded, utf8(base)))).toBe(t);
      }
    }
  });

  test('prefix and suffix never overlap; too little in common is stored whole; corrupt columns are clear errors', () => {
    const base = utf8('ab'.repeat(500));
    for (const t of ['ab'.repeat(501), 'ab'.repeat(499), 'ab'.repeat(500), `${'ab'.repeat(500)}c${'ab'.repeat(500)}`]) {
      const delta = bytesDelta(utf8(t), base);
      expect(delta.prefix + delta.suffix).toBeLessThanOrEqual(Math.min(utf8(t).byteLength, base.byteLength));
      expect(text(applyBytesDelta(delta, base))).toBe(t);
    }
    expect(bytesDelta(utf8('{"a":1}'), utf8('{"a":2}'))).toEqual({ prefix: 0, suffix: 0, middle: utf8('{"a":1}') });
    expect(() => decodeColumn(new Uint8Array([2, 65]))).toThrow(/malformed delta header/);
    expect(() => decodeColumn(new Uint8Array([9, 1, 2]))).toThrow(/unknown codec 9/);
    expect(() => applyBytesDelta({ prefix: 10, suffix: 10, middle: new Uint8Array(0) }, utf8('short'))).toThrow(/does not fit/);
  });

  test('rows whose text deltas count UTF-16 code units (written before) still read, and serve as a base', () => {
    const path = tempDb();
    const store = open(path);
    const items = randomSession(11, 'u', 3);
    const records = items.map((item) => ({ ...item.rec, request_body: { messages: [{ role: 'user', content: `héllo ✓ 🎉 ${'word '.repeat(100)}` }, { role: 'user', content: `turn ${item.rec.seq} ✔` }] } }));
    store.completions.insert(records[0]!);
    store.completions.insert(records[1]!);
    // Rewrite the second row's request_body as the old writer stored it: a TextDelta in code units (codec 0 or 1). The
    // shared prefix holds 'é✓🎉', so its length in code units is not its length in bytes.
    const old = textDelta(JSON.stringify(records[1]!.request_body), JSON.stringify(records[0]!.request_body));
    expect(old.prefix).toBeGreaterThan(100);
    const legacy = encodeTextColumn(old, true, 1);
    expect([0, 1]).toContain(legacy[0]!);
    const db = new Database(path);
    db.query('UPDATE completions SET request_body = ? WHERE completion_id = ?').run(legacy, records[1]!.completion_id);
    expect((db.query('SELECT base_id FROM completions WHERE completion_id = ?').get(records[1]!.completion_id) as { base_id: string }).base_id).toBe(records[0]!.completion_id);
    db.close();
    const fresh = open(path); // empty cache: the next insert decodes the legacy row as its base
    expect(fresh.completions.get(records[1]!.completion_id)).toEqual(records[1]!);
    fresh.completions.insert(records[2]!);
    expect(fresh.completions.listBySession(records[0]!.session_id)).toEqual(records);
  });
});

describe('base cache', () => {
  const entry = (id: string, bytes: number): BaseEntry => ({
    completion_id: id, depth: 0, segments: [new Int32Array(bytes / 4)], length: bytes / 4, ownBytes: bytes, promptLength: bytes / 4, texts: [new Uint8Array(0), new Uint8Array(0), null], ir: null,
  });

  test('keeps the newest entries per session and evicts the least recently used session over budget', () => {
    const cache = new BaseCache(10_000, 2);
    cache.add('a', entry('a1', 2000));
    cache.add('a', entry('a2', 2000));
    cache.add('a', entry('a3', 2000));
    expect(cache.get('a').map((e) => e.completion_id)).toEqual(['a3', 'a2']);
    cache.add('b', entry('b1', 4000));
    expect(cache.get('a').length).toBe(2); // touch a: b is now the least recently used
    cache.add('c', entry('c1', 4000));
    expect(cache.has('b')).toBe(false);
    expect(cache.has('a')).toBe(true);
    expect(cache.residentBytes).toBeLessThanOrEqual(10_000);
    cache.add('d', entry('d1', 20_000)); // larger than the whole budget: not cached
    expect(cache.has('d')).toBe(false);
  });

  test(`compactSegments keeps at most ${MAX_SEGMENTS} segments, joining all but the first, with the same ids`, () => {
    const few = [Int32Array.from([1, 2]), Int32Array.from([3])];
    expect(compactSegments(few)).toEqual({ segments: few, copiedBytes: 0 });
    const many = [Int32Array.from([1, 2, 3]), ...Array.from({ length: MAX_SEGMENTS + 4 }, (_, i) => Int32Array.from([10 + i, 100 + i]))];
    const { segments, copiedBytes } = compactSegments(many);
    expect(segments).toHaveLength(2);
    expect(segments[0]).toBe(many[0]!);
    expect(copiedBytes).toBe(4 * 2 * (MAX_SEGMENTS + 4));
    expect(segments.flatMap((s) => Array.from(s))).toEqual(many.flatMap((s) => Array.from(s)));
  });

  test('segments: common prefix across segment borders, cut without copying', () => {
    const segments = [Int32Array.from([1, 2, 3]), Int32Array.from([4, 5]), Int32Array.from([6])];
    expect(commonSegmentPrefix(segments, [1, 2, 3, 4, 5, 6, 7])).toBe(6);
    expect(commonSegmentPrefix(segments, [1, 2, 3, 4])).toBe(4);
    expect(commonSegmentPrefix(segments, [1, 2, 9])).toBe(2);
    expect(commonSegmentPrefix(segments, [])).toBe(0);
    // Ids held as an Int32Array are compared as bytes: an id that differs only above its low byte still ends the
    // prefix at that id, and segments that are views at an offset compare like whole arrays.
    const twinOf = (ids: number[]) => Int32Array.from(ids);
    expect(commonSegmentPrefix(segments, twinOf([1, 2, 3, 4, 5, 6, 7]))).toBe(6);
    expect(commonSegmentPrefix([Int32Array.from([1, 256, 3])], twinOf([1, 0, 3]))).toBe(1);
    expect(commonSegmentPrefix([Int32Array.from([1, -1])], twinOf([1, 0x7fffffff]))).toBe(1);
    const r = rng(11);
    for (let trial = 0; trial < 200; trial++) {
      const whole = Int32Array.from({ length: 1 + r.int(300) }, () => r.int(8) * 65_536 + r.int(3));
      const cuts = [r.int(whole.length), r.int(whole.length)].sort((a, b) => a - b);
      const pieces = [whole.subarray(0, cuts[0]), whole.subarray(cuts[0], cuts[1]), whole.subarray(cuts[1])];
      const ids = Array.from(whole.subarray(0, r.int(whole.length + 1)));
      if (ids.length > 0 && r.int(2) === 0) ids[r.int(ids.length)] = r.int(8) * 65_536 + r.int(3);
      expect(commonSegmentPrefix(pieces, twinOf(ids))).toBe(commonSegmentPrefix(pieces, ids));
    }
    // Long segments (compared as bytes) mixed with short ones (compared in a loop), as a chain builds them.
    const long = Int32Array.from({ length: 3000 }, (_, i) => i * 3);
    const chain = [long, ...Array.from({ length: 40 }, (_, t) => Int32Array.from({ length: 7 }, (_, i) => t * 100 + i))];
    const flat = chain.flatMap((segment) => Array.from(segment));
    for (const stop of [0, 1, 2999, 3000, 3001, 3000 + 7 * 20 + 3, flat.length]) {
      const ids = flat.slice(0, stop).concat([-5]);
      expect(commonSegmentPrefix(chain, twinOf(ids))).toBe(stop);
    }
    const cut = cutSegments(segments, 4);
    expect(cut.map((s) => Array.from(s))).toEqual([[1, 2, 3], [4]]);
    expect(cut[1]!.buffer).toBe(segments[1]!.buffer);
  });
});

describe('corrupt chains', () => {
  test('a cycle in base references is an error, and a broken newest row does not block new inserts', () => {
    const path = tempDb();
    const store = open(path);
    const items = randomSession(9, 'y', 3);
    for (const item of items) store.completions.insert({ ...item.rec, prompt_ids: [...Array(100).keys(), item.rec.seq] });
    const db = new Database(path);
    db.query("UPDATE completions SET base_id = 'y-c2' WHERE completion_id = 'y-c1'").run();
    db.close();
    expect(() => store.completions.get('y-c2')).toThrow(/cycle/);
    expect(() => store.completions.listBySession('y')).toThrow(/cycle/);
    const fresh = open(path); // empty cache: the next insert reads the (broken) newest row
    const next = { ...items[2]!.rec, completion_id: 'y-c3', seq: 3, prompt_ids: [...Array(100).keys(), 3] };
    fresh.completions.insert(next);
    const raw = rawDb(path);
    expect(raw.query("SELECT base_id FROM completions WHERE completion_id = 'y-c3'").get()).toEqual({ base_id: null });
    raw.close();
    expect(fresh.completions.get('y-c3')).toEqual(next);
  });
});
