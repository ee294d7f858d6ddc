/**
 * Completion records: one row per proxied model call. Token arrays are packed (packing.ts). Rows are written in
 * format 2 (migration 3): a record that extends an earlier record of its session (its "base") stores only the prompt
 * ids after the shared prefix and its JSON texts as deltas against the base's UTF-8 bytes (delta.ts), zstd-compressed; so a
 * session costs O(final size) on disk instead of O(turns²). Format 1 rows (full arrays, plain JSON text) still read.
 * A base is always a committed row of the same session, inserted before the rows that refer to it; it may belong to
 * an earlier dispatch attempt of the session (the base is only a compression reference, so that is harmless).
 */
import type { Database } from 'bun:sqlite';
import { attemptEach } from '../core/errors.ts';
import type { CompletionRecord } from '../core/records.ts';
import { BaseCache, type BaseEntry } from './base-cache.ts';
import { applyBytesDeltaToPieces, applyTextDelta, bytesDelta, commonSegmentPrefix, compactSegments, cutSegments, decodeColumn, encodeBytesColumn, joinPieces, type ByteDelta } from './delta.ts';
import { int32Of, int32ToArray, recordPromptIds } from '../core/int32-twin.ts';
import { encodeIrRequest } from './ir-json.ts';
import { int32View, packFloat32, packInt32, unpackFloat32 } from './packing.ts';

interface CompletionRow {
  completion_id: string;
  session_id: string;
  seq: number;
  dialect: string;
  /** Format 1: JSON text; format 2: BLOB from encodeTextColumn. */
  request_body: string | Uint8Array;
  ir_request: string | Uint8Array;
  ir_response: string | Uint8Array | null;
  finish_reason: string;
  /** Format 1: all prompt ids; format 2: the ids after `prompt_prefix`. */
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
  format: number;
  base_id: string | null;
  prompt_prefix: number;
  attempt: number;
}

/** Options of the completion repository (all optional; the defaults are what the proxy should use). */
export interface CompletionRepositoryOptions {
  /**
   * Row format written: 2 (default) prefix-delta prompt ids and delta, compressed JSON; 1 the migration-1 layout
   * (full arrays, plain JSON text), kept for benchmarks and compatibility tests. Both formats are always read.
   */
  format?: 1 | 2;
  /** zstd-compress the JSON texts in format 2 (default true; see bench/store.ts for the measured trade-off). */
  compress?: boolean;
  /** zstd level 1–22 (default 1: the fastest; JSON deltas gain little from higher levels). */
  zstdLevel?: number;
  /**
   * Memory budget of the per-session base cache, bytes (default 32 MiB: its texts are UTF-8 bytes, so this holds as
   * many 100 KB records as 64 MiB of UTF-16 strings did, ~100 sessions with their last record each; a session that
   * fell out costs one read of its newest row on its next call).
   */
  cacheBytes?: number;
  /** Records kept per session in the cache (default 3: interleaved sub-agents each find their own last call). */
  cachePerSession?: number;
}

/** A base must share at least this many prompt tokens; below it the ids are stored in full. */
export const MIN_SHARED_PROMPT_TOKENS = 64;
/** Longest chain of bases a record may sit on; the next record of the session is stored in full, so reads stay bounded. */
export const MAX_BASE_DEPTH = 100;
/** Default budget of the base cache (see CompletionRepositoryOptions.cacheBytes). */
export const DEFAULT_CACHE_BYTES = 32 * 1024 * 1024;
/** Sessions whose next `seq` is remembered (LRU; a forgotten one costs one indexed read). */
const MAX_SEQ_SESSIONS = 65_536;

/** One record for `CompletionRepository.insertMany`, with `insert`'s options. */
export interface CompletionInsert {
  rec: CompletionRecord;
  opts?: { requestBodyJson?: string; requestBodyUtf8?: Uint8Array };
}

const columns =
  'completion_id, session_id, seq, dialect, request_body, ir_request, ir_response, finish_reason, prompt_ids, response_ids, logprobs, policy_version, engine_id, logprob_semantics, mode, capture_error, warnings, engine_ms, total_ms, created_at, format, base_id, prompt_prefix, attempt';

const insertSql = `INSERT INTO completions (${columns}) VALUES (${columns.split(',').map(() => '?').join(', ')})`;

