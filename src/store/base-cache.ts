/**
 * In-memory cache of the last few committed records of each session, in the decoded form a delta needs (full token
 * sequence and JSON texts), so that choosing a base and encoding a delta never reads or re-packs the base. Bounded by
 * a byte budget over all sessions, least recently used session evicted first; a miss only costs the repository one
 * read of the session's newest record.
 */
import type { IrLayout } from './ir-json.ts';

/** A committed record, decoded. */
export interface BaseEntry {
  completion_id: string;
  /** Number of bases below this record (0 = stored in full); capped so a read follows a bounded chain. */
  depth: number;
  /**
   * prompt_ids ++ response_ids as consecutive segments (views shared with the entries they were built from: a new
   * entry is its base's segments cut at the shared prefix + its own suffix + its response, so nothing is copied).
   */
  segments: readonly Int32Array[];
  /** Total tokens in `segments` (= promptLength + response tokens). */
  length: number;
  /** Bytes this entry added (its own suffix and response; the shared segments belong to older entries). */
  ownBytes: number;
  /** Tokens of `tokens` that are prompt_ids. */
  promptLength: number;
  /**
   * request_body, ir_request and ir_response JSON texts as UTF-8 bytes (ir_response null when the record has none):
   * one byte per ASCII character and off the JS string heap, where a string with any character above U+00FF (a
   * harness request almost always has one) costs two bytes per character.
   */
  texts: readonly [Uint8Array, Uint8Array | null, Uint8Array | null];
  /**
   * Where the parts of the ir_request text lie when this process wrote the record (ir-json.ts), else null; an entry
   * with a layout keeps no ir_request bytes (`texts[1]` null): the next record's delta is taken from the layout.
   */
  ir: IrLayout | null;
}

/** Approximate resident size of an entry in bytes (its own token bytes, its text bytes, a fixed overhead). */
function entryBytes(entry: BaseEntry): number {
  // With a layout, the IR request's strings are held by the messages it keeps: about the text's size.
  return entry.ownBytes + entry.texts[0].byteLength + (entry.texts[1]?.byteLength ?? entry.ir?.length ?? 0) + (entry.texts[2]?.byteLength ?? 0) + 64;
}

export class BaseCache {
  /** Insertion order of the Map is the LRU order: the first key is the least recently used session. */
  private readonly sessions = new Map<string, BaseEntry[]>();
  private bytes = 0;

  /**
   * @param maxBytes memory budget over all sessions, bytes.
   * @param perSession entries kept per session (newest), ≥ 1; more than one lets interleaved sub-agents of a session
   *   each find their own previous call.
   */
  constructor(
    private readonly maxBytes: number,
    private readonly perSession: number,
  ) {}

  /** The session's cached entries, newest first (empty when none); marks the session recently used. */
  get(sessionId: string): BaseEntry[] {
    const entries = this.sessions.get(sessionId);
    if (entries === undefined) return [];
    this.sessions.delete(sessionId);
    this.sessions.set(sessionId, entries);
    return [...entries].reverse();
  }

  /** Whether the session has cached entries (no LRU update). */
  has(sessionId: string): boolean {
    return this.sessions.has(sessionId);
  }

  /** Add a committed record (the caller guarantees it is committed), dropping the session's oldest and then LRU sessions over budget. */
  add(sessionId: string, entry: BaseEntry): void {
    const size = entryBytes(entry);
    if (size > this.maxBytes) return;
    const entries = this.sessions.get(sessionId) ?? [];
    this.sessions.delete(sessionId);
    entries.push(entry);
    this.bytes += size;
    while (entries.length > this.perSession) this.bytes -= entryBytes(entries.shift()!);
    this.sessions.set(sessionId, entries);
    for (const [id, list] of this.sessions) {
      if (this.bytes <= this.maxBytes) break;
      if (id === sessionId) continue;
      for (const old of list) this.bytes -= entryBytes(old);
      this.sessions.delete(id);
    }
    while (this.bytes > this.maxBytes && entries.length > 1) this.bytes -= entryBytes(entries.shift()!);
  }

  /** Forget one session's entries (e.g. rows that rolled back). */
  delete(sessionId: string): void {
    const entries = this.sessions.get(sessionId);
    if (entries === undefined) return;
    for (const entry of entries) this.bytes -= entryBytes(entry);
    this.sessions.delete(sessionId);
  }

  /** Forget everything (e.g. after the database was changed behind the repository's back). */
  clear(): void {
    this.sessions.clear();
    this.bytes = 0;
  }

  /** Current resident estimate in bytes (tests, metrics). */
  get residentBytes(): number {
    return this.bytes;
  }
}
