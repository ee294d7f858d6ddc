/**
 * RequestJsonReader: a session's request body read as a splice of its previous one must be exactly what
 * `JSON.parse` gives for the whole text (values and key order), and an invalid text must throw as `JSON.parse` does.
 * Checked over a growing Claude-Code-shaped conversation (new messages, a cache_control marker that moves, a billing
 * line in `system` that changes every turn), over random byte edits of such bodies, and over the shapes the splice
 * must refuse (duplicate or `__proto__` members, primitives in `messages`, a change before `messages`).
 */
import { expect, test } from 'bun:test';
import { RequestJsonReader } from '../../src/proxy/request-json.ts';

const encoder = new TextEncoder();

/** Parse with the reader and with JSON.parse; both must agree (value and key order) or both must throw. */
function same(reader: RequestJsonReader, text: string, session: string | null = 's'): unknown {
  let expected: unknown;
  let expectedError: unknown;
  try {
    expected = JSON.parse(text);
  } catch (error) {
    expectedError = error;
  }
  let actual: unknown;
  let actualError: unknown;
  try {
    actual = reader.parse(encoder.encode(text), session);
  } catch (error) {
    actualError = error;
  }
  if (expectedError !== undefined) {
    expect(actualError).toBeInstanceOf(SyntaxError);
    expect((actualError as Error).message).toBe((expectedError as Error).message);
    return undefined;
  }
  expect(actualError).toBeUndefined();
  expect(JSON.stringify(actual)).toBe(JSON.stringify(expected));
  expect(actual).toEqual(expected as never);
  return actual;
}

const tools = Array.from({ length: 12 }, (_, i) => ({
  name: `tool_${i}`,
  description: `Tool ${i}: ${'does things with files, "quoted" and \\ escaped, {braces} [brackets] '.repeat(12)}`,
  input_schema: { type: 'object', properties: { path: { type: 'string', description: 'a path' }, n: { type: 'integer', minimum: 0 } }, required: ['path'] },
}));

