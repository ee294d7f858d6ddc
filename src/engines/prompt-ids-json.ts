/**
 * Token mode's request body with the prompt ids written incrementally. Every call sends the whole prompt as a JSON
 * int array (vLLM / the simulator `prompt`, SGLang `input_ids`, llama.cpp `prompt`): at turn 200 of a Claude Code
 * session that is ~50,000 ids, ~300 KB, and `JSON.stringify` of it cost ~0.3 ms per call, growing with the
 * conversation. Within a session each prompt extends the previous one (prompt ++ sampled ids ++ the new turn), so the
 * array's text is the previous call's text, a comma, and the new ids' digits: only those are written, the rest is one
 * native copy. Whether the ids extend the previous ones is checked natively on their Int32Array twins
 * (core/int32-twin.ts: token mode's buffers pair every prompt with one); ids without a twin, or that do not extend
 * the session's last ones, are written in full (and remembered).
 * Memory: per session, the last body's bytes (the digits are a view of it) and the twin of its ids, least recently
 * used first out of a byte budget.
 * Source: RFC 8259 §6 (numbers), docs/protocol-notes.md#inference-engines (each engine's token endpoint).
 */
import { ByteLru } from '../core/byte-lru.ts';
import { concatBytes } from '../core/bytes.ts';
import { int32Buffer, int32Of } from '../core/int32-twin.ts';

interface Sent {
  /** The ids' text between the brackets ("1,2,3"), UTF-8: a view of the body that carried them. */
  digits: Uint8Array;
  /** The ids (their twin). */
  ids: Int32Array;
}

/** Resident bytes of a remembered body: the whole body the digits are a view of, the twin's buffer, an overhead. */
const entryBytes = (entry: Sent) => entry.digits.buffer.byteLength + entry.ids.buffer.byteLength + 64;

/** Default budget over all sessions (bytes): ~50 sessions at turn 200 of a Claude Code session (~300 KB body + 200 KB twin buffer). */
export const DEFAULT_PROMPT_JSON_BYTES = 24 * 1024 * 1024;

const utf8 = new TextEncoder();

/** The ids from `from` on as JSON array text without the brackets ("1,2,3"; an Int32Array's `join` writes exactly that). */
function digitsOf(ids: readonly number[] | Int32Array, from: number): string {
  if (ids instanceof Int32Array) return ids.subarray(from).join(',');
  return JSON.stringify(from === 0 ? ids : ids.slice(from)).slice(1, -1);
}

/** A token-mode request body as UTF-8 bytes, and where the ids' digits sit in it. */
export interface IdsBody {
  bytes: Uint8Array;
  /** The ids' text between the array's brackets: a view of `bytes` (compare an engine's echo against it). */
  digits: Uint8Array;
}

export class PromptIdsJson {
  private readonly sessions: ByteLru<Sent>;
  /** Bodies whose ids extended the session's previous ones (only the new ids written) / written in full. */
  readonly stats = { incremental: 0, full: 0 };

  /** @param maxBytes memory budget over all sessions, bytes (0: nothing kept, every array written in full). */
  constructor(maxBytes = DEFAULT_PROMPT_JSON_BYTES) {
    this.sessions = new ByteLru(maxBytes, entryBytes);
  }

  /**
   * `JSON.stringify({ [key]: ids, ...rest })` as UTF-8 bytes (the ids first; `rest` must not hold `key`).
   * @param sessionId the session whose previous body's ids these may extend (null: nothing reused or kept).
   * @param ids token ids (int32); reused only when held as an Int32Array or paired with a twin.
   */
  body(sessionId: string | null, key: string, ids: readonly number[] | Int32Array, rest: Record<string, unknown>): IdsBody {
    const twin = int32Of(ids);
    const previous = sessionId === null || twin === undefined ? undefined : this.sessions.get(sessionId);
    let digits: Uint8Array[];
    if (previous !== undefined && previous.ids.length <= twin!.length && previous.ids.length > 0
      && int32Buffer(previous.ids).equals(int32Buffer(twin!.subarray(0, previous.ids.length)))) {
      this.stats.incremental++;
      const added = previous.ids.length === ids.length ? '' : `,${digitsOf(ids, previous.ids.length)}`;
      digits = [previous.digits, utf8.encode(added)];
    } else {
      this.stats.full++;
      digits = [utf8.encode(digitsOf(ids, 0))];
    }
    const restJson = JSON.stringify(rest);
    const head = utf8.encode(`{${JSON.stringify(key)}:[`);
    const tail = utf8.encode(restJson === '{}' ? ']}' : `],${restJson.slice(1)}`);
    const bytes = concatBytes([head, ...digits, tail]);
    const length = digits.reduce((sum, part) => sum + part.byteLength, 0);
    const sent: IdsBody = { bytes, digits: bytes.subarray(head.byteLength, head.byteLength + length) };
    if (sessionId !== null && twin !== undefined) this.sessions.set(sessionId, { digits: sent.digits, ids: twin });
    return sent;
  }

  /** Forget one session's body (its calls are over). */
  forget(sessionId: string): void {
    this.sessions.delete(sessionId);
  }

  /** Resident bytes over all sessions. */
  get residentBytes(): number {
    return this.sessions.bytes;
  }
}
