/**
 * The UTF-8 JSON text of a chat-mode engine request, serialised so that a session's next call costs only what it adds.
 *
 * Every call of an agent session sends the whole conversation again: at Claude Code sizes the OpenAI Chat body for
 * the engine is ~110 KB, and `JSON.stringify` of it plus its UTF-8 encoding was one of the largest costs (and the
 * largest string garbage) of a proxied call (bench/README.md#hot-path). This memo remembers, per session, the last
 * body's text, its `messages` elements with where each one's serialisation ends in the text, and its `tools` value
 * with its bytes. The next body's leading messages that are equal to the remembered ones (`jsonEqual`: same keys in
 * the same order, same values; a long string is one native compare) are one slice of that text, and an equal tool
 * list reuses its bytes; only the rest is serialised. (Copying each message's bytes on its own cost ~0.1 µs per
 * message: 60 µs at turn 200 of a Claude Code session, bench/README.md#session-8.)
 *
 * The result is byte for byte `new TextEncoder().encode(JSON.stringify(body))` (test/engines/body-memo.test.ts), so the
 * engine sees exactly what it saw before. The returned bytes are kept as the session's text: callers must not change
 * them (fetch only reads a body). Memory: the remembered bytes (off the JS heap) and references to the
 * remembered message objects, whose strings the store's base cache holds too; bounded by a byte budget over all
 * sessions, least recently used first out. A session that fell out costs one full serialisation.
 * Source: https://tc39.es/ecma262/#sec-json.stringify (property order, omitted undefined values).
 */
import { ByteLru } from '../core/byte-lru.ts';
import { concatBytes } from '../core/bytes.ts';
import { jsonEqual } from '../core/json-equal.ts';

/** What is remembered of a session's last body. */
interface Remembered {
  messages: readonly unknown[];
  /** The body's UTF-8 JSON text, as sent. */
  text: Uint8Array;
  /** Offset in `text` of the first message's serialisation (just after `"messages":[`). */
  first: number;
  /** Offset in `text` just after each message's serialisation (before its comma or the closing bracket). */
  ends: Int32Array;
  tools: unknown;
  /** UTF-8 of `JSON.stringify(tools)`, or null when the body had no tools. */
  toolsBytes: Uint8Array | null;
  bytes: number;
}

const encoder = new TextEncoder();
const COMMA = new Uint8Array([0x2c]);
const CLOSE_BRACKET = new Uint8Array([0x5d]);
const CLOSE_BRACE = new Uint8Array([0x7d]);

/**
 * Default budget of remembered bytes over all sessions: ~70 sessions with a 100 KB body each. The message objects
 * kept with them are not counted, so the real cost is ~2–3× this; bigger budgets raised RSS in `proxy-soak` (sessions
 * that ended but were never told to `forget` wait for eviction) for no gain in CPU (bench/README.md#hot-path).
 */
export const DEFAULT_BODY_MEMO_BYTES = 8 * 1024 * 1024;
/**
 * Bodies below this size (bytes) are serialised with one `JSON.stringify` and not remembered: for them the pieces
 * cost more than they save (measured on small calls, bench/README.md#hot-path).
 */
export const MIN_MEMO_BODY_BYTES = 16 * 1024;

export class ChatBodyMemo {
  private readonly sessions: ByteLru<Remembered>;
  /**
   * Messages whose bytes were reused / serialised on their own, and bodies serialised whole (small, or a session's
   * first call), over the memo's life (tests and benches).
   */
  readonly stats = { reused: 0, serialised: 0, whole: 0 };

  /**
   * @param maxBytes budget of remembered bytes over all sessions (the objects' own size is not counted; 0 = none kept).
   * @param minBytes a session's body is remembered from this size on (default MIN_MEMO_BODY_BYTES).
   */
  constructor(
    private readonly maxBytes = DEFAULT_BODY_MEMO_BYTES,
    private readonly minBytes = MIN_MEMO_BODY_BYTES,
  ) {
    this.sessions = new ByteLru(maxBytes, (entry) => entry.bytes);
  }

