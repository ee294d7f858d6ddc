/**
 * The decoders' per-element memo (src/dialects/shared/decode-memo.ts): when a body shares message and tool objects
 * with an earlier one (the request reader hands them back for every message a session's previous body had), Anthropic
 * Messages and OpenAI Chat decode it exactly as they decode a fresh copy: the same IR (key order included), the same
 * warnings in the same order, the same errors. Shared elements come back as the very IR objects of the earlier call,
 * and a tool result follows the tool name its assistant turn gives now, not the one it gave when it was kept.
 */
import { describe, expect, test } from 'bun:test';
import type { CodecContext } from '../../src/core/dialect.ts';
import { GatewayError } from '../../src/core/errors.ts';
import type { IRMessage, IRRequest, IRTool, Warning } from '../../src/core/ir.ts';
import { anthropicMessages } from '../../src/dialects/anthropic-messages/index.ts';
import { openaiChat } from '../../src/dialects/openai-chat/index.ts';
import { wellFormed } from '../../src/proxy/context.ts';
import { DecodeMemo, type ToolNames } from '../../src/dialects/shared/decode-memo.ts';
import { codecContext } from '../support/dialects.ts';

const ctx: CodecContext = codecContext({});
type Body = Record<string, unknown> & { messages: unknown[]; tools?: unknown[] };
type Decode = (body: unknown, ctx: CodecContext) => IRRequest;

/** Decode `body` (sharing objects with earlier bodies) and a fresh copy; both must agree, or both throw alike. */
function same(decode: Decode, body: unknown): IRRequest | undefined {
  const run = (value: unknown) => {
    try {
      const ir = decode(value, ctx);
      wellFormed(ir);
      return { ir: JSON.parse(JSON.stringify(ir)) as IRRequest, keys: JSON.stringify(ir), live: ir };
    } catch (error) {
      expect(error).toBeInstanceOf(GatewayError);
      const e = error as GatewayError;
      return { error: { kind: e.kind, message: e.message, param: (e.details as { param?: string } | undefined)?.param } };
    }
  };
  const fresh = run(structuredClone(body));
  const shared = run(body);
  expect(shared).toEqual({ ...fresh, ...('live' in shared ? { live: shared.live } : {}) } as never);
  if ('keys' in shared && 'keys' in fresh) expect(shared.keys).toBe(fresh.keys);
  return 'live' in shared ? shared.live : undefined;
}

const anthropicTools = Array.from({ length: 6 }, (_, i) => ({ name: `tool_${i}`, description: `Tool number ${i}.`, input_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } }));
const chatTools = anthropicTools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.input_schema } }));

/** A growing agent session in each dialect: each turn adds an assistant tool call and its result. */
const dialects: { name: string; decode: Decode; start(): Body; turn(body: Body, k: number): Body }[] = [
  {
    name: 'anthropic-messages',
    decode: (b, c) => anthropicMessages.decodeRequest(b, c),
    start: () => ({ model: 'claude-sonnet-4-5', max_tokens: 1024, system: [{ type: 'text', text: 'You are a coding agent.' }], messages: [{ role: 'user', content: 'Fix the bug.' }], tools: anthropicTools }),
    turn: (b, k) => ({
      ...b,
      messages: [
        ...b.messages,
        { role: 'assistant', content: [{ type: 'thinking', thinking: `step ${k}`, signature: 'sig' }, { type: 'tool_use', id: `call_${k}`, name: `tool_${k % 6}`, input: { path: `f${k}.py` } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: `call_${k}`, content: `output ${k} \ud83d` }, { type: 'document', source: {} }] },
      ],
    }),
  },
  {
    name: 'openai-chat',
    decode: (b, c) => openaiChat.decodeRequest(b, c),
    start: () => ({ model: 'qwen', messages: [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'Fix the bug.' }], tools: chatTools }),
    turn: (b, k) => ({
      ...b,
      messages: [
        ...b.messages,
        { role: 'assistant', content: null, reasoning_content: `step ${k}`, tool_calls: [{ id: `call_${k}`, type: 'function', function: { name: `tool_${k % 6}`, arguments: `{"path":"f${k}.py"}` } }] },
        { role: 'tool', tool_call_id: `call_${k}`, content: [{ type: 'text', text: `output ${k} \ud83d` }, { type: 'input_audio' }] },
      ],
    }),
  },
];

