/**
 * encodeChatMessages keeps each non-system IR message's encoding (src/dialects/openai-chat/encode-messages.ts): the
 * same IR objects (what the decoders hand a session's next call) give the same Chat message objects with the same
 * warnings, equal to a fresh encoding of copies; other options encode again.
 */
import { expect, test } from 'bun:test';
import type { IRMessage, IRTool } from '../../src/core/ir.ts';
import { encodeChatMessages, encodeChatTools, ENGINE_CHAT_ENCODING, type ChatEncodeOptions } from '../../src/dialects/openai-chat/encode-messages.ts';

const conversation = (): IRMessage[] => [
  { role: 'system', content: [{ type: 'text', text: 'Be brief.' }] },
  { role: 'user', content: [{ type: 'text', text: 'List the files.' }] },
  { role: 'assistant', content: [{ type: 'text', text: '\n\n' }, { type: 'image', mediaType: 'image/png', data: 'AAAA' }], reasoning: { text: 'call ls' }, toolCalls: [{ id: 'c1', name: 'ls', arguments: '{}' }] },
  { role: 'tool', toolCallId: 'c1', name: 'ls', content: [{ type: 'text', text: 'a.py' }, { type: 'image', mediaType: 'image/png', data: 'BBBB' }] },
];

test('the same IR messages give the same Chat objects and warnings, equal to a fresh encoding; other options encode again', () => {
  const messages = conversation();
  const placeholder: ChatEncodeOptions = { ...ENGINE_CHAT_ENCODING, toolResultImages: 'placeholder' };
  const first = encodeChatMessages(messages, placeholder);
  const again = encodeChatMessages(messages, { ...placeholder });
  const fresh = encodeChatMessages(structuredClone(messages), placeholder);
  expect(again).toEqual(fresh);
  expect(JSON.stringify(again)).toBe(JSON.stringify(fresh));
  expect(again.warnings.map((w) => w.code)).toEqual(['assistant-image-dropped', 'tool-result-image']);
  for (let i = 1; i < again.messages.length; i++) expect(again.messages[i]).toBe(first.messages[i]!);
  // Another reasoning field and image handling: encoded afresh, not the kept objects.
  const other = encodeChatMessages(messages, { ...placeholder, reasoningField: 'reasoning', toolResultImages: 'parts' });
  expect(other).toEqual(encodeChatMessages(structuredClone(messages), { ...placeholder, reasoningField: 'reasoning', toolResultImages: 'parts' }));
  expect(other.messages[2]).toHaveProperty('reasoning', 'call ls');
  expect(other.messages[2]).not.toHaveProperty('reasoning_content');
  expect(other.warnings.map((w) => w.code)).toEqual(['assistant-image-dropped']);
  expect(Array.isArray(other.messages[3]!.content)).toBe(true);
});

test('the same IR tools give the same Chat tool objects, equal to a fresh encoding; a new IR tool is encoded anew', () => {
  const tools: IRTool[] = [
    { name: 'read', description: 'Read a file.', parameters: { type: 'object', properties: { path: { type: 'string' } } }, origin: { kind: 'function' } },
    { name: 'ls', parameters: { type: 'object', properties: {} }, origin: { kind: 'function' } },
  ];
  const first = encodeChatTools(tools);
  expect(first).toEqual([
    { type: 'function', function: { name: 'read', description: 'Read a file.', parameters: tools[0]!.parameters } },
    { type: 'function', function: { name: 'ls', parameters: tools[1]!.parameters } },
  ]);
  expect(Object.keys(first[1]!.function)).toEqual(['name', 'parameters']);
  const again = encodeChatTools([tools[1]!, tools[0]!]);
  expect(again[0]).toBe(first[1]!);
  expect(again[1]).toBe(first[0]!);
  const copy = structuredClone(tools[0]!);
  const fresh = encodeChatTools([copy]);
  expect(fresh[0]).not.toBe(first[0]!);
  expect(fresh[0]).toEqual(first[0]!);
});

