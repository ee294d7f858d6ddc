import { describe, expect, test } from 'bun:test';
import { EngineAnswerReader } from '../../src/engines/answer-json.ts';
import { firstChoice } from '../../src/engines/chat-capture.ts';

const utf8 = new TextEncoder();
const bytesOf = (text: string) => utf8.encode(text);

/** A vLLM-shaped non-streaming answer (prompt ids at the top level, after usage). */
function vllmAnswer(promptIds: number[], content = 'done'): string {
  return JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion',
    model: 'm',
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop', token_ids: [7, 8], logprobs: { content: [{ token: 'a', logprob: -0.5 }, { token: 'b', logprob: -0.25 }] } }],
    usage: { prompt_tokens: promptIds.length, completion_tokens: 2 },
    prompt_token_ids: promptIds,
    kv_transfer_params: null,
  });
}

/** An SGLang-shaped answer (prompt ids on choices[0]). */
function sglangAnswer(promptIds: number[]): string {
  return JSON.stringify({ id: 'x', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, prompt_token_ids: promptIds, finish_reason: 'stop' }], meta_info: { id: 'x' } });
}

type Json = Record<string, unknown>;

/** Where an answer's prompt ids sit: the answer itself, or its choices[0]. */
function idsOwner(value: unknown): Json | null {
  if (typeof value !== 'object' || value === null) return null;
  const top = value as Json;
  if ('prompt_token_ids' in top) return top;
  const choice = Array.isArray(top.choices) ? top.choices[0] : undefined;
  return typeof choice === 'object' && choice !== null && 'prompt_token_ids' in choice ? (choice as Json) : null;
}

/**
 * The reader's value equals JSON.parse's, except that ids the reader read itself (its `scanned` / `incremental`
 * counts went up) are an Int32Array of the same ids; ids read by JSON.parse (`fallback`, `small`) are its array.
 */
function expectSameAsJsonParse(reader: EngineAnswerReader, text: string, session: string | null = 's') {
  let expected: unknown;
  let expectedError: unknown = null;
  try {
    expected = JSON.parse(text);
  } catch (error) {
    expectedError = error;
  }
  if (expectedError !== null) {
    expect(() => reader.parse(bytesOf(text), session)).toThrow(SyntaxError);
    return;
  }
  const read = reader.stats.scanned + reader.stats.incremental;
  const value = reader.parse(bytesOf(text), session);
  const byReader = reader.stats.scanned + reader.stats.incremental > read;
  const owner = idsOwner(value);
  expect(owner?.prompt_token_ids instanceof Int32Array).toBe(byReader);
  if (owner !== null && owner.prompt_token_ids instanceof Int32Array) owner.prompt_token_ids = Array.from(owner.prompt_token_ids);
  expect(value).toEqual(expected);
}

