/**
 * The order of completion ids and what a group commit writes: WAL bytes and insert CPU per small completion record
 * when `completion_id` (the completions table's primary key, a B-tree of its own) is random (`randomId`, the proxy's
 * ids before this bench) against time-ordered (`timeOrderedId`, the proxy's ids now), in a store that already holds
 * `--rows` records (default 300,000: a day of a busy proxy), committed `group` records at a time as the proxy's group
 * commit does (1: sequential calls, nothing to group; 8 and 32: calls in flight at once). 64 sessions take turns.
 * The WAL is not checkpointed while measuring (wal_autocheckpoint 0), so its growth is exactly the pages the commits
 * wrote: 4,120 bytes per page (a 24-byte frame header + a 4 KiB page).
 * Run: bun bench/store-keys.ts [--quick] [--rows=N] [random/g1 time-ordered/g32 …]
 */
import type { Database } from 'bun:sqlite';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomId, timeOrderedId, type IdGenerator } from '../src/core/ids.ts';
import type { CompletionRecord } from '../src/core/records.ts';
import { openStore } from '../src/store/index.ts';
import { defineBench, numberOption } from './lib/bench.ts';

const ORDERS: Record<string, IdGenerator> = { random: randomId, 'time-ordered': timeOrderedId };
const GROUPS = [1, 8, 32];
const SESSIONS = 64;
const WAL_FRAME_BYTES = 24 + 4096;

/** A small call's record (a ~2 KB request, 600 prompt ids, 40 response ids), new ids and session per call site. */
function smallRecord(completionId: string, session: number, seq: number): { rec: CompletionRecord; requestBodyJson: string } {
  const prompt_ids = Array.from({ length: 600 + seq * 50 }, (_, i) => (i * 7919 + session * 104_729) % 151_936);
  const response_ids = Array.from({ length: 40 }, (_, i) => (i * 31 + seq) % 151_936);
  const text = `turn ${seq} of session ${session}: ` + 'list the files and read the failing test. '.repeat(40);
  const requestBodyJson = JSON.stringify({ model: 'qwen3', max_tokens: 1024, messages: [{ role: 'user', content: text }] });
  return {
    requestBodyJson,
    rec: {
      completion_id: completionId,
      session_id: `ps_bench_${session}`,
      seq,
      dialect: 'anthropic-messages',
      request_body: null,
      ir_request: { model: 'qwen3', system: [], messages: [{ role: 'user', content: [{ type: 'text', text }] }], tools: [], warnings: [] } as unknown as CompletionRecord['ir_request'],
      ir_response: { id: 'r', content: [{ type: 'text', text: 'ok' }], finishReason: { unified: 'stop', raw: 'stop' }, warnings: [] } as unknown as CompletionRecord['ir_response'],
      finish_reason: { unified: 'stop', raw: 'stop' },
      prompt_ids,
      response_ids,
      logprobs: response_ids.map((v) => -(v % 100) / 100),
      policy_version: 'v1',
      engine_id: 'vllm@http://127.0.0.1:8000',
      logprob_semantics: 'processed',
      mode: 'chat',
      capture_error: null,
      warnings: [],
      timings: { engine_ms: 10, total_ms: 11 },
      created_at: Date.now(),
    },
  };
}

await defineBench({
  name: 'store-keys',
  variants: () => Object.keys(ORDERS).flatMap((order) => GROUPS.map((group) => `${order}/g${group}`)),
  async run(variant, ctx) {
    const [order, groupText] = variant.split('/') as [string, string];
    const newId = ORDERS[order]!;
    const group = Number(groupText.slice(1));
    const rows = numberOption(ctx.args, 'rows', ctx.quick ? 20_000 : 300_000, { ok: (v) => Number.isInteger(v) && v >= 0, what: 'a non-negative integer' });
    const measured = ctx.quick ? 960 : 3_840;
    const dir = mkdtempSync(join(tmpdir(), 'polar-bench-store-keys-'));
    try {
      const path = join(dir, 'polar.db');
      const store = openStore(path);
      const seqs = new Array<number>(SESSIONS).fill(0);
      let turn = 0;
      const next = () => {
        const session = turn++ % SESSIONS;
        const seq = seqs[session]!++;
        const { rec, requestBodyJson } = smallRecord(newId('cmpl'), session, seq % 20);
        rec.seq = seq;
        return { rec, opts: { requestBodyJson } };
      };
      // The rows already there, in groups of 256.
      for (let done = 0; done < rows; done += 256) store.completions.insertMany(Array.from({ length: Math.min(256, rows - done) }, next));
      // The store's own connection (checkpoint settings are per connection); a bench-only reach past `private`.
      const db = (store as unknown as { db: Database }).db;
      db.run('PRAGMA wal_checkpoint(TRUNCATE)');
      db.run('PRAGMA wal_autocheckpoint = 0');
      const batches = Array.from({ length: measured / group }, () => Array.from({ length: group }, next));
      const cpu0 = process.cpuUsage();
      const wall0 = performance.now();
      for (const batch of batches) {
        const errors = store.completions.insertMany(batch);
        if (errors.some((e) => e !== null)) throw new Error(`insert failed: ${errors.find((e) => e !== null)}`);
      }
      const wallMs = performance.now() - wall0;
      const cpu = process.cpuUsage(cpu0);
      const walBytes = statSync(`${path}-wal`).size;
      store.close();
      return {
        title: `completion ids: random vs time-ordered · small records, ${SESSIONS} sessions, ${rows.toLocaleString('en-US')} rows before, WAL bytes and insert cost per record`,
        columns: ['ids', 'records per commit', 'WAL KB / record', 'pages / commit', 'insert CPU µs / record', 'insert wall µs / record'],
        rows: [[order, group, walBytes / measured / 1024, walBytes / WAL_FRAME_BYTES / (measured / group), (cpu.user + cpu.system) / measured, (wallMs * 1000) / measured]],
        keyColumns: 2,
        notes: ['WAL growth with checkpoints off = what the commits wrote; CPU = process user+system over the measured inserts (encoding, SQLite, WAL writes) / records.'],
      };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
});