function claudeBody(turns: number, billing: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const messages: Record<string, unknown>[] = [];
  for (let t = 0; t < turns; t++) {
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_${t}`, content: `output ${t}: ${'ünïcødé ✓ line\n'.repeat(20)} "end" \\` }] });
    messages.push({ role: 'assistant', content: [{ type: 'text', text: `step ${t} {"json":[1,2]}` }, { type: 'tool_use', id: `toolu_${t + 1}`, name: 'tool_1', input: { path: `/tmp/${t}`, n: t } }] });
  }
  messages.push({ role: 'user', content: [{ type: 'text', text: `next ${turns}`, cache_control: { type: 'ephemeral' } }] });
  return {
    model: 'claude-sonnet-4',
    messages,
    system: [{ type: 'text', text: `x-anthropic-billing-header: ${billing}` }, { type: 'text', text: 'You are Claude Code. '.repeat(400) }],
    tools,
    metadata: { user_id: 'user_abc' },
    max_tokens: 32000,
    stream: true,
    ...extra,
  };
}

test('a growing Claude Code session: every turn after the first is spliced and equals JSON.parse of the whole body', () => {
  const reader = new RequestJsonReader();
  for (let turn = 1; turn <= 30; turn++) same(reader, JSON.stringify(claudeBody(turn, `cch=${turn * 7919}`)));
  expect(reader.stats.whole).toBe(1);
  expect(reader.stats.spliced).toBe(29);
});

test('the same body again is spliced and shares the previous values but not the top-level object or the messages array', () => {
  const reader = new RequestJsonReader();
  const text = JSON.stringify(claudeBody(5, 'same'), null, 1); // whitespace between tokens too
  const first = same(reader, text) as Record<string, unknown[]>;
  const second = same(reader, text) as Record<string, unknown[]>;
  expect(reader.stats.spliced).toBe(1);
  expect(second).not.toBe(first);
  expect(second.messages).not.toBe(first.messages);
  expect(second.messages![0]).toBe(first.messages![0]);
  expect(second.tools).toBe(first.tools);
});

test('edits before, inside and after `messages`, and new members, are exact (the change before `messages` is parsed whole)', () => {
  const reader = new RequestJsonReader();
  same(reader, JSON.stringify(claudeBody(6, 'a')));
  same(reader, JSON.stringify({ ...claudeBody(6, 'a'), model: 'other-model' })); // before messages: whole
  same(reader, JSON.stringify(claudeBody(7, 'b', { temperature: 0.5 })));
  same(reader, JSON.stringify(claudeBody(7, 'b', { temperature: 0.5, top_k: 3 })));
  const edited = claudeBody(7, 'c');
  ((edited.messages as Record<string, unknown>[])[3]!.content as Record<string, unknown>[])[0]!.text = 'rewritten history';
  same(reader, JSON.stringify(edited)); // an older message changed: the splice starts there
  same(reader, JSON.stringify(claudeBody(2, 'd'))); // the conversation shrank (compaction)
  same(reader, JSON.stringify({ ...claudeBody(3, 'e'), messages: [] }));
  same(reader, JSON.stringify(claudeBody(3, 'f')));
  // The first differing byte is an element's closing brace: that element is new, not kept.
  const grown = claudeBody(3, 'f');
  (grown.messages as Record<string, unknown>[]).at(-1)!.name = 'late member';
  same(reader, JSON.stringify(grown));
  expect(reader.stats.spliced).toBeGreaterThanOrEqual(6);
});

test('duplicate members, `__proto__`, primitive or non-array `messages`: exact results (spliced or not)', () => {
  const reader = new RequestJsonReader();
  const base = JSON.stringify(claudeBody(4, 'dup'));
  const cases = [
    base,
    base.replace('"metadata":', '"model":"dup-model","metadata":'), // a repeated member after messages
    base.replace('"stream":true', '"stream":true,"messages":[{"role":"user","content":"late"}]'), // messages twice
    base,
    base.replace('"stream":true', '"stream":true,"__proto__":{"polluted":1}'),
    base,
    base.replace('"messages":[', '"messages":[1,"two",null,'),
    base,
    base.replace(/"messages":\[.*?\],"system"/, '"messages":{"0":{}},"system"'),
    base,
    base.replace('"stream":true', '"stream":true,"\\u0000polar-splice-head":[7]'),
    base,
  ];
  for (const text of cases) same(reader, text);
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
});

test('a number continuation right after a kept element (`{}.5`, `[]e1`) is invalid, as JSON.parse says', () => {
  const pad = 'x'.repeat(16384);
  for (const [first, next] of [
    ['[{}]', '[{}.5]'],
    ['[{}]', '[{}e1]'],
    ['[[]]', '[[]E+2]'],
    ['[{}]', '[{}.0,{"a":1}]'],
  ] as const) {
    const reader = new RequestJsonReader();
    same(reader, `{"messages":${first},"pad":"${pad}"}`);
    same(reader, `{"messages":${next},"pad":"${pad}"}`);
  }
});

test('random byte edits of a spliced body (valid or not) agree with JSON.parse every time', () => {
  let state = 12345;
  const random = (n: number) => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state % n;
  };
  const alphabet = ['{', '}', '[', ']', ',', ':', '"', '\\', ' ', '\n', '0', '1', '-', 'e', '.5', 'E+1', 'a', 'null', 'true', '"x"', 'é', '✓'];
  const reader = new RequestJsonReader();
  let spliced = 0;
  for (let round = 0; round < 300; round++) {
    const body = claudeBody(3 + random(6), `cch=${random(1000)}`);
    let text = JSON.stringify(body);
    const edits = random(3);
    for (let e = 0; e < edits; e++) {
      const at = random(text.length);
      const cut = random(4);
      text = text.slice(0, at) + alphabet[random(alphabet.length)] + text.slice(at + cut);
    }
    // Give the reader a valid previous body half the time, so edits hit the splice path often.
    if (random(2) === 0) same(reader, JSON.stringify(body));
    const before = reader.stats.spliced;
    same(reader, text);
    spliced += reader.stats.spliced - before;
  }
  expect(spliced).toBeGreaterThan(50);
});

test('invalid UTF-8 in the new bytes throws the strict decoder\'s TypeError; small bodies, budget 0 and forget parse whole', () => {
  const reader = new RequestJsonReader();
  const text = JSON.stringify(claudeBody(4, 'utf'));
  reader.parse(encoder.encode(text), 's');
  const next = encoder.encode(JSON.stringify(claudeBody(5, 'utf')));
  const at = next.indexOf(encoder.encode('next 5')[0]!, next.byteLength - 30000);
  const broken = new Uint8Array(next);
  broken[next.lastIndexOf(0x6e /* n */)] = 0xff;
  expect(at).toBeGreaterThan(0);
  expect(() => reader.parse(broken, 's')).toThrow(TypeError);

  const small = new RequestJsonReader();
  const tiny = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
  same(small, tiny);
  same(small, tiny);
  expect(small.stats).toEqual({ spliced: 0, whole: 2 });

  const off = new RequestJsonReader(0);
  same(off, text);
  same(off, text);
  expect(off.stats).toEqual({ spliced: 0, whole: 2 });
  expect(off.residentBytes).toBe(0);

  const forgetful = new RequestJsonReader();
  same(forgetful, text);
  expect(forgetful.residentBytes).toBe(encoder.encode(text).byteLength * 4);
  forgetful.forget('s');
  expect(forgetful.residentBytes).toBe(0);
  same(forgetful, text);
  same(forgetful, text, null); // no session: never kept, never spliced
  expect(forgetful.stats).toEqual({ spliced: 0, whole: 3 });
});

test('sessions are kept apart and the budget evicts the least recently used', () => {
  const size = (turns: number) => encoder.encode(JSON.stringify(claudeBody(turns, 'a'))).byteLength * 4;
  const reader = new RequestJsonReader(size(4) + size(5) + 100); // two sessions, one of them grown
  for (const session of ['a', 'b', 'c']) same(reader, JSON.stringify(claudeBody(4, session)), session);
  same(reader, JSON.stringify(claudeBody(5, 'c')), 'c');
  same(reader, JSON.stringify(claudeBody(5, 'b')), 'b');
  same(reader, JSON.stringify(claudeBody(5, 'a')), 'a'); // evicted: whole
  expect(reader.stats).toEqual({ spliced: 2, whole: 4 });
});
