/**
 * Request bodies read as a splice of the session's previous body. A harness resends its whole conversation every
 * turn, and the bytes mostly repeat: Claude Code's 100 KB turn is the previous turn's bytes up to the last messages,
 * a few new messages, then the same `system` and `tools` (or nearly: its billing line in `system` changes). Decoding
 * and `JSON.parse` of the whole text is the largest single cost of a 100 KB call, so per session the previous body
 * is kept with a layout of its bytes (the top-level members' spans and the end of each `messages` element):
 * - the members before `messages` and the `messages` elements that lie wholly in the common byte prefix are the
 *   previous body's values;
 * - the members that lie wholly in the common byte suffix are the previous body's values;
 * - only the bytes in between (new and changed messages, and any member between them and the suffix) are decoded
 *   and parsed, as one synthetic JSON text that puts the parser in the same state the whole text would.
 * The result is what `JSON.parse` of the whole body gives (same values, same key order; an invalid text is never
 * accepted: anything the splice cannot vouch for falls back to the whole parse, which throws its own SyntaxError).
 * Values are shared with the previous call's body: callers must treat bodies as immutable (the dialect codecs
 * validate into new objects; the store serialises the received bytes).
 * Budget: the kept bodies and bytes count 4 bytes per body byte (the parsed values weigh ~3× the text) in a
 * byte-budgeted LRU; a session whose entry was evicted, or whose body changed before `messages`, is parsed whole.
 * Source: https://www.rfc-editor.org/rfc/rfc8259 (JSON grammar), https://tc39.es/ecma262/#sec-json.parse (duplicate
 * names: the last value wins at the first name's position).
 */
import { ByteLru } from '../core/byte-lru.ts';
import { asBuffer, commonBytePrefix, commonByteSuffix, isJsonSpace } from '../core/bytes.ts';

/** One top-level member of a body: its name and the offset of its key's opening quote. */
interface Member {
  name: string;
  keyStart: number;
}

/** A body's layout over its bytes. */
interface Layout {
  members: Member[];
  /** Index in `members` of `messages` (an array of objects/arrays), -1 when absent. */
  messages: number;
  /** Offset of the `messages` array's `[`. */
  open: number;
  /** End offset (exclusive) of each `messages` element. */
  ends: number[];
}

interface Kept {
  bytes: Buffer;
  body: Record<string, unknown>;
  /** Built on demand (the first splice needs it); null until then, undefined when the body cannot be spliced. */
  layout: Layout | null | undefined;
}

/** Bodies under this many bytes are parsed whole (a splice does not pay for itself). */
export const MIN_SPLICE_BYTES = 16 * 1024;
/** Default budget of the kept bodies, bytes (4 per body byte). */
export const DEFAULT_SPLICE_BUDGET_BYTES = 32 * 1024 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true });
const textEncoder = new TextEncoder();
// Names of the synthetic text's wrapper members; a body member of the same name makes the splice fall back.
const HEAD = '\u0000polar-splice-head';
const TAIL = '\u0000polar-splice-tail';
const HEAD_OPEN = textEncoder.encode(`{${JSON.stringify(HEAD)}:[`);
// After kept elements the region starts right after one (always `{…}` or `[…]`): the seed stands in for it, so it
// must be a container too, one that `.5` or `e1` cannot continue as a number would.
const HEAD_OPEN_SEEDED = textEncoder.encode(`{${JSON.stringify(HEAD)}:[[]`);
const TAIL_CLOSE = textEncoder.encode(`${JSON.stringify(TAIL)}:0}`);

/** Counters of a reader (tests and the bench read them). */
export interface SpliceStats {
  /** Bodies read as a splice of the session's previous one. */
  spliced: number;
  /** Bodies parsed whole (small, first of a session, evicted, changed before `messages`, or a fallback). */
  whole: number;
}

export class RequestJsonReader {
  private readonly sessions: ByteLru<Kept>;
  readonly stats: SpliceStats = { spliced: 0, whole: 0 };

  /** @param maxBytes budget over the kept bodies (4 bytes per body byte); 0 turns splicing off. */
  constructor(
    maxBytes = DEFAULT_SPLICE_BUDGET_BYTES,
    private readonly minBytes = MIN_SPLICE_BYTES,
  ) {
    this.sessions = new ByteLru<Kept>(maxBytes, (kept) => kept.bytes.byteLength * 4);
  }