/** A record's decoded token sequence and texts: what a child row needs of its base. */
interface Resolved {
  tokens: Int32Array;
  promptLength: number;
  /** request_body, ir_request, ir_response JSON texts as UTF-8 bytes in consecutive pieces (joined when used). */
  texts: [Uint8Array[], Uint8Array[], Uint8Array[] | null];
  depth: number;
}

export class CompletionRepository {
  private readonly format: 1 | 2;
  private readonly compress: boolean;
  private readonly zstdLevel: number;
  private readonly cache: BaseCache;
  /**
   * Next `seq` per session, once read from the table and then kept up to date by `insert`: the proxy asks for it on
   * every call, and the indexed MAX read was ~4 % of a 100 KB call's CPU (a fresh read transaction on a WAL that just
   * grew). Valid because a session's records are written through one repository (its proxy); bounded LRU.
   */
  private readonly seqs = new Map<string, number>();
  /**
   * True while `insertMany` runs its transaction: its rows count as committed for the caches (a later row of the
   * batch may use an earlier one as its base, and the seq hint moves on), because a failed batch forgets every
   * session it touched before anything else reads the caches.
   */
  private batching = false;

  constructor(
    private readonly db: Database,
    options: CompletionRepositoryOptions = {},
  ) {
    this.format = options.format ?? 2;
    this.compress = options.compress ?? true;
    this.zstdLevel = options.zstdLevel ?? 1;
    this.cache = new BaseCache(options.cacheBytes ?? DEFAULT_CACHE_BYTES, Math.max(1, options.cachePerSession ?? 3));
  }

  /**
   * Store one record in its own transaction (a savepoint inside `store.transaction`); durable against a process kill
   * when this returns (WAL). `prompt_ids`/`response_ids` must be int32 integers; logprobs are stored as float32.
   * `opts.requestBodyJson`: the request body's JSON text as received, stored instead of `JSON.stringify(request_body)`
   * (the proxy has it already; re-serialising a 100 KB body was a large share of the per-call CPU).
   * `opts.requestBodyUtf8`: the request body's JSON text as received, as valid UTF-8 bytes (wins over
   * `requestBodyJson`; the caller guarantees they are JSON of `request_body`), kept without decoding or encoding.
   * The IR request is serialised message by message (ir-json.ts): messages equal to the cached base's leading ones
   * and an equal tool list are not serialised again. `rec.ir_request` is kept by reference as the next record's
   * reference, so it must not be mutated after the call.
   * Cost: O(prompt tokens shared with the base) number comparisons plus O(new tokens + new JSON) encoding; the base is
   * taken from an in-memory cache (one read of the session's newest row on a miss) and never copied or re-packed.
   * @throws TypeError for a non-int32 token id; SQLiteError when `completion_id` already exists.
   */
  insert(rec: CompletionRecord, opts?: { requestBodyJson?: string; requestBodyUtf8?: Uint8Array }): void {
    const given = opts?.requestBodyUtf8;
    const requestText = given !== undefined ? null : (opts?.requestBodyJson ?? JSON.stringify(rec.request_body ?? null));
    const responseText = rec.ir_response === null ? null : JSON.stringify(rec.ir_response);
    const responsePacked = packInt32(rec.response_ids);
    const logprobsPacked = packFloat32(rec.logprobs);
    // The prompt ids without building the record's array; held as an Int32Array (read from the engine's answer, or an
    // array's twin: core/int32-twin.ts) they are compared and packed natively.
    const promptIds = recordPromptIds(rec);
    const prompt = int32Of(promptIds) ?? promptIds;
    if (this.format === 1) {
      this.run(rec, [requestText ?? utf8Text(given!), JSON.stringify(rec.ir_request), responseText], packInt32(prompt), responsePacked, logprobsPacked, 1, null, 0);
      return;
    }

    const candidates = this.candidates(rec.session_id);
    let base: BaseEntry | null = null;
    let prefix = 0;
    for (const candidate of candidates) {
      const shared = commonSegmentPrefix(candidate.segments, prompt);
      if (shared > prefix) {
        base = candidate;
        prefix = shared;
      }
      // The newest record whose whole prompt this one extends is the call it continues; older ones cannot do better
      // in the common case, so stop comparing.
      if (shared > 0 && shared >= candidate.promptLength) break;
    }
    if (prefix < MIN_SHARED_PROMPT_TOKENS) {
      prefix = 0;
      base = candidates[0] ?? null; // still worth it for the JSON texts (e.g. an engine that captures no ids)
    }
    if (base !== null && base.depth >= MAX_BASE_DEPTH) {
      // A keyframe: this record starts a new chain, so no read ever follows more than MAX_BASE_DEPTH links.
      base = null;
      prefix = 0;
    }
    const requestBytes = given ?? utf8Bytes(requestText!);
    const responseBytes = responseText === null ? null : utf8Bytes(responseText);
    // The IR request: only what it adds to the base's messages is serialised (ir-json.ts); a base read back from
    // the table has no layout, so its text is compared as bytes like the others.
    const ir = encodeIrRequest(rec.ir_request, base?.ir ?? null);
    const deltas: [ByteDelta, ByteDelta, ByteDelta | null] = [
      bytesDelta(requestBytes, base?.texts[0] ?? null),
      'delta' in ir ? ir.delta : bytesDelta(ir.bytes, base?.texts[1] ?? null),
      responseBytes === null ? null : bytesDelta(responseBytes, base?.texts[2] ?? null),
    ];
    if (prefix === 0 && deltas.every((d) => d === null || (d.prefix === 0 && d.suffix === 0))) base = null;

    const suffixPacked = packInt32(prompt, prefix);
    const encoded = deltas.map((d) => (d === null ? null : encodeBytesColumn(d, this.compress, this.zstdLevel)));
    this.run(rec, encoded as [Uint8Array, Uint8Array, Uint8Array | null], suffixPacked, responsePacked, logprobsPacked, 2, base?.completion_id ?? null, prefix);

    // Inside an outer transaction the row may still roll back, so it must not become anyone's base.
    if (this.mayRollBack()) return;
    const suffix = new Int32Array(suffixPacked.buffer, suffixPacked.byteOffset, suffixPacked.byteLength / 4);
    const response = new Int32Array(responsePacked.buffer, responsePacked.byteOffset, responsePacked.byteLength / 4);
    const cut = base !== null && prefix > 0 ? cutSegments(base.segments, prefix) : [];
    if (suffix.length > 0) cut.push(suffix);
    if (response.length > 0) cut.push(response);
    const { segments, copiedBytes } = compactSegments(cut);
    this.cache.add(rec.session_id, {
      completion_id: rec.completion_id,
      depth: base === null ? 0 : base.depth + 1,
      segments,
      length: prompt.length + response.length,
      ownBytes: suffixPacked.byteLength + responsePacked.byteLength + copiedBytes,
      promptLength: prompt.length,
      // With a layout the next delta comes from it; a value that is not an IR request keeps its bytes as the base.
      texts: [requestBytes, ir.layout === null && 'bytes' in ir ? ir.bytes : null, responseBytes],
      ir: ir.layout,
    });
  }

