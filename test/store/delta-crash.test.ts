/**
 * Durability of delta rows under SIGKILL: a child process writes growing agent sessions (each turn's prompt extends
 * the previous turn's prompt + response, so almost every row refers to a base) and is killed mid-write, several times
 * over the same database; each restart begins with an empty base cache. After each kill every record the child reported
 * committed must read back exactly, through get and listBySession, and no partial record may exist.
 */
import { Database } from 'bun:sqlite';
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CompletionRecord } from '../../src/core/records.ts';
import { openStore } from '../../src/store/index.ts';
import { createCrashWriter } from '../support/crash-writer.ts';

const dir = mkdtempSync(join(tmpdir(), 'polar-store-delta-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const dbPath = join(dir, 'crash.db');
const SESSIONS = 4;

/** Record `i` is turn floor(i / SESSIONS) of session i % SESSIONS; shared with the child as source text. */
const generatorSource = `
function tokens(s, k, n, salt) {
  let state = ((s + 1) * 2654435761 + (k + 1) * 40503 + salt * 97) >>> 0 || 1;
  const out = new Array(n);
  for (let j = 0; j < n; j++) { state ^= state << 13; state >>>= 0; state ^= state >>> 17; state ^= state << 5; state >>>= 0; out[j] = state % 151936; }
  return out;
}
function makeRecord(i) {
  const s = i % ${SESSIONS}, turn = Math.floor(i / ${SESSIONS});
  let prompt_ids = tokens(s, -1, 3000, 1);
  const messages = [{ role: 'system', content: 'You are a coding agent. '.repeat(50) }];
  for (let k = 0; k <= turn; k++) {
    prompt_ids = prompt_ids.concat(tokens(s, k, 400, 2));
    messages.push({ role: 'tool', content: 'total 8\\n-rw-r--r-- 1 dev dev ' + k + ' src/module_' + ((k * 31) % 977) + '.py\\n'.repeat(8) });
    if (k < turn) prompt_ids = prompt_ids.concat(tokens(s, k, 60, 3));
  }
  const response_ids = tokens(s, turn, 60, 3);
  return {
    completion_id: 'cmpl_' + i, session_id: 'ps_' + s, seq: turn, attempt: 0, dialect: 'openai-chat',
    request_body: { model: 'qwen3', messages, tools: [{ name: 'bash' }], stream: true },
    ir_request: { model: 'qwen3', messages, warnings: [] }, ir_response: { i }, finish_reason: { unified: 'stop', raw: 'stop' },
    prompt_ids, response_ids, logprobs: response_ids.map((v) => Math.fround(-(v % 1000) / 100)), policy_version: 'v1',
    engine_id: 'sim@test', logprob_semantics: 'processed', mode: 'token', capture_error: null, warnings: [],
    timings: { engine_ms: i, total_ms: i + 1 }, created_at: 1700000000000 + i,
  };
}
`;
const { makeRecord } = new Function(`${generatorSource}; return { makeRecord };`)() as { makeRecord: (i: number) => CompletionRecord };

const { killRounds } = createCrashWriter({ dir, dbPath, generatorSource });

function verifyAll(lastReported: number): number {
  const raw = new Database(dbPath);
  expect((raw.query('PRAGMA integrity_check').get() as { integrity_check: string }).integrity_check).toBe('ok');
  const refs = raw.query('SELECT COUNT(*) AS n FROM completions WHERE base_id IS NOT NULL').get() as { n: number };
  const dangling = raw.query('SELECT COUNT(*) AS n FROM completions c WHERE c.base_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM completions b WHERE b.completion_id = c.base_id)').get() as { n: number };
  raw.close();
  expect(dangling.n).toBe(0);
  const store = openStore(dbPath);
  try {
    const count = store.completions.count();
    expect(count).toBeGreaterThanOrEqual(lastReported + 1);
    // Every row but each session's first is a delta, also the first after a restart (the base is read back from disk).
    expect(refs.n).toBe(count - SESSIONS);
    const expected = Array.from({ length: count }, (_, i) => makeRecord(i));
    for (let s = 0; s < SESSIONS; s++) {
      expect(store.completions.listBySession(`ps_${s}`)).toEqual(expected.filter((r) => r.session_id === `ps_${s}`));
    }
    for (const i of [0, count - 1, Math.floor(count / 2)]) expect(store.completions.get(`cmpl_${i}`)).toEqual(expected[i]!);
    expect(store.completions.get(`cmpl_${count}`)).toBeNull();
    return count;
  } finally {
    store.close();
  }
}

test('SIGKILL mid-write of delta rows loses no committed record, leaves no partial one and no dangling base', async () => {
  expect(await killRounds([30, 45, 20], verifyAll)).toBeGreaterThanOrEqual(95);
}, 30_000);