  /**
   * The body of valid UTF-8 `bytes` (no byte-order mark) as `JSON.parse` would give it, spliced from the session's
   * previous body where the bytes repeat.
   * The reader keeps `bytes` (no copy) as the session's reference: the caller must not change them afterwards.
   * @throws SyntaxError as `JSON.parse` does for an invalid text; TypeError from the strict UTF-8 decoder for invalid
   *   UTF-8 (the caller decides how to decode those).
   */
  parse(bytes: Uint8Array, sessionId: string | null): unknown {
    const buffer = asBuffer(bytes);
    const previous = sessionId === null || buffer.byteLength < this.minBytes ? undefined : this.sessions.get(sessionId);
    if (previous !== undefined) {
      const body = this.splice(buffer, previous, sessionId!);
      if (body !== undefined) {
        this.stats.spliced++;
        return body;
      }
    }
    const body = JSON.parse(utf8.decode(buffer)) as unknown;
    this.stats.whole++;
    if (sessionId !== null && buffer.byteLength >= this.minBytes && isPlainObject(body)) this.sessions.set(sessionId, { bytes: buffer, body, layout: null });
    return body;
  }

  /** Forget one session's body (its calls are over). */
  forget(sessionId: string): void {
    this.sessions.delete(sessionId);
  }

  /** Bytes charged to the budget over all sessions. */
  get residentBytes(): number {
    return this.sessions.bytes;
  }

