/** Completion records: one row per proxied model call, token arrays packed (packing.ts), the rest JSON. */
import type { Database } from 'bun:sqlite';
import type { CompletionRecord } from '../core/records.ts';
import { packFloat32, packInt32, unpackFloat32, unpackInt32 } from './packing.ts';

interface CompletionRow {
  completion_id: string;
  session_id: string;
  seq: number;
  dialect: string;
  request_body: string;
  ir_request: string;
  ir_response: string | null;
  finish_reason: string;
  prompt_ids: Uint8Array;
  response_ids: Uint8Array;
  logprobs: Uint8Array;
  policy_version: string | null;
  engine_id: string;
  logprob_semantics: string;
  mode: string;
  capture_error: string | null;
  warnings: string;
  engine_ms: number;
  total_ms: number;
  created_at: number;
}

const columns =
  'completion_id, session_id, seq, dialect, request_body, ir_request, ir_response, finish_reason, prompt_ids, response_ids, logprobs, policy_version, engine_id, logprob_semantics, mode, capture_error, warnings, engine_ms, total_ms, created_at';

const insertSql = `INSERT INTO completions (${columns}) VALUES (${columns.split(',').map(() => '?').join(', ')})`;

export class CompletionRepository {
  constructor(private readonly db: Database) {}

  /**
   * Store one record in its own transaction (a savepoint inside `store.transaction`); durable against a process kill
   * when this returns (WAL). `prompt_ids`/`response_ids` must be int32 integers; logprobs are stored as float32.
   * `opts.requestBodyJson`: the request body's JSON text as received, stored instead of `JSON.stringify(request_body)`
   * (the proxy has it already; re-serialising a 100 KB body was a large share of the per-call CPU).
   * @throws TypeError for a non-int32 token id; SQLiteError when `completion_id` already exists.
   */
  insert(rec: CompletionRecord, opts?: { requestBodyJson?: string }): void {
    const values = [
      rec.completion_id,
      rec.session_id,
      rec.seq,
      rec.dialect,
      opts?.requestBodyJson ?? JSON.stringify(rec.request_body ?? null),
      JSON.stringify(rec.ir_request),
      rec.ir_response === null ? null : JSON.stringify(rec.ir_response),
      JSON.stringify(rec.finish_reason),
      packInt32(rec.prompt_ids),
      packInt32(rec.response_ids),
      packFloat32(rec.logprobs),
      rec.policy_version,
      rec.engine_id,
      rec.logprob_semantics,
      rec.mode,
      rec.capture_error,
      JSON.stringify(rec.warnings),
      rec.timings.engine_ms,
      rec.timings.total_ms,
      rec.created_at,
    ] as const;
    // A single INSERT statement is atomic in SQLite; in autocommit mode it commits before run() returns.
    this.db.query(insertSql).run(...values);
  }

  /** The record, or null when unknown. */
  get(completionId: string): CompletionRecord | null {
    const row = this.db.query(`SELECT ${columns} FROM completions WHERE completion_id = ?`).get(completionId) as CompletionRow | null;
    return row === null ? null : decodeRow(row);
  }

  /** Every record of a session in `seq` order (insertion order among equal seq). */
  listBySession(sessionId: string): CompletionRecord[] {
    const rows = this.db.query(`SELECT ${columns} FROM completions WHERE session_id = ? ORDER BY seq, rowid`).all(sessionId) as CompletionRow[];
    return rows.map(decodeRow);
  }

  /** The `seq` for the next record of a session: 0 for a new session, else max(seq) + 1. */
  nextSeq(sessionId: string): number {
    const row = this.db.query('SELECT MAX(seq) AS m FROM completions WHERE session_id = ?').get(sessionId) as { m: number | null };
    return row.m === null ? 0 : row.m + 1;
  }

  /** Ids of sessions that have records, in order of their first record. */
  listSessionIds(): string[] {
    const rows = this.db.query('SELECT session_id FROM completions GROUP BY session_id ORDER BY MIN(rowid)').all() as { session_id: string }[];
    return rows.map((row) => row.session_id);
  }

  /** Number of stored records. */
  count(): number {
    return (this.db.query('SELECT COUNT(*) AS n FROM completions').get() as { n: number }).n;
  }
}

function decodeRow(row: CompletionRow): CompletionRecord {
  return {
    completion_id: row.completion_id,
    session_id: row.session_id,
    seq: row.seq,
    dialect: row.dialect as CompletionRecord['dialect'],
    request_body: JSON.parse(row.request_body),
    ir_request: JSON.parse(row.ir_request),
    ir_response: row.ir_response === null ? null : JSON.parse(row.ir_response),
    finish_reason: JSON.parse(row.finish_reason),
    prompt_ids: unpackInt32(row.prompt_ids),
    response_ids: unpackInt32(row.response_ids),
    logprobs: unpackFloat32(row.logprobs),
    policy_version: row.policy_version,
    engine_id: row.engine_id,
    logprob_semantics: row.logprob_semantics as CompletionRecord['logprob_semantics'],
    mode: row.mode as CompletionRecord['mode'],
    capture_error: row.capture_error,
    warnings: JSON.parse(row.warnings),
    timings: { engine_ms: row.engine_ms, total_ms: row.total_ms },
    created_at: row.created_at,
  };
}