  /**
   * Group commit: store several records in one IMMEDIATE transaction, so they share one WAL append and one commit
   * (at 64 calls in flight a commit per record was a third of a small call's CPU; see bench/README.md, session 8).
   * Each record is stored exactly as `insert` would store it, in the given order (a later record of a session may
   * use an earlier one of the same batch as its base). When anything in the batch fails (a non-int32 id, a
   * duplicate `completion_id`, SQLITE_BUSY past busy_timeout), the transaction rolls back and every record is
   * retried in its own transaction, so one bad record costs no other its place.
   * Inside an outer transaction the records are inserted one by one (each a savepoint), as `insert` does.
   * @returns one entry per item, in order: null when the record is committed, else the error that refused it.
   */
  insertMany(items: readonly CompletionInsert[]): (Error | null)[] {
    if (items.length > 1 && !this.db.inTransaction) {
      this.batching = true;
      try {
        this.db.transaction(() => {
          for (const item of items) this.insert(item.rec, item.opts);
        }).immediate();
        return items.map(() => null);
      } catch {
        // Rolled back: the caches may name rows that are not there.
        for (const item of items) this.forget(item.rec.session_id);
      } finally {
        this.batching = false;
      }
    }
    return attemptEach(items, (item) => this.insert(item.rec, item.opts));
  }

  /** The record, or null when unknown. @throws Error when a row of its base chain is missing or corrupt. */
  get(completionId: string): CompletionRecord | null {
    const row = this.selectById(completionId);
    if (row === null) return null;
    return toRecord(row, this.resolveChain(row));
  }