describe.each(dialects)('$name', ({ decode, start, turn }) => {
  test('a growing session decodes as fresh copies do; shared elements come back as the same IR objects, with their warnings on every call', () => {
    let body = start();
    let previous: IRRequest | undefined;
    for (let k = 0; k < 12; k++) {
      body = turn(body, k);
      const ir = same(decode, body)!;
      // A dropped part and a lone surrogate per turn: their warnings are raised again for every kept message.
      expect(ir.warnings.filter((w) => w.code === 'unsupported-content')).toHaveLength(k + 1);
      expect(ir.warnings.find((w) => w.code === 'lone-surrogate-replaced')?.message).toStartWith(`${k + 1} string(s)`);
      if (previous !== undefined) {
        const kept = previous.messages.filter((m) => m.role !== 'system');
        const now = ir.messages.filter((m) => m.role !== 'system');
        for (let i = 0; i < kept.length; i++) expect(now[i]).toBe(kept[i]!);
        for (let i = 0; i < ir.tools.length; i++) expect(ir.tools[i]).toBe(previous.tools[i]!);
      }
      previous = ir;
    }
  });

  test('a kept tool result takes the tool name its assistant turn gives now; edited, moved and removed messages decode afresh', () => {
    const body = turn(turn(start(), 0), 1);
    const base = same(decode, body)!;
    const n = body.messages.length;
    // The assistant turn before the last result renames its call: the shared result must follow it.
    const assistant = structuredClone(body.messages[n - 2]) as Record<string, unknown>;
    const renamed = JSON.parse(JSON.stringify(assistant).replaceAll('tool_1', 'renamed_tool')) as unknown;
    const withRename = { ...body, messages: [...body.messages.slice(0, n - 2), renamed, body.messages[n - 1]] };
    const ir = same(decode, withRename)!;
    const result = ir.messages.at(-1) as { role: string; name?: string };
    expect(result.role).toBe('tool');
    expect(result.name).toBe('renamed_tool');
    expect(ir.messages.at(-1)).not.toBe(base.messages.at(-1));
    // The same objects at other indexes (warnings name the index), a message removed, one added twice.
    same(decode, { ...body, messages: [body.messages[0], ...body.messages.slice(3)] });
    same(decode, { ...body, messages: [...body.messages, ...body.messages.slice(1)] });
    same(decode, { ...body, messages: body.messages.slice().reverse() });
    same(decode, { ...body, tools: [...(body.tools ?? [])].reverse() });
  });

  test('errors are the whole-body schema\'s: a bad new message after kept ones, a bad top-level field, both', () => {
    const body = turn(turn(start(), 0), 1);
    same(decode, body);
    same(decode, { ...body, messages: [...body.messages, { role: 'user', content: 42 }] });
    same(decode, { ...body, max_tokens: -1, messages: [...body.messages, { role: 'nobody', content: 'x' }] });
    same(decode, { ...body, model: 7 });
    same(decode, { ...body, tools: [...(body.tools ?? []), { name: 5 }] });
    same(decode, { ...body, messages: [...body.messages, 'text'] });
    same(decode, { ...body, messages: [...body.messages, { role: 'user', content: [{ type: 'no_such_block' }] }] });
    same(decode, null);
    same(decode, []);
  });
});

test('a dropped tool kept from an earlier call warns once, as on a fresh copy, in both dialects', () => {
  // A kept tool whose value is null (dropped) must be taken as kept, not decoded again with a second warning. A new
  // copy of the first tool each call ends the shared run there, so the dropped one is found by its own entry.
  const anthropic = { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }], tools: [anthropicTools[0], { type: 'web_search_20250305', name: 'web_search' }] };
  const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }], tools: [chatTools[0], { type: 'custom', custom: { name: 'grep' } }] };
  for (const [decode, body] of [[anthropicMessages.decodeRequest, anthropic], [openaiChat.decodeRequest, chat]] as const) {
    for (let call = 0; call < 3; call++) {
      const ir = same(decode, { ...body, tools: [structuredClone(body.tools[0]), body.tools[1]] })!;
      expect(ir.warnings.filter((w) => w.code === 'unsupported-tool')).toHaveLength(1);
      expect(ir.tools.map((t) => t.name)).toEqual(['tool_0']);
    }
  }
});

test('anthropic: a kept system message is checked against the message before it on every call', () => {
  const system = { role: 'system', content: 'Be brief.' };
  const user = { role: 'user', content: 'hi' };
  const assistant = { role: 'assistant', content: 'hello' };
  const base = { model: 'm', max_tokens: 10, messages: [user, system, assistant, user] };
  same(anthropicMessages.decodeRequest, base);
  // The same system object now follows an assistant turn: the placement rule fails, as on a fresh copy.
  same(anthropicMessages.decodeRequest, { ...base, messages: [assistant, system, user] });
  same(anthropicMessages.decodeRequest, { ...base, messages: [user, assistant, system, user] });
});

