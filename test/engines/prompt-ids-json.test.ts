/**
 * Token mode's request body with the prompt ids written incrementally (src/engines/prompt-ids-json.ts), and the
 * engine's echo of them compared as bytes (answer-json.ts parseEchoedAnswer): the bytes are always exactly
 * JSON.stringify of the body, and an echo is taken as the sent array only when it is byte for byte what was sent.
 */
import { describe, expect, test } from 'bun:test';
import { appendInt32, int32ToArray, pairInt32 } from '../../src/core/int32-twin.ts';
import { parseEchoedAnswer } from '../../src/engines/answer-json.ts';
import { PromptIdsJson } from '../../src/engines/prompt-ids-json.ts';
import { vllmTokenBackend } from '../../src/engines/token-backends.ts';

const text = new TextDecoder();
const utf8 = new TextEncoder();

/** `ids` extended by `added`, paired with a twin that extends `twin` (as token mode's buffers build prompts). */
function extend(twin: Int32Array | undefined, added: number[]): { ids: number[]; twin: Int32Array } {
  const next = appendInt32(twin, added)!;
  const ids = int32ToArray(next);
  pairInt32(ids, next);
  return { ids, twin: next };
}

const rest = { model: 'm', max_tokens: 16, stop_token_ids: [151645], stream: false };

describe('PromptIdsJson', () => {
  test('each body is JSON.stringify({prompt, ...rest}); a prompt that extends the session\'s last one writes only its new ids', () => {
    const json = new PromptIdsJson();
    let prompt = extend(undefined, [151644, 872, 198, 9707, 0, 2147483647]);
    for (let turn = 0; turn < 6; turn++) {
      const sent = json.body('s', 'prompt', prompt.ids, rest);
      expect(text.decode(sent.bytes)).toBe(JSON.stringify({ prompt: prompt.ids, ...rest }));
      expect(text.decode(sent.digits)).toBe(prompt.ids.join(','));
      prompt = extend(prompt.twin, turn % 2 === 0 ? [100 + turn, 200 + turn, 151645] : []);
    }
    expect(json.stats).toEqual({ incremental: 5, full: 1 });
    expect(json.residentBytes).toBeGreaterThan(0);
  });

  test('prompts held as Int32Arrays (as token mode plans them) are written as JSON.stringify of their values, incrementally', () => {
    const json = new PromptIdsJson();
    let prompt = appendInt32(undefined, [151644, 872, 198, 0, 2147483647])!;
    for (let turn = 0; turn < 5; turn++) {
      const sent = json.body('s', 'input_ids', prompt, rest);
      expect(text.decode(sent.bytes)).toBe(JSON.stringify({ input_ids: Array.from(prompt), ...rest }));
      prompt = appendInt32(prompt, turn % 2 === 0 ? [100 + turn, 151645] : [])!;
    }
    expect(json.stats).toEqual({ incremental: 4, full: 1 });
    // An Int32Array that does not extend the session's last prompt is written in full, exactly.
    const other = Int32Array.from([7, 8, 9]);
    expect(text.decode(json.body('s', 'input_ids', other, {}).bytes)).toBe('{"input_ids":[7,8,9]}');
    expect(json.stats.full).toBe(2);
  });

  test('other sessions, a prompt that does not extend the last one, ids without a twin and a zero budget are written in full', () => {
    const json = new PromptIdsJson();
    const base = extend(undefined, [1, 2, 3, 4]);
    json.body('a', 'input_ids', base.ids, rest);
    const edited = extend(undefined, [1, 2, 9, 4, 5]); // same length prefix, other values
    const plain = [1, 2, 3, 4, 5]; // no twin
    for (const [session, ids] of [['b', base.ids], ['a', edited.ids], ['a', plain]] as const) {
      const sent = json.body(session, 'input_ids', ids, rest);
      expect(JSON.parse(text.decode(sent.bytes))).toEqual({ input_ids: ids, ...rest });
    }
    expect(json.stats).toEqual({ incremental: 0, full: 4 });
    // A sibling of an extended prompt (two turns planned from one buffer) is exact too.
    const a = extend(base.twin, [10, 11]);
    const b = extend(base.twin, [20]);
    json.body('c', 'prompt', base.ids, {});
    expect(text.decode(json.body('c', 'prompt', a.ids, {}).bytes)).toBe(JSON.stringify({ prompt: a.ids }));
    expect(text.decode(json.body('c', 'prompt', b.ids, {}).bytes)).toBe(JSON.stringify({ prompt: b.ids }));
    const none = new PromptIdsJson(0);
    none.body('a', 'prompt', base.ids, rest);
    const again = none.body('a', 'prompt', extend(base.twin, [5]).ids, rest);
    expect(JSON.parse(text.decode(again.bytes)).prompt).toEqual([1, 2, 3, 4, 5]);
    expect(none.stats).toEqual({ incremental: 0, full: 2 });
    json.forget('c');
    json.body('c', 'prompt', extend(b.twin, [1]).ids, {});
    expect(json.stats.incremental).toBe(1);
  });
});

