/**
 * Token buffers under side requests: an exact repeat refreshes its buffer, eviction keeps the main conversation,
 * and a full re-render reuses the session's own sampled ids (also where the harness dropped the reasoning).
 */
import { describe, expect, test } from 'bun:test';
import { detectModelFamily, loadTokenizer, SessionTokenBuffers, type ChatMessage } from '../../src/tokenization/index.ts';

const tk = await loadTokenizer();
const family = detectModelFamily(tk);
const eot = tk.eosTokenIds[0]!;
const tools = [{ type: 'function', function: { name: 'bash', description: 'Run a shell command', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } } }];
const main = { tools };
const side = { tools: [] };

/** Sample `text` as its canonical ids + end of turn; commit it; return the assistant message the client echoes. */
function answer(buffers: SessionTokenBuffers, messages: ChatMessage[], settings: { tools: typeof tools | never[] }, text: string, sampled?: number[]): { plan: ReturnType<SessionTokenBuffers['prepare']>; message: ChatMessage } {
  const plan = buffers.prepare('s', messages, settings);
  const message: ChatMessage = { role: 'assistant', content: text };
  buffers.commit(plan, [...(sampled ?? tk.encode(text)), eot], message);
  return { plan, message };
}

function mainTurns(buffers: SessionTokenBuffers, messages: ChatMessage[], count: number): void {
  for (let i = 0; i < count; i++) {
    const { message } = answer(buffers, messages, main, `step ${messages.length}`);
    messages.push(message, { role: 'user', content: `next ${i}` });
  }
}

describe('side requests never push the main conversation out', () => {
  for (const repeats of [1, 8, 20]) {
    test(`${repeats} repeat(s) of a side request: one side buffer, the next main turn is incremental`, () => {
      const buffers = new SessionTokenBuffers(tk, family);
      const messages: ChatMessage[] = [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'fix the bug' }];
      mainTurns(buffers, messages, 3);
      const sideMessages: ChatMessage[] = [{ role: 'system', content: 'You detect loops. Answer JSON.' }, { role: 'user', content: 'history…' }];
      for (let r = 0; r < repeats; r++) answer(buffers, sideMessages, side, `{"confidence": ${r}}`);
      const stats = buffers.stats();
      expect(stats.repeats).toBe(repeats - 1);
      expect(stats.evicted).toBe(0);
      const next = buffers.prepare('s', messages, main);
      expect(next.incremental).toBe(true);
    });
  }

  test('more distinct side conversations than buffers: the main one (most messages) is kept', () => {
    const buffers = new SessionTokenBuffers(tk, family, { maxContextsPerSession: 3 });
    const messages: ChatMessage[] = [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'fix the bug' }];
    mainTurns(buffers, messages, 2);
    for (let k = 0; k < 10; k++) answer(buffers, [{ role: 'system', content: `side ${k}` }, { role: 'user', content: 'q' }], side, 'a');
    expect(buffers.stats().evicted).toBe(8);
    expect(buffers.prepare('s', messages, main).incremental).toBe(true);
  });
});

describe('full re-render reuses the session\'s sampled ids', () => {
  test('after a settings change, matched assistant turns keep their sampled ids and their reasoning', () => {
    const buffers = new SessionTokenBuffers(tk, family);
    const messages: ChatMessage[] = [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'fix the bug' }];
    // A non-canonical tokenisation of the sampled text (one id per character), with reasoning.
    const sampledText = '<think>\nlook first\n</think>\n\nhello';
    const sampled = [...sampledText].flatMap((ch) => tk.encode(ch));
    expect(sampled).not.toEqual(tk.encode(sampledText));
    const plan = buffers.prepare('s', messages, main);
    buffers.commit(plan, [...sampled, eot], { role: 'assistant', content: 'hello', reasoning_content: 'look first' });
    // The harness echoes the turn without its reasoning, and changes its tool list (a reset: settings-changed).
    messages.push({ role: 'assistant', content: 'hello' }, { role: 'user', content: 'go on' });
    const reset = buffers.prepare('s', messages, { tools: [] });
    expect(reset.reason).toBe('settings-changed');
    expect(reset.reusedTurns).toBe(1);
    const first = tk.renderChatIds(messages.slice(0, 2), { tools: [], addGenerationPrompt: true });
    expect(Array.from(reset.promptIds.slice(0, first.length))).toEqual(first);
    expect(Array.from(reset.promptIds.slice(first.length, first.length + sampled.length + 1))).toEqual([...sampled, eot]);
    expect(tk.decode(reset.promptIds)).toContain('look first');
    expect(tk.decode(reset.promptIds).endsWith('<|im_start|>assistant\n')).toBe(true);
    expect(buffers.stats().reusedTurns).toBe(1);
  });

  test('a session without sampled turns, or whose turns do not match, gets the plain full render', () => {
    const buffers = new SessionTokenBuffers(tk, family);
    const messages: ChatMessage[] = [{ role: 'user', content: 'q' }, { role: 'assistant', content: 'not ours' }, { role: 'user', content: 'q2' }];
    const plan = buffers.prepare('s', messages, main);
    expect(plan.reusedTurns).toBe(0);
    expect(Array.from(plan.promptIds)).toEqual(tk.renderChatIds(messages, { tools, addGenerationPrompt: true }));
  });
});

