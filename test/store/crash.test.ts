/**
 * Durability under SIGKILL: a child process inserts ~10k-token completion records in a loop and is killed mid-write,
 * several times over the same database. After each kill every record the child reported committed must be intact
 * (lengths, content, checksum) and no partial record may exist.
 */
import { Database } from 'bun:sqlite';
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CompletionRecord } from '../../src/core/records.ts';
import { openStore } from '../../src/store/index.ts';
import { createCrashWriter } from '../support/crash-writer.ts';

const dir = mkdtempSync(join(tmpdir(), 'polar-store-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const dbPath = join(dir, 'crash.db');

/** Deterministic content of record `i` (also embedded in the child script, so both sides agree). */
const generatorSource = `
function makeRecord(i) {
  let state = (i + 1) * 2654435761 >>> 0;
  const next = () => (state = (state ^ (state << 13)) >>> 0, state = (state ^ (state >>> 17)) >>> 0, state = (state ^ (state << 5)) >>> 0);
  const promptLength = 10000 + (i % 13);
  const responseLength = 200 + (i % 17);
  const prompt_ids = Array.from({ length: promptLength }, () => next() % 151936);
  const response_ids = Array.from({ length: responseLength }, () => next() % 151936);
  const logprobs = response_ids.map(() => Math.fround(-(next() % 100000) / 10000));
  return {
    completion_id: 'cmpl_' + i, session_id: 'ps_' + (i % 5), seq: Math.floor(i / 5), attempt: 0, dialect: 'openai-chat',
    request_body: { i, checksum: checksum(prompt_ids, response_ids, logprobs) },
    ir_request: { i }, ir_response: { i }, finish_reason: { unified: 'stop', raw: 'stop' },
    prompt_ids, response_ids, logprobs, policy_version: 'v1', engine_id: 'sim@test', logprob_semantics: 'processed',
    mode: 'token', capture_error: null, warnings: [], timings: { engine_ms: i, total_ms: i + 1 }, created_at: 1700000000000 + i,
  };
}
function checksum(prompt_ids, response_ids, logprobs) {
  let h = 0x811c9dc5;
  const mix = (v) => { h = Math.imul(h ^ (v >>> 0), 16777619) >>> 0; };
  mix(prompt_ids.length); for (const v of prompt_ids) mix(v);
  mix(response_ids.length); for (const v of response_ids) mix(v);
  const bits = new Uint32Array(Float32Array.from(logprobs).buffer);
  mix(bits.length); for (const v of bits) mix(v);
  return h;
}
`;
const { makeRecord, checksum } = new Function(`${generatorSource}; return { makeRecord, checksum };`)() as {
  makeRecord: (i: number) => CompletionRecord;
  checksum: (p: number[], r: number[], l: number[]) => number;
};

const { killRounds } = createCrashWriter({ dir, dbPath, generatorSource });

function verifyAll(lastReported: number): number {
  const raw = new Database(dbPath);
  expect((raw.query('PRAGMA integrity_check').get() as { integrity_check: string }).integrity_check).toBe('ok');
  raw.close();
  const store = openStore(dbPath);
  try {
    const count = store.completions.count();
    // Every reported commit is there; more may be (committed, but their line was still in the pipe at the kill).
    expect(count).toBeGreaterThanOrEqual(lastReported + 1);
    for (let i = 0; i < count; i++) {
      const stored = store.completions.get(`cmpl_${i}`);
      expect(stored).not.toBeNull();
      const expected = makeRecord(i);
      expect(stored!.prompt_ids.length).toBe(expected.prompt_ids.length);
      expect(stored!.response_ids.length).toBe(expected.response_ids.length);
      expect(stored!.logprobs.length).toBe(expected.response_ids.length);
      const body = stored!.request_body as { i: number; checksum: number };
      expect(checksum(stored!.prompt_ids, stored!.response_ids, stored!.logprobs)).toBe(body.checksum);
      expect(stored).toEqual(expected);
    }
    expect(store.completions.get(`cmpl_${count}`)).toBeNull();
    return count;
  } finally {
    store.close();
  }
}

test('SIGKILL mid-write loses no committed completion record and leaves no partial one', async () => {
  expect(await killRounds([25, 40, 15], verifyAll)).toBeGreaterThanOrEqual(80);
}, 30_000);
