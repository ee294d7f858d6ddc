/**
 * A session's history, validated and decoded once. Every call of an agent session sends the whole conversation again,
 * and the request reader (proxy/request-json.ts) hands back the very objects of the session's previous body for every
 * message and member that did not change. A dialect decoder keeps, per such raw element (one `messages[i]`, one
 * `tools[i]`), what it made of it: the IR value, the warnings it raised, and the tool names it set and read. When the
 * same object comes back at the same index and the names it read still resolve alike, the decoder takes the kept IR
 * value (the same object, so the engine body memo and the store's IR delta compare it by reference) instead of
 * validating and decoding it again. A new or changed element is decoded as before, so a turn costs what it adds, not
 * what the conversation holds (bench/README.md#session-7).
 *
 * Sound because raw bodies are never mutated (their objects are shared between calls already), and validity and the
 * decoded value of an element depend only on the element, its index (warnings and errors name it) and the tool names
 * it looks up, which are checked. The IR values it hands out are shared between calls, so nothing downstream may
 * change them (the proxy's lone-surrogate repair makes copies). Entries live as long as their raw objects (a
 * WeakMap): nothing to evict.
 * Source: https://tc39.es/ecma262/#sec-weakmap-objects
 */
import { z } from 'zod';
import { GatewayError } from '../../core/errors.ts';
import type { IRTool, Warning } from '../../core/ir.ts';
import { parseWire } from './validate.ts';
import { ElementRuns, type ElementRun } from '../../core/element-runs.ts';

/** What a message decoder uses of the tool names (tool call id → tool name) that earlier messages set. */
export interface ToolNames {
  get(id: string): string | undefined;
  set(id: string, name: string): void;
}

interface Entry<T> {
  index: number;
  value: T;
  warnings: readonly Warning[];
  /** Names this element set, in order (an assistant turn's tool calls). */
  set: readonly (readonly [string, string])[];
  /** Names this element read and what it found (a tool result). */
  read: readonly (readonly [string, string | undefined])[];
}

/**
 * The last call that decoded an array whose first element is a given object: that array, what each element became,
 * and, cumulated over the elements, the warnings they raised and the tool names they set. The next call of the session
 * takes all of it for the leading elements it shares, with one identity compare per element and a few slices, where
 * the per-element memo costs a WeakMap lookup or two each (at turn 200 of a Claude Code session, 400 messages: the
 * lookups were the most of a 250 µs decode, bench/README.md#session-8).
 */
interface Run extends ElementRun<unknown> {
  /** The raw elements, in order. */
  inputs: readonly unknown[];
  /** The items the elements became, in order (an element may become none, one or several). */
  out: readonly unknown[];
  /** Items of elements [0, i], for each i. */
  outEnds: Int32Array;
  warnings: readonly Warning[];
  /** Warnings raised by elements [0, i], for each i. */
  warningEnds: Int32Array;
  sets: readonly (readonly [string, string])[];
  /** Names set by elements [0, i], for each i. */
  setEnds: Int32Array;
}

/** What one decoder made of each raw element it decoded, by object (`T`: the IR value of one element). */
export class DecodeMemo<T> {
  private readonly entries = new WeakMap<object, Entry<T>>();
  /** The last run over an array, by its first element (core/element-runs.ts). */
  private readonly runs = new ElementRuns<unknown, Run>();

  /** How many leading elements of `raws` the last run decoded at the same index (their validation can be skipped). */
  sharedPrefix(raws: readonly unknown[]): number {
    return this.runs.shared(raws).shared;
  }