  /**
   * Every record of a session in `seq` order (insertion order among equal seq), or only those of one dispatch attempt
   * (`opts.attempt`, 0-based). One query; each row is decoded once, on top of its already decoded base (a base outside
   * the selection, e.g. a record of an earlier attempt, is read by id).
   * @throws Error when a base row is missing or corrupt.
   */
  listBySession(sessionId: string, opts: { attempt?: number } = {}): CompletionRecord[] {
    const rows = (
      opts.attempt === undefined
        ? this.db.query(`SELECT ${columns} FROM completions WHERE session_id = ? ORDER BY seq, rowid`).all(sessionId)
        : this.db.query(`SELECT ${columns} FROM completions WHERE session_id = ? AND attempt = ? ORDER BY seq, rowid`).all(sessionId, opts.attempt)
    ) as CompletionRow[];
    const byId = new Map(rows.map((row) => [row.completion_id, row]));
    const resolved = new Map<string, Resolved>();
    const resolve = (row: CompletionRow): Resolved => {
      // Walk down to the first decoded (or full) row, then decode upwards: no recursion, so chain depth is no limit.
      const pending: CompletionRow[] = [];
      const seen = new Set<string>();
      let current: CompletionRow | null = row;
      let below: Resolved | null = null;
      while (current !== null) {
        const known = resolved.get(current.completion_id);
        if (known !== undefined) {
          below = known;
          break;
        }
        if (seen.has(current.completion_id)) throw new Error(`completion ${row.completion_id} has a cycle in its base chain (corrupt store)`);
        seen.add(current.completion_id);
        pending.push(current);
        if (current.format !== 2 || current.base_id === null) break;
        const baseRow = byId.get(current.base_id);
        if (baseRow === undefined) {
          below = this.resolveChain(this.mustSelect(current.base_id, current.completion_id));
          break;
        }
        current = baseRow;
      }
      for (let i = pending.length - 1; i >= 0; i--) {
        const r = pending[i]!;
        below = decodeBody(r, r.format === 2 && r.base_id !== null ? below : null);
        resolved.set(r.completion_id, below);
      }
      return below!;
    };
    return rows.map((row) => toRecord(row, resolve(row)));
  }

  /** The `seq` for the next record of a session: 0 for a new session, else max(seq) + 1. */
  nextSeq(sessionId: string): number {
    const known = this.seqs.get(sessionId);
    if (known !== undefined) return known;
    const row = this.db.query('SELECT MAX(seq) AS m FROM completions WHERE session_id = ?').get(sessionId) as { m: number | null };
    const next = row.m === null ? 0 : row.m + 1;
    // Inside an outer transaction the answer may include uncommitted rows that roll back: not cacheable.
    if (!this.mayRollBack()) {
      if (this.seqs.size >= MAX_SEQ_SESSIONS) this.seqs.delete(this.seqs.keys().next().value!);
      this.seqs.set(sessionId, next);
    }
    return next;
  }

  /** Whether a row inserted now may still roll back (inside an outer transaction that is not our own batch). */
  private mayRollBack(): boolean {
    return this.db.inTransaction && !this.batching;
  }

  /** Drop everything cached about a session (its next-seq hint and its bases). */
  private forget(sessionId: string): void {
    this.seqs.delete(sessionId);
    this.cache.delete(sessionId);
  }

  /** Keep the next-seq hint of a session right after a row of it was inserted (dropped when it might roll back). */
  private noteSeq(sessionId: string, seq: number): void {
    const known = this.seqs.get(sessionId);
    if (known === undefined) return;
    this.seqs.delete(sessionId);
    if (!this.mayRollBack()) this.seqs.set(sessionId, Math.max(known, seq + 1));
  }