describe('parseEchoedAnswer', () => {
  const answer = (echo: string) => `{"id":"cmpl-1","choices":[{"index":0,"text":"hi","prompt_token_ids":${echo},"token_ids":[5,6],"logprobs":{"token_logprobs":[-0.5,-0.25]},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`;
  const ids = [11, 22, 33];
  const sent = utf8.encode('11,22,33');

  test('an echo byte-equal to what was sent is the sent array itself; the rest is JSON.parse', () => {
    const body = parseEchoedAnswer(utf8.encode(answer('[11,22,33]')), sent, ids) as { choices: { prompt_token_ids: unknown }[] };
    expect(body.choices[0]!.prompt_token_ids).toBe(ids);
    expect(body).toEqual(JSON.parse(answer('[11,22,33]')));
    expect(vllmTokenBackend.read(body, ids).problems).toEqual([]);
  });

  test('another spacing, other ids or an odd shape are parsed in full, and a differing echo is still reported', () => {
    for (const echo of ['[11, 22, 33]', '[11,22,34]', '[11,22]', '[11,22,33,44]']) {
      const body = parseEchoedAnswer(utf8.encode(answer(echo)), sent, ids) as { choices: { prompt_token_ids: unknown }[] };
      expect(body).toEqual(JSON.parse(answer(echo)));
      expect(body.choices[0]!.prompt_token_ids).not.toBe(ids);
    }
    const differing = parseEchoedAnswer(utf8.encode(answer('[11,22,34]')), sent, ids);
    expect(vllmTokenBackend.read(differing, ids).problems.join(' ')).toContain('differ from the 3 prompt ids sent');
    const twice = `{"prompt_token_ids":[11,22,33],"x":{"prompt_token_ids":[1]}}`;
    expect(parseEchoedAnswer(utf8.encode(twice), sent, ids)).toEqual(JSON.parse(twice));
    const none = '{"output_ids":[5,6],"meta_info":{"prompt_tokens":3}}'; // SGLang echoes nothing
    expect(parseEchoedAnswer(utf8.encode(none), sent, ids)).toEqual(JSON.parse(none));
    expect(() => parseEchoedAnswer(utf8.encode(answer('[11,22,33]').slice(0, -1)), sent, ids)).toThrow(SyntaxError);
  });

  test('an Int32Array prompt (token mode): an equal echo is that Int32Array, a differing one is reported', () => {
    const prompt = Int32Array.from(ids);
    const equal = parseEchoedAnswer(utf8.encode(answer('[11,22,33]')), sent, prompt) as { choices: { prompt_token_ids: unknown }[] };
    expect(equal.choices[0]!.prompt_token_ids).toBe(prompt);
    expect(vllmTokenBackend.read(equal, prompt).problems).toEqual([]);
    for (const echo of ['[11,22,34]', '[11,22]']) {
      const differing = parseEchoedAnswer(utf8.encode(answer(echo)), sent, prompt);
      expect(vllmTokenBackend.read(differing, prompt).problems.join(' ')).toContain('differ from the 3 prompt ids sent');
    }
    // An echo the engine's JSON gives as an equal array, other spacing: no problem.
    expect(vllmTokenBackend.read(parseEchoedAnswer(utf8.encode(answer('[11, 22, 33]')), sent, prompt), prompt).problems).toEqual([]);
  });
});
