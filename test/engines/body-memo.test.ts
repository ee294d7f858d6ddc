import { describe, expect, test } from 'bun:test';
import { ChatBodyMemo } from '../../src/engines/body-memo.ts';

const utf8 = new TextDecoder('utf-8', { fatal: true });
const expected = (body: unknown) => new TextEncoder().encode(JSON.stringify(body));

const tools = [
  { type: 'function', function: { name: 'Bash', description: 'Run a command — in a shell ✓', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } } },
  { type: 'function', function: { name: 'Read', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } },
];

/** The engine body of turn `n` of a tool-calling session: system, user, then (assistant call, tool result) pairs. */
function bodyAt(n: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const messages: Record<string, unknown>[] = [
    { role: 'system', content: 'You are a coding agent. Ünïcödé 🚀 and "quotes"\n\ttabs' },
    { role: 'user', content: 'fix the bug' },
  ];
  for (let i = 0; i < n; i++) {
    messages.push({ role: 'assistant', content: null, reasoning: `think ${i}`, tool_calls: [{ id: `call_${i}`, type: 'function', function: { name: 'Bash', arguments: JSON.stringify({ command: `ls ${i}` }) } }] });
    messages.push({ role: 'tool', tool_call_id: `call_${i}`, content: `-rw-r--r-- file_${i}.py\n`.repeat(50 + i) });
  }
  return { model: 'qwen3', messages, stream: false, temperature: 1, top_p: 1, tools, tool_choice: 'auto', ...extra };
}