describe('EngineAnswerReader parses engine answers exactly as JSON.parse does', () => {
  test('vLLM (top level) and SGLang (choices[0]) prompt ids: a first answer is read whole and its ids remembered', () => {
    const reader = new EngineAnswerReader(undefined, 0);
    const ids = Array.from({ length: 5000 }, (_, i) => (i * 7919) % 151_936);
    expectSameAsJsonParse(reader, vllmAnswer(ids), 'a');
    expectSameAsJsonParse(reader, sglangAnswer(ids), 'b');
    expect(reader.stats).toEqual({ incremental: 0, scanned: 2, fallback: 0, small: 0 });
  });

  test("Python's default separators (', ' and ': '), an empty array, 0 and the largest int32 are read", () => {
    const reader = new EngineAnswerReader(undefined, 0);
    expectSameAsJsonParse(reader, '{"choices": [{"message": {"content": "x"}}], "prompt_token_ids": [1, 2,  3 ,4]}', null);
    expectSameAsJsonParse(reader, '{"choices":[],"prompt_token_ids":[]}', null);
    expectSameAsJsonParse(reader, '{"prompt_token_ids":[0,10,2147483647],"choices":[]}', null);
    expect(reader.stats.scanned).toBe(3);
    expect(reader.stats.fallback).toBe(0);
  });

  test('anything the scanner does not own falls back to JSON.parse with the same result or the same SyntaxError', () => {
    const reader = new EngineAnswerReader(undefined, 0);
    const cases = [
      '{"choices":[]}', // no key
      '{"prompt_token_ids":[1,2],"choices":[],"prompt_token_ids":[3]}', // duplicate key: the last wins
      '{"choices":[{"prompt_token_ids":[1]}],"prompt_token_ids":[2]}', // both places
      '{"meta_info":{"prompt_token_ids":[1,2]},"choices":[]}', // neither the top level nor choices[0]
      '{"prompt_token_ids":[1.5,2],"choices":[]}', // fraction
      '{"prompt_token_ids":[2147483648],"choices":[]}', // above int32
      '{"prompt_token_ids":[[1],[2]],"choices":[]}', // nested
      '{"prompt_token_ids":null,"choices":[]}', // not an array
      '{"prompt_token_ids":["1"],"choices":[]}', // strings
      '{"message":"the text \\"prompt_token_ids\\":[1,2] in a string","choices":[]}', // only inside a string
    ];
    for (const text of cases) expectSameAsJsonParse(reader, text, null);
    expect(reader.stats.scanned).toBe(0);
    // Read whole by JSON.parse, which gives int32 integers here: usable ids, so they count as read in full.
    for (const text of ['{"prompt_token_ids":[-1,2],"choices":[]}', '{"prompt_token_ids":[1e3],"choices":[]}']) expectSameAsJsonParse(reader, text, null);
    expect(reader.stats.scanned).toBe(2);
  });

  test('invalid JSON throws the SyntaxError JSON.parse throws: a leading zero, a trailing comma, a cut answer, garbage around the array', () => {
    const reader = new EngineAnswerReader(undefined, 0);
    for (const text of [
      '{"prompt_token_ids":[01,2],"choices":[]}',
      '{"prompt_token_ids":[1,2,],"choices":[]}',
      '{"prompt_token_ids":[1,,2],"choices":[]}',
      '{"prompt_token_ids":[1,2],"choices":[',
      '{"prompt_token_ids":[1,2]"choices":[]}',
      '{"prompt_token_ids":[1 2],"choices":[]}',
    ]) {
      expectSameAsJsonParse(reader, text, null);
    }
  });

  test('invalid UTF-8 outside the array is replaced by U+FFFD, as Response.text() does', () => {
    const reader = new EngineAnswerReader(undefined, 0);
    const head = bytesOf('{"choices":[{"message":{"content":"a');
    const tail = bytesOf('b"}}],"prompt_token_ids":[1,2]}');
    const bytes = new Uint8Array([...head, 0xff, ...tail]);
    const value = reader.parse(bytes, null) as Json;
    expect(value.prompt_token_ids).toEqual(Int32Array.from([1, 2]));
    expect({ ...value, prompt_token_ids: [1, 2] }).toEqual(JSON.parse(new TextDecoder().decode(bytes)));
  });
});