  /**
   * Every element of `raws` decoded in order, as the items `items(value)` gives for each (e.g. the IR messages one raw
   * message becomes), concatenated. The leading elements the last run over this array shared (the same objects at
   * the same indices: validity, value, warnings and the names they set depend only on the elements before and
   * themselves) are taken from it with a few slices and no per-element lookup. Each other element is first given to
   * `check` (rules that read its neighbours, so a kept element is checked again), then taken from its own entry
   * (`reuse`) or decoded by `decode` and kept (`decode`). Warnings are appended to `warnings` in element order and
   * names are set in `names` as decoding each element would. The run is kept for the next call: `raws` must not be
   * mutated afterwards (request bodies are not).
   */
  decodeAll<I>(
    raws: readonly unknown[],
    names: Map<string, string>,
    warnings: Warning[],
    decode: (raw: unknown, index: number, names: ToolNames, warnings: Warning[]) => T,
    items: (value: T) => readonly I[],
    check?: (raw: unknown, index: number) => void,
  ): I[] {
    const found = this.runs.shared(raws);
    const shared = found.shared;
    let out: I[] = [];
    let ownWarnings: Warning[] = [];
    let sets: (readonly [string, string])[] = [];
    const outEnds = new Int32Array(raws.length);
    const warningEnds = new Int32Array(raws.length);
    const setEnds = new Int32Array(raws.length);
    if (found.run !== undefined && shared > 0) {
      const { run } = found;
      out = run.out.slice(0, run.outEnds[shared - 1]) as I[];
      ownWarnings = run.warnings.slice(0, run.warningEnds[shared - 1]);
      sets = run.sets.slice(0, run.setEnds[shared - 1]);
      for (const [id, name] of sets) names.set(id, name);
      outEnds.set(run.outEnds.subarray(0, shared));
      warningEnds.set(run.warningEnds.subarray(0, shared));
      setEnds.set(run.setEnds.subarray(0, shared));
    }
    for (let i = shared; i < raws.length; i++) {
      const raw = raws[i];
      check?.(raw, i);
      const kept = this.reuse(raw, i, names, ownWarnings); // undefined: not kept (a kept value may be null)
      const value = kept !== undefined ? kept : this.decode(raw, i, names, ownWarnings, (toolNames, own) => decode(raw, i, toolNames, own));
      for (const item of items(value)) out.push(item);
      const entry = typeof raw === 'object' && raw !== null ? this.entries.get(raw) : undefined;
      if (entry !== undefined) for (const set of entry.set) sets.push(set);
      outEnds[i] = out.length;
      warningEnds[i] = ownWarnings.length;
      setEnds[i] = sets.length;
    }
    for (const warning of ownWarnings) warnings.push(warning);
    this.runs.keep({ inputs: raws, out: out.slice(), outEnds, warnings: ownWarnings, warningEnds, sets, setEnds });
    return out;
  }

  /** Whether `raw` at `index` was decoded before (its validation can be skipped; `reuse` may still refuse it). */
  has(raw: unknown, index: number): boolean {
    return typeof raw === 'object' && raw !== null && this.entries.get(raw)?.index === index;
  }

  /**
   * The kept value of `raw` at `index`, with its warnings appended to `warnings` and its names set in `names`; or
   * undefined (nothing changed) when it was not decoded there or a name it read now resolves differently.
   */
  private reuse(raw: unknown, index: number, names: Map<string, string>, warnings: Warning[]): T | undefined {
    if (typeof raw !== 'object' || raw === null) return undefined;
    const entry = this.entries.get(raw);
    if (entry === undefined || entry.index !== index) return undefined;
    for (const [id, name] of entry.read) if (names.get(id) !== name) return undefined;
    for (const [id, name] of entry.set) names.set(id, name);
    for (const warning of entry.warnings) warnings.push(warning);
    return entry.value;
  }