test('wellFormed repairs copies: a shared system message warns on every call, and decoded objects keep their text', () => {
  // Reported by a fuzzing run: OpenAI Chat merges system messages into a new object each call, and wellFormed had
  // repaired the kept parts in place, so the second call found nothing to report.
  const system = { role: 'system', content: 'hi \ud800' };
  for (const extra of [[], [{ role: 'developer', content: [{ type: 'text', text: 'dev' }] }]]) {
    for (const turn of ['q1', 'q2', 'q3']) {
      const ir = same(openaiChat.decodeRequest, { model: 'm', messages: [system, ...extra, { role: 'user', content: turn }] })!;
      expect(ir.warnings.map((w) => w.code)).toContain('lone-surrogate-replaced');
      expect(JSON.stringify(ir.messages[0])).toContain('\ufffd');
    }
  }
  // A decoded message is not changed by wellFormed: an earlier result keeps its text, and a later decode of the same
  // object gives what a fresh decode gives before any repair.
  const user = { role: 'user', content: 'a \ud800' };
  const first = anthropicMessages.decodeRequest({ model: 'm', max_tokens: 10, messages: [user] }, ctx);
  const second = anthropicMessages.decodeRequest({ model: 'm', max_tokens: 10, messages: [user, { role: 'assistant', content: 'ok' }] }, ctx);
  wellFormed(second);
  expect(second.messages[0]).toEqual({ role: 'user', content: [{ type: 'text', text: 'a \ufffd' }] });
  expect(first.messages[0]).toEqual({ role: 'user', content: [{ type: 'text', text: 'a \ud800' }] });
  const third = anthropicMessages.decodeRequest({ model: 'm', max_tokens: 10, messages: [user, { role: 'assistant', content: 'ok' }] }, ctx);
  expect(third.messages[0]).toEqual({ role: 'user', content: [{ type: 'text', text: 'a \ud800' }] });
});

test('decodeAll takes the elements a session shares with its previous call from that call, with their items, warnings and tool names, and decodes only the rest', () => {
  // Element 1 becomes no item, the others two each (as a raw message may become none or several IR messages).
  const items = (value: string) => (value.startsWith('1:') ? [] : [value, '+']);
  const flat = (values: string[]) => values.flatMap(items);
  const memo = new DecodeMemo<string>();
  const calls: number[] = [];
  // `check` sees every element not taken from the run; `one` decodes those that have no entry to reuse.
  const check = (_raw: unknown, i: number) => void calls.push(i);
  const one = (raw: unknown, i: number, n: ToolNames, own: Warning[]): string => {
    const r = raw as { set?: string; read?: string; warn?: boolean };
    if (r.set) n.set(r.set, `name of ${r.set}`);
    if (r.warn) own.push({ code: 'w', message: `element ${i}` });
    return `${i}:${r.read ? n.get(r.read) : '-'}`;
  };
  const elements = [{ set: 'a' }, { warn: true }, { read: 'a' }, { set: 'b', warn: true }];
  const names1 = new Map<string, string>();
  const warnings1: { code: string; message: string }[] = [];
  expect(memo.decodeAll(elements, names1, warnings1, one, items, check)).toEqual(flat(['0:-', '1:-', '2:name of a', '3:-']));
  expect(calls).toEqual([0, 1, 2, 3]);

  // The next call shares the four objects and adds two: only those are decoded; the rest, its warnings and names come from the run.
  calls.length = 0;
  const grown = [...elements, { read: 'b' }, { read: 'a', warn: true }];
  const names2 = new Map<string, string>();
  const warnings2: { code: string; message: string }[] = [{ code: 'top', message: 'before the messages' }];
  expect(memo.decodeAll(grown, names2, warnings2, one, items, check)).toEqual(flat(['0:-', '1:-', '2:name of a', '3:-', '4:name of b', '5:name of a']));
  expect(calls).toEqual([4, 5]);
  expect(warnings2.map((w) => w.message)).toEqual(['before the messages', 'element 1', 'element 3', 'element 5']);
  expect([...names2]).toEqual([['a', 'name of a'], ['b', 'name of b']]);
  expect(memo.sharedPrefix(grown)).toBe(6);

  // A changed element ends the shared run: it and everything after it go through `one` again.
  calls.length = 0;
  const edited = [elements[0], { set: 'a2' }, ...grown.slice(2)];
  expect(memo.sharedPrefix(edited)).toBe(1);
  expect(memo.decodeAll(edited, new Map(), [], one, items, check)).toEqual(flat(['0:-', '1:-', '2:name of a', '3:-', '4:name of b', '5:name of a']));
  expect(calls).toEqual([1, 2, 3, 4, 5]);
  // A fresh array (no object shared) shares nothing.
  expect(memo.sharedPrefix(structuredClone(grown))).toBe(0);
});