describe('prompts are Int32Arrays (no JS array per turn) that later turns never write over (core/int32-twin.ts)', () => {
  /** Each prompt's ids when it was planned, to compare with what it holds after later turns extended the buffer. */
  const planned = new Map<object, number[]>();
  const expectTwin = (ids: ArrayLike<number>) => {
    expect(ids).toBeInstanceOf(Int32Array);
    const before = planned.get(ids as object);
    if (before === undefined) planned.set(ids as object, Array.from(ids));
    else expect(Array.from(ids)).toEqual(before);
  };

  test('full, incremental and repeated prompts, and two turns planned from one buffer, each keep their ids', () => {
    const buffers = new SessionTokenBuffers(tk, family);
    const messages: ChatMessage[] = [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'fix the bug' }];
    const first = answer(buffers, messages, main, 'looking');
    expect(first.plan.incremental).toBe(false);
    expectTwin(first.plan.promptIds);
    messages.push(first.message, { role: 'user', content: 'go on' });
    const second = answer(buffers, messages, main, 'done');
    expect(second.plan.incremental).toBe(true);
    expectTwin(second.plan.promptIds);
    messages.push(second.message);
    // Two continuations planned from the same buffer before either is committed: the second must not write over the first.
    const a = buffers.prepare('s', [...messages, { role: 'user', content: 'branch a' }], main);
    const b = buffers.prepare('s', [...messages, { role: 'user', content: 'branch b, longer than a' }], main);
    expect(a.incremental && b.incremental).toBe(true);
    expectTwin(a.promptIds);
    expectTwin(b.promptIds);
    const shared = second.plan.promptIds.length;
    expect(Array.from(a.promptIds.slice(0, shared))).toEqual(Array.from(b.promptIds.slice(0, shared)));
    expect(Array.from(a.promptIds.slice(shared))).not.toEqual(Array.from(b.promptIds.slice(shared)));
    buffers.commit(a, [...tk.encode('answer a'), eot], { role: 'assistant', content: 'answer a' });
    buffers.commit(b, [...tk.encode('answer b'), eot], { role: 'assistant', content: 'answer b' });
    const nextA = buffers.prepare('s', [...messages, { role: 'user', content: 'branch a' }, { role: 'assistant', content: 'answer a' }, { role: 'user', content: 'more a' }], main);
    const nextB = buffers.prepare('s', [...messages, { role: 'user', content: 'branch b, longer than a' }, { role: 'assistant', content: 'answer b' }, { role: 'user', content: 'more b' }], main);
    for (const plan of [nextA, nextB]) {
      expect(plan.incremental).toBe(true);
      expectTwin(plan.promptIds);
    }
    expect(Array.from(nextA.promptIds.slice(0, a.promptIds.length))).toEqual(Array.from(a.promptIds));
    expect(Array.from(nextB.promptIds.slice(0, b.promptIds.length))).toEqual(Array.from(b.promptIds));
    for (const plan of [first.plan, second.plan, a, b]) expectTwin(plan.promptIds);
    // A retry of the last request is the same prompt again, with its twin.
    const retry = buffers.prepare('s', [...messages, { role: 'user', content: 'branch b, longer than a' }], main);
    expect(retry.promptIds).toBe(b.promptIds);
    expectTwin(retry.promptIds);
  });
});
