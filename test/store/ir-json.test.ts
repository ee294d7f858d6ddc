import { describe, expect, test } from 'bun:test';
import type { IRMessage, IRRequest, IRTool } from '../../src/core/ir.ts';
import { applyBytesDelta } from '../../src/store/delta.ts';
import { jsonEqual } from '../../src/core/json-equal.ts';
import { encodeIrRequest, type IrLayout } from '../../src/store/ir-json.ts';

const utf8 = new TextDecoder('utf-8', { fatal: true });

const tools: IRTool[] = [
  { name: 'Bash', description: 'Run a command — in a shell ✓', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] }, origin: { kind: 'function' } },
  { name: 'Read', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } }, origin: { kind: 'function' } },
];

function ir(messages: IRMessage[], overrides: Partial<IRRequest> = {}): IRRequest {
  return { version: 1, model: 'claude-sonnet-4-5', messages, tools, sampling: { temperature: 1 }, stream: false, warnings: [], ...overrides };
}

const user = (text: string): IRMessage => ({ role: 'user', content: [{ type: 'text', text }] });
const assistantCall = (id: string, command: string): IRMessage => ({ role: 'assistant', content: [], toolCalls: [{ id, name: 'Bash', arguments: JSON.stringify({ command }) }] });
const toolResult = (id: string, text: string): IRMessage => ({ role: 'tool', toolCallId: id, content: [{ type: 'text', text }] });

/** The full text `encodeIrRequest` writes without a base. */
function fullText(request: IRRequest): { text: Uint8Array; layout: IrLayout } {
  const out = encodeIrRequest(request, null);
  if (!('bytes' in out) || out.layout === null) throw new Error('expected full bytes with a layout');
  return { text: out.bytes, layout: out.layout };
}

describe('encodeIrRequest', () => {
  test('without a base: the full text parses back to the IR, messages first and tools last', () => {
    const request = ir([{ role: 'system', content: [{ type: 'text', text: 'Be brief. 日本語 🚀' }] }, user('list files')]);
    const { text, layout } = fullText(request);
    const json = utf8.decode(text);
    expect(JSON.parse(json)).toEqual(request);
    expect(json.startsWith('{"messages":[')).toBe(true);
    expect(json.endsWith(`,"tools":${JSON.stringify(tools)}}`)).toBe(true);
    expect(layout.length).toBe(text.byteLength);
    // ends[i] is the byte offset after message i: the text up to there ends with that message's JSON
    for (let i = 0; i < request.messages.length; i++) {
      expect(utf8.decode(text.subarray(0, layout.ends[i]!)).endsWith(JSON.stringify(request.messages[i]))).toBe(true);
    }
  });

  test('a session that appends turns: each delta rebuilds exactly the full text and carries only the new messages', () => {
    const messages: IRMessage[] = [{ role: 'system', content: [{ type: 'text', text: 'You are an agent. '.repeat(200) }] }, user('fix the failing test — please ✓')];
    let { text: baseText, layout } = fullText(ir(messages));
    for (let turn = 0; turn < 12; turn++) {
      messages.push(assistantCall(`call_${turn}`, `ls -la src/${turn}`), toolResult(`call_${turn}`, `-rw-r--r-- 1 dev dev ${turn} file_${turn}.py ✓\n`.repeat(30)));
      const request = ir(messages.slice(), { warnings: turn % 2 ? [{ code: 'unknown-field', message: 'x' }] : [] });
      const out = encodeIrRequest(request, layout);
      if (!('delta' in out) || out.layout === null) throw new Error('expected a delta');
      const rebuilt = applyBytesDelta(out.delta, baseText);
      const expected = fullText(request).text;
      expect(Buffer.compare(rebuilt, expected)).toBe(0);
      expect(out.layout.length).toBe(expected.byteLength);
      expect(out.delta.suffix).toBe(Buffer.byteLength(`,"tools":${JSON.stringify(tools)}}`));
      // the middle holds the two new messages and the small fields, not the history or the tools
      const newJson = JSON.stringify(messages.at(-2)) + JSON.stringify(messages.at(-1));
      expect(out.delta.middle.byteLength).toBeLessThan(Buffer.byteLength(newJson) + 300);
      baseText = rebuilt;
      layout = out.layout;
    }
  });

  test('a changed tool list, a message edited in the middle, and the same request again are all exact', () => {
    const history = [user('a'), assistantCall('c1', 'ls'), toolResult('c1', 'x.py'), user('b ✓')];
    const { text: baseText, layout } = fullText(ir(history));
    const cases: IRRequest[] = [
      ir([...history, user('c')], { tools: tools.slice(0, 1) }),
      ir([history[0]!, history[1]!, toolResult('c1', 'y.py'), history[3]!, user('c')]),
      ir(history.slice()),
      ir(history.slice(0, 2)), // shorter
      ir([...history, user('c')], { tools: [] }),
    ];
    for (const request of cases) {
      const out = encodeIrRequest(request, layout);
      if (!('delta' in out)) throw new Error('expected a delta');
      expect(Buffer.compare(applyBytesDelta(out.delta, baseText), fullText(request).text)).toBe(0);
    }
    expect((encodeIrRequest(cases[0]!, layout) as { delta: { suffix: number } }).delta.suffix).toBe(0); // tools changed
    expect((encodeIrRequest(cases[1]!, layout) as { delta: { prefix: number } }).delta.prefix).toBe(layout.ends[1]!); // shared up to message 1
  });

  test('a different first message is written in full; so is a value that is not an IR request (no layout)', () => {
    const { layout } = fullText(ir([user('a'), user('b')]));
    const other = encodeIrRequest(ir([user('z'), user('b')]), layout);
    expect('bytes' in other).toBe(true);
    const odd = encodeIrRequest({ t: 1 } as unknown as IRRequest, layout);
    expect('bytes' in odd && utf8.decode(odd.bytes)).toBe('{"t":1}');
    expect(odd.layout).toBeNull();
  });

  test("appending to the caller's messages array after the call does not change what the layout compares with", () => {
    const messages = [user('a'), user('b')];
    const { text: baseText, layout } = fullText(ir(messages));
    messages.push(user('c'));
    const next = ir(messages.slice());
    const out = encodeIrRequest(next, layout);
    if (!('delta' in out)) throw new Error('expected a delta');
    expect(out.delta.prefix).toBe(layout.ends[1]!);
    expect(Buffer.compare(applyBytesDelta(out.delta, baseText), fullText(next).text)).toBe(0);
  });
});

describe('jsonEqual: equal only when JSON.stringify would give the same text', () => {
  test.each([
    [{ a: 1, b: [1, 'x', null, true] }, { a: 1, b: [1, 'x', null, true] }, true],
    [{ a: 1, b: 2 }, { b: 2, a: 1 }, false], // key order changes the text
    [{ a: 1 }, { a: 1, b: undefined }, false],
    [{ a: undefined }, { a: undefined }, false], // conservative: stringify drops the key
    [[1, [2, [3]]], [1, [2, [4]]], false],
    [Number.NaN, Number.NaN, false],
    [Infinity, Infinity, false],
    [[], {}, false],
    [null, null, true],
    ['日本語 🚀', '日本語 🚀', true],
    [{ toJSON: 1 }, { toJSON: 1 }, true], // a plain key named toJSON is data
  ])('%j vs %j → %p', (a, b, equal) => {
    expect(jsonEqual(a, b)).toBe(equal);
  });

  test('an object with a toJSON method is never equal to another object', () => {
    const d1 = new Date(0);
    const d2 = new Date(1);
    expect(jsonEqual({ d: d1 }, { d: d2 })).toBe(false);
  });
});
