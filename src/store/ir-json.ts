/**
 * The stored JSON text of a record's IR request, written so the next call of the session costs only what it adds.
 *
 * Every call of an agent session repeats the whole conversation, so `JSON.stringify` of the IR request (~100 KB at
 * real harness sizes) and its UTF-8 encoding were a large share of a proxied call, mostly as garbage for the
 * collector under load (bench/README.md#hot-path). The text is laid out as
 * `{"messages":[M0,M1,…],<other fields>,"tools":T}`: each message and the tool list are serialised on their own, and
 * the layout remembers where each message ends. When the next record of the session is delta-encoded against this
 * one, its leading messages that are equal (same keys in the same order, same values) to this one's are not
 * serialised again: the delta's shared prefix ends after the last equal message, and an equal tool list is the shared
 * suffix, both known by arithmetic. Only the new messages and the small other fields are serialised and encoded. The
 * result is an ordinary byte delta (delta.ts): reading is unchanged, and the parsed IR equals the one written.
 * Source: docs/architecture.md#data-model (records are delta-encoded against an earlier record of the session).
 */
import type { IRRequest } from '../core/ir.ts';
import { jsonEqual } from '../core/json-equal.ts';
import type { ByteDelta } from './delta.ts';

/** Where the parts of a written IR request text lie, and the values they were written from (kept by reference). */
export interface IrLayout {
  /** The messages written (the IR's own objects; never mutated here). */
  messages: readonly unknown[];
  /** `ends[i]`: byte offset just after message i's JSON in the text. */
  ends: readonly number[];
  /** The tool list written. */
  tools: unknown;
  /** Bytes of the text's tail `,"tools":T}` (or `}` when the IR has no tool list). */
  toolsTail: number;
  /** Total bytes of the text. */
  length: number;
}

const HEAD = '{"messages":[';
const encoder = new TextEncoder();

/**
 * The IR request's text as UTF-8, either in full (`bytes`) or, when `base` (the layout of the record this one is
 * delta-encoded against) shares at least its first message, as a byte delta against the base's text.
 * The IR's objects are kept by reference for the next record's comparison: they must not be mutated after the call.
 * A value that is not an IR request (no `messages` array) is stored as `JSON.stringify` gives it, without a layout.
 * @returns the delta or the full bytes, and this text's layout (for the session's next record; null without one).
 */
export function encodeIrRequest(ir: IRRequest, base: IrLayout | null): { delta: ByteDelta; layout: IrLayout | null } | { bytes: Uint8Array; layout: IrLayout | null } {
  if (typeof ir !== 'object' || ir === null || !Array.isArray(ir.messages)) return { bytes: encoder.encode(JSON.stringify(ir) ?? 'null'), layout: null };
  // A copy of the array (not of the messages): a caller that appends to its array after the insert changes nothing here.
  const messages = ir.messages.slice();
  let shared = 0;
  if (base !== null) {
    const limit = Math.min(messages.length, base.messages.length, base.ends.length);
    while (shared < limit && jsonEqual(messages[shared], base.messages[shared])) shared++;
  }
  const { tools, messages: _messages, ...rest } = ir;
  const restJson = JSON.stringify(rest);
  const restPart = restJson.length > 2 ? `,${restJson.slice(1, -1)}` : '';
  // One loop for both cases: without a shared message the text starts at HEAD, else right after the last shared one.
  const sameTools = shared > 0 && jsonEqual(tools, base!.tools);
  // An equal tool list (~60 KB at Claude Code sizes) is the base's suffix: it is not serialised again.
  const toolsPart = sameTools ? '' : tools === undefined ? '}' : `,"tools":${JSON.stringify(tools)}}`;
  const prefix = shared > 0 ? base!.ends[shared - 1]! : 0;
  const ends = shared > 0 ? base!.ends.slice(0, shared) : [];
  const parts: string[] = shared > 0 ? [] : [HEAD];
  let offset = shared > 0 ? prefix : HEAD.length;
  for (let i = shared; i < messages.length; i++) {
    const json = (i > 0 ? ',' : '') + JSON.stringify(messages[i]);
    parts.push(json);
    offset += utf8Length(json);
    ends.push(offset);
  }
  parts.push(']', restPart, toolsPart);
  const written = encoder.encode(parts.join(''));
  const suffix = sameTools ? base!.toolsTail : 0;
  const layout = { messages, ends, tools, toolsTail: sameTools ? suffix : utf8Length(toolsPart), length: prefix + written.byteLength + suffix };
  return shared > 0 ? { delta: { prefix, suffix, middle: written }, layout } : { bytes: written, layout };
}

/** UTF-8 length of a string in bytes, without encoding it. */
const utf8Length = (text: string) => Buffer.byteLength(text, 'utf8');