  /**
   * `decode(names, warnings)` for `raw` at `index`, recording the names it sets and reads and the warnings it raises
   * (appended to `warnings` too), kept for the next call. A throw keeps nothing.
   */
  private decode(raw: unknown, index: number, names: Map<string, string>, warnings: Warning[], decode: (names: ToolNames, warnings: Warning[]) => T): T {
    const own: Warning[] = [];
    const set: [string, string][] = [];
    const read: [string, string | undefined][] = [];
    const value = decode(
      {
        get: (id) => {
          const name = names.get(id);
          read.push([id, name]);
          return name;
        },
        set: (id, name) => {
          set.push([id, name]);
          names.set(id, name);
        },
      },
      own,
    );
    for (const warning of own) warnings.push(warning);
    if (typeof raw === 'object' && raw !== null) this.entries.set(raw, { index, value, warnings: own, set, read });
    return value;
  }
}

/**
 * An array of anything, checked without walking it: the shallow schemas' `messages` and `tools` (`z.array(z.unknown())`
 * copied the array element by element on every call; the elements are checked one by one afterwards).
 */
export const unknownArray = z.custom<unknown[]>((value) => Array.isArray(value));

/**
 * Each element of `raw` that `memo` has not decoded at its index, validated with `schema` (undefined for the others),
 * or null when one fails.
 */
function validateNew<S extends z.ZodType>(schema: S, raw: readonly unknown[], memo: DecodeMemo<unknown>): (z.output<S> | undefined)[] | null {
  const out: (z.output<S> | undefined)[] = new Array(raw.length);
  for (let i = memo.sharedPrefix(raw); i < raw.length; i++) {
    if (memo.has(raw[i], i)) continue;
    const result = schema.safeParse(raw[i]);
    if (!result.success) return null;
    out[i] = result.data;
  }
  return out;
}

/** The part of a request's top level the memoised decoders split: `messages` and `tools`, still unvalidated. */
interface ShallowRequest {
  messages: unknown[];
  tools?: unknown[] | null;
}

/**
 * A request body checked for a memoised decoder: its top level by `schemas.shallow` (messages and tools as unknown
 * arrays), then each message and tool its memo has not decoded at that index, all before anything is decoded. On any
 * failure the whole-body schema runs, so a body with several problems fails with the error it names.
 * @returns the top level, and each new message's and tool's validated value (undefined for the kept ones).
 * @throws GatewayError('invalid-request') from the whole-body schema (parseWire).
 */
export function validateRequest<S extends z.ZodType<ShallowRequest>, M extends z.ZodType, T extends z.ZodType>(
  body: unknown,
  schemas: { shallow: S; whole: z.ZodType; message: M; tool: T },
  memos: { messages: DecodeMemo<unknown>; tools: DecodeMemo<unknown> },
): { top: z.output<S>; messagesIn: (z.output<M> | undefined)[]; toolsIn: (z.output<T> | undefined)[] } {
  const top = schemas.shallow.safeParse(body);
  const messagesIn = top.success ? validateNew(schemas.message, top.data.messages, memos.messages) : null;
  const toolsIn = top.success && messagesIn !== null ? validateNew(schemas.tool, top.data.tools ?? [], memos.tools) : null;
  if (!top.success || messagesIn === null || toolsIn === null) {
    parseWire(schemas.whole, body);
    throw new GatewayError('internal', 'the request passed the whole-body schema but not its per-element checks');
  }
  return { top: top.data, messagesIn, toolsIn };
}

/**
 * The request's tools as IR tools, through `memo.decodeAll`: kept ones as they were, the others by `decode` (its
 * validated value, from `validated` or validated here with `schema`; null: dropped with a warning it adds).
 */
export function decodeTools<T extends z.ZodType>(
  raw: readonly unknown[],
  validated: readonly (z.output<T> | undefined)[],
  schema: T,
  memo: DecodeMemo<IRTool | null>,
  warnings: Warning[],
  decode: (tool: z.output<T>, index: number, warnings: Warning[]) => IRTool | null,
): IRTool[] {
  // Tools set and read no tool names.
  return memo.decodeAll(
    raw,
    new Map(),
    warnings,
    (item, i, _names, own) => decode(validated[i] ?? parseWire(schema, item, `tools[${i}]`), i, own),
    (tool) => (tool === null ? [] : [tool]),
  );
}
