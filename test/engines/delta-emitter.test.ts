/** DeltaEmitter (src/engines/delta-emitter.ts): what a true stream sends, reconciled with the recorded response. */
import { expect, test } from 'bun:test';
import type { IRResponse } from '../../src/core/ir.ts';
import { DeltaEmitter } from '../../src/engines/delta-emitter.ts';
import type { EngineStreamEvent } from '../../src/engines/types.ts';

function response(fields: Partial<IRResponse>): IRResponse {
  return {
    id: 'r', model: 'm', content: [], toolCalls: [], finishReason: { unified: 'stop' }, warnings: [], createdAt: 0,
    usage: { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, reasoningTokens: 0 }, ...fields,
  };
}

function run(feed: (e: DeltaEmitter) => void, final: IRResponse, opts = {}) {
  const events: EngineStreamEvent[] = [];
  const emitter = new DeltaEmitter((e) => events.push(e), opts);
  feed(emitter);
  const warnings = emitter.finish(final);
  return { events, warnings, text: events.flatMap((e) => (e.type === 'text-delta' ? [e.text] : [])).join('') };
}

test('whitespace-only text before a tool call is never sent', () => {
  const { events, warnings } = run((e) => {
    e.text('\n\n');
    e.toolStart(0, 'call_1', 'Bash');
    e.toolDelta(0, '{"command":"ls"}');
  }, response({ toolCalls: [{ id: 'call_1', name: 'Bash', arguments: '{"command":"ls"}' }] }));
  expect(events.map((e) => e.type)).toEqual(['tool-call-start', 'tool-call-delta', 'tool-call-end']);
  expect(warnings).toEqual([]);
});

test('text with trailing whitespace before a tool call keeps it (the record does)', () => {
  const { text, warnings } = run((e) => {
    e.text('Listing ');
    e.toolStart(0, 'c', 'Bash');
  }, response({ content: [{ type: 'text', text: 'Listing ' }], toolCalls: [{ id: 'c', name: 'Bash', arguments: '{}' }] }));
  expect(text).toBe('Listing ');
  expect(warnings).toEqual([]);
});

test('token mode: leading and trailing newlines are not sent, stop strings cut the text', () => {
  const { text, warnings } = run((e) => {
    for (const piece of ['\n\nalpha ', 'bravo ST', 'OP charlie', '\n']) e.text(piece);
  }, response({ content: [{ type: 'text', text: 'alpha bravo ' }], finishReason: { unified: 'stop', stopSequence: 'STOP' } }), { trimLeadingNewlines: true, stops: ['STOP'] });
  expect(text).toBe('alpha bravo ');
  expect(warnings).toEqual([]);
});

test('tool calls the stream did not carry are sent at the end; empty arguments become the recorded {}', () => {
  const { events } = run((e) => {
    e.toolStart(0, 'a', 'Read');
  }, response({ toolCalls: [{ id: 'a', name: 'Read', arguments: '{}' }, { id: 'b', name: 'Bash', arguments: '{"command":"ls"}' }] }));
  expect(events).toEqual([
    { type: 'tool-call-start', index: 0, id: 'a', name: 'Read' },
    { type: 'tool-call-delta', index: 0, argumentsDelta: '{}' },
    { type: 'tool-call-end', index: 0 },
    { type: 'tool-call-start', index: 1, id: 'b', name: 'Bash' },
    { type: 'tool-call-delta', index: 1, argumentsDelta: '{"command":"ls"}' },
    { type: 'tool-call-end', index: 1 },
  ]);
});

test('a stream that sent what the record does not contain is flagged', () => {
  const { warnings } = run((e) => e.text('hello'), response({ content: [{ type: 'text', text: 'goodbye' }] }));
  expect(warnings.map((w) => w.code)).toEqual(['stream-diverged']);
});

test('what was held back goes out once: from the record at the end, never again when the block closes', () => {
  // Chat mode: trailing whitespace the record keeps, and a whitespace-only answer.
  for (const [pieces, final] of [[['Hello', ' world', '\n'], 'Hello world\n'], [['  ', '\n'], '  \n'], [['Hello', '\n\n'], 'Hello']] as const) {
    const { text, warnings } = run((e) => { for (const piece of pieces) e.text(piece); }, response({ content: [{ type: 'text', text: final }] }));
    expect({ pieces, text, warnings }).toEqual({ pieces, text: final, warnings: [] });
  }
  // Token mode with a stop string: the look-behind tail (stop length - 1 characters) is held, then sent from the record.
  const cut = run((e) => { for (const piece of ['Hello', ' world']) e.text(piece); }, response({ content: [{ type: 'text', text: 'Hello world' }] }), { trimLeadingNewlines: true, stops: ['STOPSTOP'] });
  expect(cut).toMatchObject({ text: 'Hello world', warnings: [] });
  // Reasoning: its held trailing whitespace is not sent twice either.
  const { events } = run((e) => { e.reasoning('think '); e.reasoning('more\n'); }, response({ reasoning: { text: 'think more\n' }, toolCalls: [{ id: 'c', name: 'Bash', arguments: '{}' }] }));
  expect(events.flatMap((e) => (e.type === 'reasoning-delta' ? [e.text] : [])).join('')).toBe('think more\n');
});