  /**
   * How many records each dispatch attempt of a session has, by attempt (0-based), ascending; empty for a session
   * without records.
   */
  attemptCounts(sessionId: string): { attempt: number; completions: number }[] {
    return this.db
      .query('SELECT attempt, COUNT(*) AS completions FROM completions WHERE session_id = ? GROUP BY attempt ORDER BY attempt')
      .all(sessionId) as { attempt: number; completions: number }[];
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

  private run(
    rec: CompletionRecord,
    texts: readonly [string | Uint8Array, string | Uint8Array, string | Uint8Array | null],
    prompt: Uint8Array,
    response: Uint8Array,
    logprobs: Uint8Array,
    format: 1 | 2,
    baseId: string | null,
    promptPrefix: number,
  ): void {
    // A single INSERT statement is atomic in SQLite; in autocommit mode it commits before run() returns.
    this.db
      .query(insertSql)
      .run(
        rec.completion_id,
        rec.session_id,
        rec.seq,
        rec.dialect,
        texts[0],
        texts[1],
        texts[2],
        JSON.stringify(rec.finish_reason),
        prompt,
        response,
        logprobs,
        rec.policy_version,
        rec.engine_id,
        rec.logprob_semantics,
        rec.mode,
        rec.capture_error,
        JSON.stringify(rec.warnings),
        rec.timings.engine_ms,
        rec.timings.total_ms,
        rec.created_at,
        format,
        baseId,
        promptPrefix,
        rec.attempt ?? 0,
      );
    this.noteSeq(rec.session_id, rec.seq);
  }

  /** Cached bases of a session, newest first; on a miss, the session's newest stored row (decoded once, then cached). */
  private candidates(sessionId: string): BaseEntry[] {
    if (this.cache.has(sessionId)) return this.cache.get(sessionId);
    // The newest rowid is sorted out of the session's index entries (covering), so only that one row is read.
    const newest = this.db
      .query(`SELECT ${columns} FROM completions WHERE rowid = (SELECT rowid FROM completions WHERE session_id = ? ORDER BY seq DESC, rowid DESC LIMIT 1)`)
      .get(sessionId) as CompletionRow | null;
    if (newest === null) return [];
    let resolved: Resolved;
    try {
      resolved = this.resolveChain(newest);
    } catch {
      return []; // an unreadable old row must not block new records: this one is stored in full instead
    }
    const entry: BaseEntry = {
      completion_id: newest.completion_id,
      depth: resolved.depth,
      segments: [resolved.tokens],
      length: resolved.tokens.length,
      ownBytes: resolved.tokens.byteLength,
      promptLength: resolved.promptLength,
      texts: [joinPieces(resolved.texts[0]), joinPieces(resolved.texts[1]), resolved.texts[2] === null ? null : joinPieces(resolved.texts[2])],
      ir: null,
    };
    // A row read inside an outer transaction may be one of its own uncommitted inserts: usable now, not cacheable.
    if (!this.mayRollBack()) this.cache.add(sessionId, entry);
    return [entry];
  }

  private selectById(completionId: string): CompletionRow | null {
    return this.db.query(`SELECT ${columns} FROM completions WHERE completion_id = ?`).get(completionId) as CompletionRow | null;
  }

  private mustSelect(baseId: string, childId: string): CompletionRow {
    const row = this.selectById(baseId);
    if (row === null) throw new Error(`completion ${childId} refers to base record ${baseId}, which is missing (corrupt store)`);
    return row;
  }

  /** Decode a row by reading its chain of bases (one indexed read per link). */
  private resolveChain(row: CompletionRow): Resolved {
    const chain = [row];
    const seen = new Set([row.completion_id]);
    for (let r = row; r.format === 2 && r.base_id !== null; ) {
      if (seen.has(r.base_id)) throw new Error(`completion ${row.completion_id} has a cycle in its base chain (corrupt store)`);
      seen.add(r.base_id);
      r = this.mustSelect(r.base_id, r.completion_id);
      chain.push(r);
    }
    let below: Resolved | null = null;
    for (let i = chain.length - 1; i >= 0; i--) below = decodeBody(chain[i]!, below);
    return below!;
  }
}

/** Decode a row's token sequence and texts on top of its decoded base (null for a row stored in full). */
function decodeBody(row: CompletionRow, base: Resolved | null): Resolved {
  const response = int32View(row.response_ids);
  if (row.format === 1) {
    const prompt = int32View(row.prompt_ids);
    const tokens = new Int32Array(prompt.length + response.length);
    tokens.set(prompt, 0);
    tokens.set(response, prompt.length);
    return { tokens, promptLength: prompt.length, texts: [[bytesOf(row.request_body)], [bytesOf(row.ir_request)], row.ir_response === null ? null : [bytesOf(row.ir_response)]], depth: 0 };
  }
  if (row.format !== 2) throw new Error(`completion ${row.completion_id} has unknown row format ${row.format} (written by a newer polar?)`);
  const prefix = row.prompt_prefix;
  if (prefix > 0 && (base === null || prefix > base.tokens.length)) {
    throw new Error(`completion ${row.completion_id} shares ${prefix} prompt tokens with a base of ${base?.tokens.length ?? 0} (corrupt store)`);
  }
  const suffix = int32View(row.prompt_ids);
  const tokens = new Int32Array(prefix + suffix.length + response.length);
  if (prefix > 0) tokens.set(base!.tokens.subarray(0, prefix), 0);
  tokens.set(suffix, prefix);
  tokens.set(response, prefix + suffix.length);
  const text = (value: string | Uint8Array, k: number): Uint8Array[] => {
    if (typeof value === 'string') return [utf8Encoder.encode(value)];
    const delta = decodeColumn(value);
    const baseText = base?.texts[k] ?? null;
    if (delta.unit === 'utf8') return applyBytesDeltaToPieces(delta, baseText ?? []);
    // A row written before deltas were taken on bytes: offsets in UTF-16 code units, applied on the decoded base.
    return [utf8Encoder.encode(applyTextDelta(delta, baseText === null ? null : utf8Decoder.decode(joinPieces(baseText))))];
  };
  return {
    tokens,
    promptLength: prefix + suffix.length,
    texts: [text(row.request_body, 0), text(row.ir_request, 1), row.ir_response === null ? null : text(row.ir_response, 2)],
    depth: base === null ? 0 : base.depth + 1,
  };
}

const utf8Encoder = new TextEncoder();
/** Fatal: a corrupt stored text fails here with a clear error instead of turning into U+FFFD. */
const utf8Decoder = new TextDecoder('utf-8', { fatal: true });

/** Largest scratch utf8Bytes keeps (bytes); longer texts are encoded with `encode`, so one huge body is not kept. */
const MAX_SCRATCH = 4 * 1024 * 1024;
let scratch: Uint8Array | null = null;

/**
 * A string's UTF-8 bytes in an exact-size array: `encodeInto` a reused scratch buffer (up to MAX_SCRATCH; a UTF-16
 * code unit takes at most 3 bytes), then one copy out: 2-3× faster than `encode` on 100-400 KB texts in Bun.
 */
function utf8Bytes(text: string): Uint8Array {
  const need = text.length * 3;
  if (need > MAX_SCRATCH) return utf8Encoder.encode(text);
  if (scratch === null || scratch.byteLength < need) scratch = new Uint8Array(Math.min(MAX_SCRATCH, Math.max(need, 1 << 20)));
  const { written } = utf8Encoder.encodeInto(text, scratch);
  return scratch.slice(0, written);
}

/** Valid UTF-8 bytes as a string (format 1 stores request bodies as text). */
function utf8Text(bytes: Uint8Array): string {
  return new TextDecoder().decode(bytes);
}

/** A format-1 text column as UTF-8 bytes (stored as TEXT, or as a BLOB by an old writer). */
function bytesOf(value: string | Uint8Array): Uint8Array {
  return typeof value === 'string' ? utf8Encoder.encode(value) : value;
}

/** JSON.parse of stored UTF-8 bytes (consecutive pieces). @throws Error on invalid UTF-8 or JSON (a corrupt row). */
function parseJsonBytes(pieces: readonly Uint8Array[]): unknown {
  return JSON.parse(utf8Decoder.decode(joinPieces(pieces)));
}

function toRecord(row: CompletionRow, body: Resolved): CompletionRecord {
  return {
    completion_id: row.completion_id,
    session_id: row.session_id,
    seq: row.seq,
    dialect: row.dialect as CompletionRecord['dialect'],
    request_body: parseJsonBytes(body.texts[0]) as CompletionRecord['request_body'],
    ir_request: parseJsonBytes(body.texts[1]) as CompletionRecord['ir_request'],
    ir_response: body.texts[2] === null ? null : (parseJsonBytes(body.texts[2]) as CompletionRecord['ir_response']),
    finish_reason: JSON.parse(row.finish_reason),
    prompt_ids: int32ToArray(body.tokens.subarray(0, body.promptLength)),
    response_ids: int32ToArray(body.tokens.subarray(body.promptLength)),
    logprobs: unpackFloat32(row.logprobs),
    policy_version: row.policy_version,
    engine_id: row.engine_id,
    logprob_semantics: row.logprob_semantics as CompletionRecord['logprob_semantics'],
    mode: row.mode as CompletionRecord['mode'],
    capture_error: row.capture_error,
    warnings: JSON.parse(row.warnings),
    timings: { engine_ms: row.engine_ms, total_ms: row.total_ms },
    created_at: row.created_at,
    attempt: row.attempt,
  };
}
