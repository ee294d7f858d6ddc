/**
 * TaggedTextSplitter (src/engines/token-stream.ts): token mode's streamed reasoning / content split agrees with the
 * whole-answer parse the record keeps (parseQwen3Output), however the text arrives in pieces, so the stream never
 * diverges from the record (DeltaEmitter.finish would warn `stream-diverged`).
 */
import { expect, test } from 'bun:test';
import type { IRResponse } from '../../src/core/ir.ts';
import { DeltaEmitter } from '../../src/engines/delta-emitter.ts';
import { TaggedTextSplitter } from '../../src/engines/token-stream.ts';
import type { EngineStreamEvent } from '../../src/engines/types.ts';
import { parseQwen3Output } from '../../src/tokenization/parsers.ts';

/** The record's response for `text`, as token mode builds its reasoning and content from the parse. */
function recorded(text: string, promptOpenedThinking: boolean): IRResponse {
  const parsed = parseQwen3Output(text, { promptOpenedThinking });
  return {
    id: 'r', model: 'm', content: parsed.content === '' ? [] : [{ type: 'text', text: parsed.content }], toolCalls: [],
    ...(parsed.reasoning === null ? {} : { reasoning: { text: parsed.reasoning } }),
    finishReason: { unified: 'stop' }, warnings: [], createdAt: 0, usage: { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, reasoningTokens: 0 },
  };
}

/** Stream `pieces` through the splitter; what was sent before finish, what after, and finish's warnings. */
function stream(pieces: string[], promptOpenedThinking: boolean) {
  const events: EngineStreamEvent[] = [];
  const emitter = new DeltaEmitter((e) => events.push(e));
  const splitter = new TaggedTextSplitter(emitter, promptOpenedThinking);
  for (const piece of pieces) splitter.push(piece);
  const live = events.length;
  const warnings = emitter.finish(recorded(pieces.join(''), promptOpenedThinking));
  const join = (type: string, upTo = events.length) => events.slice(0, upTo).flatMap((e) => (e.type === type && 'text' in e ? [e.text] : [])).join('');
  return { warnings, reasoning: join('reasoning-delta'), text: join('text-delta'), liveReasoning: join('reasoning-delta', live) };
}

const CASES: [string, boolean][] = [
  ['<think>\nplan the listing\n</think>\n\nHere it is.', false],
  ['Plain answer, no thinking.', false],
  ['  <think>indented open</think>after', false],
  ['still thinking\n</think>\n\nanswer', true],
  // The prompt opened the block and the model opens it again: the re-opening tag is dropped, not streamed.
  ['<think>\nre-opened\n</think>\n\nanswer', true],
  ['\n<think>re-opened after a newline</think>answer', true],
  ['a literal <think> tag inside</think>answer', true],
  ['cut off while thinking', true],
];

for (const [text, opened] of CASES) {
  test(`${opened ? 'prompt-opened' : 'text-opened'} ${JSON.stringify(text)}: every two-piece split streams what the record holds`, () => {
    const whole = recorded(text, opened);
    for (let cut = 0; cut <= text.length; cut++) {
      const out = stream([text.slice(0, cut), text.slice(cut)], opened);
      expect({ cut, warnings: out.warnings }).toEqual({ cut, warnings: [] });
      expect(out.reasoning).toBe(whole.reasoning?.text ?? '');
      expect(out.text).toBe(whole.content.map((c) => (c.type === 'text' ? c.text : '')).join(''));
    }
    // One character at a time, as a slow tokenizer might decode it.
    const out = stream([...text], opened);
    expect(out.warnings).toEqual([]);
  });
}

test('a re-opening <think> after a prompt-opened block is not streamed as reasoning before the record drops it', () => {
  const out = stream(['<think>', '\nfirst thought', '</think>answer'], true);
  expect(out.liveReasoning.includes('<think>')).toBe(false);
  expect(out.reasoning).toBe('\nfirst thought');
});