test('wellFormed takes the repairs of the messages and tools a call shares with the last call from its run, and repairs fresh system messages each time', () => {
  const text = (t: string) => [{ type: 'text' as const, text: t }];
  const system = () => ({ role: 'system' as const, content: text('sys \udc00') });
  const kept: IRMessage[] = [
    { role: 'user', content: text('ok') },
    { role: 'assistant', content: text('a \ud800') },
    { role: 'user', content: text('b') },
  ];
  const tools: IRTool[] = [{ name: 't', description: 'd \ud800', parameters: {}, origin: { kind: 'function' } }];
  const call = (messages: IRMessage[]): IRRequest => ({ ...anthropicMessages.decodeRequest({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }, ctx), messages, tools: [...tools] });
  const first = call([system(), ...kept]);
  wellFormed(first);
  expect(first.warnings.find((w) => w.code === 'lone-surrogate-replaced')?.message).toStartWith('3 string(s)');
  const repairedAssistant = first.messages[2]!;
  expect(repairedAssistant).not.toBe(kept[1]!);
  expect(repairedAssistant.content).toEqual(text('a \ufffd'));
  const second = call([system(), ...kept, { role: 'assistant', content: text('c') }, { role: 'user', content: text('d \udc00') }]);
  wellFormed(second);
  expect(second.warnings.find((w) => w.code === 'lone-surrogate-replaced')?.message).toStartWith('4 string(s)');
  expect(second.messages[0]!.content).toEqual(text('sys \ufffd'));
  expect(second.messages[2]).toBe(repairedAssistant); // the kept repair, not a new copy
  expect(second.messages[5]!.content).toEqual(text('d \ufffd'));
  expect(second.tools[0]!.description).toBe('d \ufffd');
  // The decoded objects themselves never change; an edited first message starts another run and is exact too.
  expect(kept[1]!.content).toEqual(text('a \ud800'));
  const third = call([system(), { role: 'user', content: text('e \ud800') }, ...kept.slice(1)]);
  wellFormed(third);
  expect(third.warnings.find((w) => w.code === 'lone-surrogate-replaced')?.message).toStartWith('4 string(s)');
  expect(third.messages.map((m) => m.content)).toEqual([text('sys \ufffd'), text('e \ufffd'), text('a \ufffd'), text('b')]);
});

test('wellFormed over a session that extends its last call: later system messages are repaired on their own, kept repairs are placed, counts add up', () => {
  const text = (t: string) => [{ type: 'text' as const, text: t }];
  const history: IRMessage[] = [{ role: 'user', content: text('start') }];
  const call = (messages: IRMessage[]): IRRequest => ({ ...anthropicMessages.decodeRequest({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }, ctx), messages, tools: [] });
  let expectedRepairs = 1; // the fresh leading system message of every call
  for (let turn = 0; turn < 5; turn++) {
    const ir = call([{ role: 'system', content: text('sys \udc00') }, ...history]);
    wellFormed(ir);
    const warning = ir.warnings.find((w) => w.code === 'lone-surrogate-replaced');
    if (expectedRepairs === 0) expect(warning).toBeUndefined();
    else expect(warning?.message).toStartWith(`${expectedRepairs} string(s)`);
    // Every string the engine will see is well formed, and every decoded object kept its own text.
    for (const message of ir.messages) for (const part of message.content) if (part.type === 'text') expect(part.text.isWellFormed()).toBe(true);
    for (const message of history) for (const part of message.content) if (part.type === 'text') expect(part.text).toMatch(/^(start|ok \d|bad \d \ud800|reminder \udc00)$/);
    expect(ir.messages.slice(1).map((m) => (m.content[0] as { text: string }).text)).toEqual(history.map((m) => (m.content[0] as { text: string }).text.toWellFormed()));
    // The next call: one clean turn, one with a lone surrogate, and (turn 1) a mid-conversation system message with one.
    history.push({ role: 'assistant', content: text(`ok ${turn}`) });
    history.push({ role: 'user', content: text(`bad ${turn} \ud800`) });
    expectedRepairs++;
    if (turn === 1) {
      history.push({ role: 'system', content: text('reminder \udc00') });
      expectedRepairs++;
    }
  }
});