describe('ChatBodyMemo: the bytes of JSON.stringify(body), serialising only what the session adds', () => {
  test('a 12-turn session: every body is exact, and each call serialises only its new messages', () => {
    const memo = new ChatBodyMemo(undefined, 0);
    let serialised = 0;
    for (let n = 0; n < 12; n++) {
      const body = bodyAt(n);
      expect(utf8.decode(memo.encode('s1', body))).toBe(JSON.stringify(body));
      // The first call serialises system + user; each later one its assistant call and tool result only.
      expect(memo.stats.serialised - serialised).toBe(2);
      serialised = memo.stats.serialised;
    }
    expect(memo.stats.reused).toBe(Array.from({ length: 11 }, (_, n) => 2 + 2 * n).reduce((a, b) => a + b, 0));
    expect(memo.residentBytes).toBeGreaterThan(0);
  });

  test('an edited middle message, a changed tool list and changed sampling fields are serialised again', () => {
    const memo = new ChatBodyMemo(undefined, 0);
    memo.encode('s', bodyAt(4));
    const edited = bodyAt(5);
    (edited.messages as Record<string, unknown>[])[3]!.content = 'the tool result, compacted by the harness';
    const before = memo.stats.serialised;
    expect(memo.encode('s', edited)).toEqual(expected(edited));
    expect(memo.stats.serialised - before).toBe(12 - 3); // messages 3..11
    const moreTools = bodyAt(5, { tools: [...tools, { type: 'function', function: { name: 'Write', parameters: {} } }], temperature: 0.6 });
    expect(memo.encode('s', moreTools)).toEqual(expected(moreTools));
    const noTools = bodyAt(5);
    delete noTools.tools;
    expect(memo.encode('s', noTools)).toEqual(expected(noTools));
  });

  test('a shorter conversation, other key orders, undefined values, toJSON and holes read as JSON.stringify does', () => {
    const memo = new ChatBodyMemo(undefined, 0);
    memo.encode('s', bodyAt(6));
    const shorter = bodyAt(2);
    expect(memo.encode('s', shorter)).toEqual(expected(shorter));
    const reordered = { tools, messages: bodyAt(3).messages, model: 'qwen3', seed: undefined, user: () => 1, stop: ['</s>'] };
    expect(memo.encode('s', reordered)).toEqual(expected(reordered));
    const odd = bodyAt(3);
    const messages = odd.messages as unknown[];
    messages[2] = { toJSON: () => ({ role: 'assistant', content: 'from toJSON' }) };
    messages[3] = undefined;
    expect(memo.encode('s', odd)).toEqual(expected(odd));
    const same = bodyAt(3);
    (same.messages as unknown[])[2] = { toJSON: () => ({ role: 'assistant', content: 'another toJSON' }) };
    expect(memo.encode('s', same)).toEqual(expected(same)); // a toJSON message is never taken as equal
    const notChat = { prompt: [1, 2, 3], messages: 'not an array' };
    expect(memo.encode('s', notChat)).toEqual(expected(notChat));
  });

  test('the caller appending to its array after the call changes nothing remembered', () => {
    const memo = new ChatBodyMemo(undefined, 0);
    const body = bodyAt(2);
    memo.encode('s', body);
    (body.messages as unknown[]).push({ role: 'user', content: 'appended later' });
    const next = bodyAt(3);
    expect(memo.encode('s', next)).toEqual(expected(next));
  });

  test('sessions are separate; null keeps nothing; forget and the byte budget drop sessions (least recently used first)', () => {
    const memo = new ChatBodyMemo(undefined, 0);
    memo.encode('a', bodyAt(3));
    const reusedBefore = memo.stats.reused;
    memo.encode('b', bodyAt(3));
    expect(memo.stats.reused).toBe(reusedBefore); // b is new: nothing of a's is reused
    memo.encode(null, bodyAt(4));
    expect(memo.stats.reused).toBe(reusedBefore);
    const resident = memo.residentBytes;
    memo.forget('a');
    expect(memo.residentBytes).toBeLessThan(resident);
    memo.encode('a', bodyAt(4));
    expect(memo.stats.reused).toBe(reusedBefore); // forgotten: serialised in full

    const one = new ChatBodyMemo(0, 0).encode('a', bodyAt(1)).byteLength;
    const tight = new ChatBodyMemo(Math.floor(one * 1.5), 0); // room for one session's body, not two
    tight.encode('a', bodyAt(1));
    tight.encode('b', bodyAt(1));
    const reused = tight.stats.reused;
    tight.encode('b', bodyAt(1));
    expect(tight.stats.reused).toBe(reused + 4); // b kept
    tight.encode('a', bodyAt(1));
    expect(tight.stats.reused).toBe(reused + 4); // a was evicted when b came in

    const none = new ChatBodyMemo(0, 0);
    none.encode('a', bodyAt(2));
    expect(none.encode('a', bodyAt(2))).toEqual(expected(bodyAt(2)));
    expect(none.stats.reused).toBe(0);
    expect(none.residentBytes).toBe(0);
  });

  test('bodies under minBytes are one JSON.stringify and not remembered; a session is remembered once its body reaches it', () => {
    const memo = new ChatBodyMemo(undefined, 8 * 1024);
    const small = bodyAt(1);
    expect(JSON.stringify(small).length).toBeLessThan(8 * 1024);
    expect(memo.encode('s', small)).toEqual(expected(small));
    expect(memo.encode('s', small)).toEqual(expected(small));
    expect([memo.stats.whole, memo.stats.serialised, memo.stats.reused, memo.residentBytes]).toEqual([2, 0, 0, 0]);
    const big = bodyAt(8);
    expect(JSON.stringify(big).length).toBeGreaterThan(8 * 1024);
    expect(memo.encode('s', big)).toEqual(expected(big)); // whole, and cut into pieces to be remembered
    expect(memo.stats.whole).toBe(3);
    expect(memo.residentBytes).toBeGreaterThan(8 * 1024);
    const next = bodyAt(9);
    expect(memo.encode('s', next)).toEqual(expected(next));
    expect(memo.stats.whole).toBe(3);
    expect(memo.stats.reused).toBe(2 + 2 * 8);
    expect(memo.encode('s', small)).toEqual(expected(small)); // shrank below: forgotten
    expect(memo.residentBytes).toBe(0);
  });
});