test('a call that shares its leading IR objects with the last call takes their encodings and warnings from its run; the rest is encoded as before', () => {
  const opts: ChatEncodeOptions = { ...ENGINE_CHAT_ENCODING, toolResultImages: 'placeholder' };
  const messages = conversation();
  const first = encodeChatMessages(messages, opts);
  // The next turn: the same objects, a fresh system message (as Anthropic's decoder builds), two new turns.
  const turn: IRMessage[] = [
    { role: 'system', content: [{ type: 'text', text: 'Be brief.' }] },
    ...messages.slice(1),
    { role: 'assistant', content: [{ type: 'text', text: 'again' }], toolCalls: [{ id: 'c2', name: 'ls', arguments: '{}' }] },
    { role: 'tool', toolCallId: 'c2', name: 'ls', content: [{ type: 'image', mediaType: 'image/png', data: 'CCCC' }] },
  ];
  const second = encodeChatMessages(turn, opts);
  expect(second).toEqual(encodeChatMessages(structuredClone(turn), opts));
  for (let i = 1; i < first.messages.length; i++) expect(second.messages[i]).toBe(first.messages[i]!);
  expect(second.warnings.map((w) => w.code)).toEqual(['assistant-image-dropped', 'tool-result-image', 'tool-result-image']);
  // An edited message in the middle: the messages after it are still the same objects, each from its own entry.
  const edited: IRMessage[] = [turn[0]!, turn[1]!, { role: 'assistant', content: [{ type: 'text', text: 'other' }] }, ...turn.slice(3)];
  const third = encodeChatMessages(edited, opts);
  expect(third).toEqual(encodeChatMessages(structuredClone(edited), opts));
  expect(third.messages[3]).toBe(second.messages[3]!);
  expect(third.warnings.map((w) => w.code)).toEqual(['tool-result-image', 'tool-result-image']);
  // Other options: nothing is taken from the run.
  const parts = encodeChatMessages(turn, { ...opts, toolResultImages: 'parts' });
  expect(parts).toEqual(encodeChatMessages(structuredClone(turn), { ...opts, toolResultImages: 'parts' }));
  expect(Array.isArray(parts.messages[3]!.content)).toBe(true);
});

test('a session that extends its last call gets, in every system placement, what a fresh encoding gives; the lists it returns are its own', () => {
  const system = (text: string): IRMessage => ({ role: 'system', content: [{ type: 'text', text }, { type: 'image', mediaType: 'image/png', data: 'SSSS' }] });
  for (const systemMessages of ['merge', 'in-place', 'keep'] as const) {
    const opts: ChatEncodeOptions = { ...ENGINE_CHAT_ENCODING, systemMessages, toolResultImages: 'placeholder' };
    const history: IRMessage[] = conversation().slice(1);
    const calls: { messages: IRMessage[]; result: ReturnType<typeof encodeChatMessages> }[] = [];
    for (let turn = 0; turn < 5; turn++) {
      // Each call: a fresh leading system message (as Anthropic's decoder builds it), the same history objects, and
      // from turn 2 on a system message after a user turn (Claude Code's mid-conversation reminder).
      const messages = [system('Be brief.'), ...history];
      const result = encodeChatMessages(messages, opts);
      expect(result).toEqual(encodeChatMessages(structuredClone(messages), opts));
      calls.push({ messages, result });
      // Keep sends the system message's image; otherwise only the user image (from the call of turn 3 on) is not text.
      expect(result.nonText).toBe(systemMessages === 'keep' || turn >= 3);
      // The caller owns what it got: changing it changes no later call.
      result.messages.push({ role: 'user', content: 'not sent' });
      result.warnings.push({ code: 'x', message: 'not a warning' });
      history.push({ role: 'user', content: [{ type: 'text', text: `turn ${turn}` }] });
      if (turn === 1) history.push(system('Reminder.'));
      // A user image from turn 2 on: the encoder says so without the caller walking the messages.
      if (turn === 2) history.push({ role: 'user', content: [{ type: 'text', text: 'see' }, { type: 'image', mediaType: 'image/png', data: 'UUUU' }] });
      history.push({ role: 'assistant', content: [{ type: 'text', text: `answer ${turn}` }, { type: 'image', mediaType: 'image/png', data: 'AAAA' }] });
    }
    const last = calls.at(-1)!.result;
    const roles = last.messages.slice(0, -1).map((m) => m.role);
    const systemContents = last.messages.filter((m) => m.role === 'system').map((m) => m.content);
    if (systemMessages === 'merge') expect(systemContents).toEqual(['Be brief.\n\nReminder.']);
    else if (systemMessages === 'in-place') expect(systemContents).toEqual(['Be brief.', 'Reminder.']);
    else expect(systemContents.map((c) => (Array.isArray(c) ? c.map((p) => p.type).join(',') : c))).toEqual(['text,image_url', 'text,image_url']);
    // A later system message stays after the user turn it followed, unless merged.
    const reminderAt = last.messages.findIndex((m) => m.role === 'system' && m !== last.messages[0]);
    if (systemMessages !== 'merge') expect(last.messages[reminderAt - 1]).toMatchObject({ role: 'user', content: 'turn 1' });
    expect(roles[0]).toBe('system');
    expect(last.warnings.slice(0, -1).filter((w) => w.code === 'system-image-dropped').length).toBe(systemMessages === 'keep' ? 0 : 1);
    expect(last.warnings.slice(0, -1).filter((w) => w.code === 'assistant-image-dropped').length).toBe(5);
    expect(last.messages.some((m) => Array.isArray(m.content) && m.content.some((p) => p.type === 'image_url'))).toBe(true);
  }
});