  /** The spliced body, or undefined when this body cannot be read as a splice of `old` (then it is parsed whole). */
  private splice(next: Buffer, old: Kept, sessionId: string): Record<string, unknown> | undefined {
    if (old.layout === null) old.layout = layoutOf(old.bytes);
    const layout = old.layout;
    if (layout === undefined || layout.messages < 0) return undefined;
    const n = next.byteLength;
    const m = old.bytes.byteLength;
    const p = commonBytePrefix(next, old.bytes, Math.min(n, m));
    // The change must start inside `messages` (after its `[`).
    if (p <= layout.open) return undefined;
    // Messages elements wholly in the prefix are kept; the splice starts right after the last of them.
    let k = 0;
    while (k < layout.ends.length && layout.ends[k]! <= p) k++;
    const from = k > 0 ? layout.ends[k - 1]! : layout.open + 1;
    // The suffix may reach back to `from` (an unchanged body is all prefix and all suffix at once).
    const s = commonByteSuffix(next, old.bytes, Math.min(n, m) - from);
    // Members after `messages` wholly in the suffix are kept; the splice ends at the first one's key.
    let j = layout.messages + 1;
    while (j < layout.members.length && layout.members[j]!.keyStart < m - s) j++;
    const shift = n - m;
    const to = j < layout.members.length ? layout.members[j]!.keyStart + shift : n;
    if (to < from) return undefined;

    const region = next.subarray(from, to);
    let parsed: Record<string, unknown>;
    let regionLayout: Scan;
    try {
      const head = k > 0 ? HEAD_OPEN_SEEDED : HEAD_OPEN;
      const tail = j < layout.members.length ? TAIL_CLOSE : null;
      const text = utf8.decode(tail === null ? Buffer.concat([head, region]) : Buffer.concat([head, region, tail]));
      const value = JSON.parse(text) as unknown;
      if (!isPlainObject(value)) return undefined;
      parsed = value;
      regionLayout = scan(next, from, to, true);
    } catch {
      return undefined;
    }
    if (regionLayout.messages !== 0) return undefined;
    // The region's scan starts inside `messages`, so its first member is `messages` itself.
    const regionMembers = regionLayout.members.slice(1);
    const names = regionMembers.map((member) => member.name);
    if (names.some((name) => name === HEAD || name === TAIL || name === '__proto__')) return undefined;
    const added = parsed[HEAD];
    if (!Array.isArray(added)) return undefined;
    const fresh = k > 0 ? added.slice(1) : added;
    if (fresh.length !== regionLayout.ends.length) return undefined;

    const oldBody = old.body;
    const oldMessages = oldBody.messages as unknown[];
    const body: Record<string, unknown> = {};
    for (let i = 0; i < layout.messages; i++) body[layout.members[i]!.name] = oldBody[layout.members[i]!.name];
    body.messages = k === 0 ? fresh : oldMessages.slice(0, k).concat(fresh);
    for (const name of names) body[name] = parsed[name];
    for (let i = j; i < layout.members.length; i++) body[layout.members[i]!.name] = oldBody[layout.members[i]!.name];

    // The next call splices against this body; its layout is the old one's kept parts, the region's, shifted suffix.
    const members: Member[] = layout.members.slice(0, layout.messages);
    members.push(layout.members[layout.messages]!, ...regionMembers);
    for (let i = j; i < layout.members.length; i++) members.push({ name: layout.members[i]!.name, keyStart: layout.members[i]!.keyStart + shift });
    const unique = new Set(members.map((member) => member.name)).size === members.length;
    const nextLayout: Layout | undefined =
      unique && regionLayout.spliceable
        ? { members, messages: layout.messages, open: layout.open, ends: layout.ends.slice(0, k).concat(regionLayout.ends) }
        : undefined;
    this.sessions.set(sessionId, { bytes: next, body, layout: nextLayout });
    return body;
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** Offset just past the closing quote of the string whose opening quote is at `at`, or -1. */
function stringEnd(b: Buffer, at: number, limit: number): number {
  let q = b.indexOf(QUOTE, at + 1);
  for (;;) {
    if (q < 0 || q >= limit) return -1;
    let slashes = 0;
    while (b[q - 1 - slashes] === BACKSLASH) slashes++;
    if (slashes % 2 === 0) return q + 1;
    q = b.indexOf(QUOTE, q + 1);
  }
}

const isDelimiter = (c: number) => c === 0x2c || c === 0x7d || c === 0x5d || isJsonSpace(c);

interface Scan {
  /** Top-level members the scan saw end, absolute offsets. */
  members: Member[];
  /** Index in `members` of the member `messages`, -1 when the scan did not see it end. */
  messages: number;
  /** Offset of `messages`' `[`, -1 when the scan did not see it. */
  open: number;
  /** End offsets of the `messages` elements the scan saw. */
  ends: number[];
  /** `messages` was an array whose elements are all objects or arrays (a primitive's extent depends on what follows). */
  spliceable: boolean;
}

/**
 * Key offsets of the top-level members and end offsets of the `messages` elements in bytes [from, to) of a VALID JSON object text: from its
 * start, or (`inMessages`) from between two elements of its `messages` array up to a member's key or the end. The
 * caller has already parsed the text, or the region in this position, so this only finds the spans.
 * @throws SyntaxError on an unterminated string (an invalid text).
 */
function scan(b: Buffer, from: number, to: number, inMessages: boolean): Scan {
  const out: Scan = { members: [], messages: -1, open: -1, ends: [], spliceable: true };
  let depth = inMessages ? 2 : 0; // 1: in the top-level object; 2: in a member's value
  let member: Member | null = inMessages ? { name: 'messages', keyStart: -1 } : null;
  // The current member's value ended. Only the first `messages` counts (a repeated one is a plain member here; the
  // callers refuse repeated names).
  const end = () => {
    if (member!.name === 'messages' && out.messages < 0) {
      out.messages = out.members.length;
      inMessages = false;
    }
    out.members.push(member!);
    member = null;
  };
  for (let i = from; i < to; i++) {
    const c = b[i]!;
    if (c === QUOTE) {
      const close = stringEnd(b, i, to);
      if (close < 0) throw new SyntaxError('unterminated string');
      if (depth === 1) {
        if (member === null) member = { name: JSON.parse(utf8.decode(b.subarray(i, close))) as string, keyStart: i };
        else {
          if (member.name === 'messages' && out.messages < 0) out.spliceable = false;
          end();
        }
      } else if (depth === 2 && inMessages) out.spliceable = false;
      i = close - 1;
    } else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth === 2 && member?.name === 'messages' && out.messages < 0) {
        if (c === 0x5b) {
          out.open = i;
          inMessages = true;
        } else out.spliceable = false;
      }
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
      if (depth === 2 && inMessages) out.ends.push(i + 1);
      else if (depth === 1 && member !== null) end();
      else if (depth === 0) break;
    } else if (!isJsonSpace(c) && c !== 0x2c && c !== 0x3a) {
      // A number or a literal: it ends at the next delimiter.
      let close = i + 1;
      while (close < to && !isDelimiter(b[close]!)) close++;
      if (depth === 1 && member !== null) {
        if (member.name === 'messages' && out.messages < 0) out.spliceable = false;
        end();
      } else if (depth === 2 && inMessages) out.spliceable = false;
      i = close - 1;
    }
  }
  return out;
}

/**
 * The layout of a whole VALID body text (a JSON object), or undefined when it cannot be spliced: no top-level object,
 * a repeated or `__proto__` member name, or a `messages` that is not an array of objects/arrays.
 */
function layoutOf(b: Buffer): Layout | undefined {
  let i = 0;
  while (i < b.byteLength && isJsonSpace(b[i]!)) i++;
  if (b[i] !== 0x7b) return undefined;
  const { members, messages, open, ends, spliceable } = scan(b, i, b.byteLength, false);
  const names = new Set(members.map((m) => m.name));
  if (!spliceable || names.size !== members.length || names.has('__proto__')) return undefined;
  return { members, messages, open, ends };
}