  /**
   * `body` as UTF-8 JSON text, equal to `TextEncoder.encode(JSON.stringify(body))`. A body whose `messages` is not an
   * array is serialised whole and not remembered. The body's message objects and tool list are kept by reference for
   * the session's next call: they must not be mutated afterwards.
   * @param sessionId the session whose previous body may share leading messages (null: no reuse, nothing kept).
   * @throws TypeError as JSON.stringify does (a cycle, a BigInt).
   */
  encode(sessionId: string | null, body: Record<string, unknown>): Uint8Array {
    const messages = body.messages;
    if (!Array.isArray(messages) || typeof (body as { toJSON?: unknown }).toJSON === 'function') return encoder.encode(JSON.stringify(body));
    const previous = sessionId === null ? undefined : this.sessions.get(sessionId);
    // Nothing to reuse: one JSON.stringify. A body big enough to be worth remembering is then cut into pieces too
    // (a second serialisation, once per session: later calls reuse them).
    let whole: Uint8Array | null = null;
    if (previous === undefined) {
      whole = encoder.encode(JSON.stringify(body));
      this.stats.whole++;
      if (sessionId === null || whole.byteLength < this.minBytes || whole.byteLength > this.maxBytes) return whole;
    }
    let shared = 0;
    if (previous !== undefined) {
      const limit = Math.min(messages.length, previous.messages.length);
      while (shared < limit && jsonEqual(messages[shared], previous.messages[shared])) shared++;
    }
    // Only the messages after the shared ones are serialised; the shared ones are one slice of the previous text.
    const pieces: Uint8Array[] = new Array(messages.length - shared);
    for (let i = shared; i < messages.length; i++) pieces[i - shared] = encoder.encode(JSON.stringify(messages[i]) ?? 'null');
    this.stats.reused += shared;
    this.stats.serialised += messages.length - shared;
    const tools = body.tools;
    let toolsBytes: Uint8Array | null = null;
    if (tools !== undefined) {
      toolsBytes = previous !== undefined && previous.toolsBytes !== null && jsonEqual(tools, previous.tools) ? previous.toolsBytes : encoder.encode(JSON.stringify(tools) ?? 'null');
    }

    const joined = this.join(body, shared > 0 ? previous! : null, shared, pieces, toolsBytes);
    const out = whole ?? joined.text;
    if (sessionId !== null) {
      // A body that shrank below the threshold is not remembered (nor is the older, larger one kept).
      if (out.byteLength < this.minBytes) this.forget(sessionId);
      else this.sessions.set(sessionId, { messages: messages.slice(), text: joined.text, first: joined.first, ends: joined.ends, tools, toolsBytes, bytes: joined.text.byteLength + (toolsBytes?.byteLength ?? 0) });
    }
    return out;
  }

  /**
   * The text: every key in order; `messages` from the previous text's first `shared` messages (one slice) and the
   * new pieces, `tools` from its bytes, the rest (small) serialised as is; with where each message ends in it.
   */
  private join(body: Record<string, unknown>, previous: Remembered | null, shared: number, pieces: readonly Uint8Array[], toolsBytes: Uint8Array | null): { text: Uint8Array; first: number; ends: Int32Array } {
    const parts: Uint8Array[] = [];
    let length = 0;
    const push = (part: Uint8Array) => {
      parts.push(part);
      length += part.byteLength;
    };
    let first = 0;
    let ends = new Int32Array(0);
    let opened = false;
    for (const key of Object.keys(body)) {
      const value = body[key];
      if (key === 'messages') {
        push(encoder.encode(`${opened ? ',' : '{'}"messages":[`));
        first = length;
        ends = new Int32Array(shared + pieces.length);
        if (previous !== null && shared > 0) {
          const shift = first - previous.first;
          for (let i = 0; i < shared; i++) ends[i] = previous.ends[i]! + shift;
          push(previous.text.subarray(previous.first, previous.ends[shared - 1]));
        }
        for (let j = 0; j < pieces.length; j++) {
          if (shared + j > 0) push(COMMA);
          push(pieces[j]!);
          ends[shared + j] = length;
        }
        push(CLOSE_BRACKET);
      } else if (key === 'tools' && toolsBytes !== null) {
        push(encoder.encode(`${opened ? ',' : '{'}"tools":`));
        push(toolsBytes);
      } else {
        const json = JSON.stringify(value);
        if (json === undefined) continue; // undefined, functions, symbols: JSON.stringify leaves the key out
        push(encoder.encode(`${opened ? ',' : '{'}${JSON.stringify(key)}:${json}`));
      }
      opened = true;
    }
    push(CLOSE_BRACE);
    return { text: concatBytes(parts), first, ends };
  }

  /** Forget one session (its calls are over). */
  forget(sessionId: string): void {
    this.sessions.delete(sessionId);
  }

  /** Remembered bytes over all sessions. */
  get residentBytes(): number {
    return this.sessions.bytes;
  }
}