describe("EngineAnswerReader reuses a session's previous prompt ids", () => {
  test('a prompt that extends the previous one is read incrementally and is exactly the JSON.parse result', () => {
    const reader = new EngineAnswerReader(undefined, 0);
    let ids = Array.from({ length: 3000 }, (_, i) => (i * 31) % 50_000);
    for (let turn = 0; turn < 20; turn++) {
      expectSameAsJsonParse(reader, vllmAnswer(ids, `turn ${turn}`));
      ids = [...ids, 7, 8, ...Array.from({ length: 40 }, (_, i) => (turn * 100 + i) % 50_000)];
    }
    expect(reader.stats).toEqual({ incremental: 19, scanned: 1, fallback: 0, small: 0 });
  });

  test('the same prompt again, a prompt that changed in the middle, a shorter one and one whose last id grew are all exact', () => {
    const reader = new EngineAnswerReader(undefined, 0);
    const base = Array.from({ length: 1000 }, (_, i) => i + 1);
    expectSameAsJsonParse(reader, vllmAnswer(base));
    expectSameAsJsonParse(reader, vllmAnswer(base)); // identical: incremental, empty tail
    const changed = base.slice();
    changed[500] = 99_999;
    expectSameAsJsonParse(reader, vllmAnswer(changed)); // diverges: full scan
    expectSameAsJsonParse(reader, vllmAnswer(changed.slice(0, 10))); // shorter ([1..10]): full scan
    // [1..10] → [1..9, 105]: the old digits are a byte prefix but not an id prefix (no comma follows them)
    expectSameAsJsonParse(reader, vllmAnswer([...changed.slice(0, 9), 105]));
    expect(reader.stats.incremental).toBe(1);
    expect(reader.stats.scanned).toBe(4);
  });

  test('sessions do not share ids', () => {
    const reader = new EngineAnswerReader(undefined, 0);
    reader.parse(bytesOf(vllmAnswer([1, 2, 3])), 'a');
    expect((reader.parse(bytesOf(vllmAnswer([5, 6])), 'b') as { prompt_token_ids: Int32Array }).prompt_token_ids).toEqual(Int32Array.from([5, 6]));
    expect((reader.parse(bytesOf(vllmAnswer([1, 2, 3, 4])), 'a') as { prompt_token_ids: Int32Array }).prompt_token_ids).toEqual(Int32Array.from([1, 2, 3, 4]));
    expect(reader.stats.incremental).toBe(1);
  });

  test('randomised sessions (grow, repeat, edit, truncate) always equal JSON.parse', () => {
    const reader = new EngineAnswerReader(64 * 1024, 0); // small budget: sessions are evicted and rescanned too
    let seed = 12345;
    const rand = (n: number) => {
      seed = (seed * 1_103_515_245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const sessions = new Map<string, number[]>();
    for (let step = 0; step < 400; step++) {
      const id = `s${rand(6)}`;
      let ids = sessions.get(id) ?? [];
      const op = rand(10);
      if (op < 6) ids = [...ids, ...Array.from({ length: 1 + rand(50) }, () => rand(200_000))];
      else if (op === 6 && ids.length > 0) ids = ids.map((v, i) => (i === rand(ids.length) ? v + 1 : v));
      else if (op === 7) ids = ids.slice(0, rand(ids.length + 1));
      sessions.set(id, ids);
      expectSameAsJsonParse(reader, rand(2) === 0 ? vllmAnswer(ids) : sglangAnswer(ids), id);
      expect(reader.residentBytes).toBeLessThanOrEqual(64 * 1024);
    }
    expect(reader.stats.incremental).toBeGreaterThan(100);
  });

  test('memory stays within the budget; forget and an over-budget answer keep nothing', () => {
    const reader = new EngineAnswerReader(20_000, 0);
    reader.parse(bytesOf(vllmAnswer(Array.from({ length: 500 }, (_, i) => i))), 'a');
    const one = reader.residentBytes;
    expect(one).toBeGreaterThan(500 * 4); // the digits and an Int32Array of the ids
    reader.parse(bytesOf(vllmAnswer(Array.from({ length: 500 }, (_, i) => i))), 'b');
    reader.parse(bytesOf(vllmAnswer(Array.from({ length: 500 }, (_, i) => i))), 'c');
    expect(reader.residentBytes).toBeLessThanOrEqual(20_000);
    reader.forget('c');
    reader.forget('b');
    reader.forget('a');
    expect(reader.residentBytes).toBe(0);
    reader.parse(bytesOf(vllmAnswer(Array.from({ length: 5000 }, (_, i) => i))), 'big');
    expect(reader.residentBytes).toBe(0);

    const none = new EngineAnswerReader(0, 0);
    none.parse(bytesOf(vllmAnswer([1, 2, 3])), 'a');
    expectSameAsJsonParse(none, vllmAnswer([1, 2, 3, 4]), 'a');
    expect(none.stats).toEqual({ incremental: 0, scanned: 2, fallback: 0, small: 0 });
  });

  test('a prompt that extends the remembered one is appended to its buffer in place until the spare room runs out', () => {
    const reader = new EngineAnswerReader(undefined, 0);
    let ids = Array.from({ length: 1000 }, (_, i) => i + 1);
    reader.parse(bytesOf(vllmAnswer(ids)), 's');
    let resident = reader.residentBytes;
    let digits = JSON.stringify(ids).length - 2;
    let grew = 0;
    for (let turn = 0; turn < 20; turn++) {
      ids = [...ids, ...Array.from({ length: 20 }, (_, i) => 5000 + turn * 20 + i)];
      expectSameAsJsonParse(reader, vllmAnswer(ids));
      const nextDigits = JSON.stringify(ids).length - 2;
      // In place: only the digits grew. Past the spare room (~25 %): a new, larger buffer.
      if (reader.residentBytes - resident !== nextDigits - digits) grew++;
      resident = reader.residentBytes;
      digits = nextDigits;
    }
    expect(reader.stats.incremental).toBe(20);
    expect(grew).toBe(1); // 1000 ids + 25 % + 64 of room holds 1,314: the 16th extension (1,320 ids) needs a new buffer
  });

  test('the Int32Arrays it hands out keep their ids while later answers of the session extend the same buffer; fallback ids are JSON.parse arrays', () => {
    const reader = new EngineAnswerReader(undefined, 0);
    const scanned = reader.parse(bytesOf(vllmAnswer([1, 2, 3])), 'a') as { prompt_token_ids: Int32Array };
    const incremental = reader.parse(bytesOf(vllmAnswer([1, 2, 3, 4])), 'a') as { prompt_token_ids: Int32Array };
    const alone = reader.parse(bytesOf(vllmAnswer([7, 8])), null) as { prompt_token_ids: Int32Array };
    const parsed = reader.parse(bytesOf('{"prompt_token_ids":[1.5],"choices":[]}'), null) as { prompt_token_ids: number[] };
    // More answers of the session append to the buffer the arrays above are views of.
    for (let n = 5; n < 40; n++) reader.parse(bytesOf(vllmAnswer(Array.from({ length: n }, (_, i) => i + 1))), 'a');
    reader.parse(bytesOf(vllmAnswer([9, 9, 9])), 'a');
    expect(incremental.prompt_token_ids.buffer).toBe(scanned.prompt_token_ids.buffer);
    expect([scanned, incremental, alone].map((a) => [...a.prompt_token_ids])).toEqual([[1, 2, 3], [1, 2, 3, 4], [7, 8]]);
    expect(parsed.prompt_token_ids).toEqual([1.5]);
  });

  test('a small answer of a session with nothing remembered is JSON.parse and is not remembered; a large one is', () => {
    const reader = new EngineAnswerReader(undefined, 4096);
    const small = vllmAnswer(Array.from({ length: 100 }, (_, i) => i));
    expect(small.length).toBeLessThan(4096);
    expectSameAsJsonParse(reader, small);
    expect([reader.stats.small, reader.residentBytes]).toEqual([1, 0]);
    const large = Array.from({ length: 2000 }, (_, i) => i);
    expectSameAsJsonParse(reader, vllmAnswer(large));
    expect(reader.stats.scanned).toBe(1);
    expect(reader.residentBytes).toBeGreaterThan(0);
    expectSameAsJsonParse(reader, vllmAnswer(large.slice(0, 10))); // remembered session: read even when small
    expect(reader.stats.small).toBe(1);
  });
});

test('an error that quotes an answer read here shows its prompt ids as the array JSON.parse gives, not as an object', () => {
  const reader = new EngineAnswerReader(undefined, 0);
  const ids = Array.from({ length: 3000 }, (_, i) => 1000 + i);
  const text = JSON.stringify({ id: 'x', prompt_token_ids: ids, choices: [] });
  const answer = reader.parse(bytesOf(text), 's') as Json;
  expect(answer.prompt_token_ids).toBeInstanceOf(Int32Array);
  expect(() => firstChoice(answer)).toThrow(`engine answer has no choices[0]: ${text.slice(0, 200)}`);
});
