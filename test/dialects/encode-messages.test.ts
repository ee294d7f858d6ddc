/**
 * encodeChatMessages keeps each non-system IR message's encoding (src/dialects/openai-chat/encode-messages.ts): the
 * same IR objects (what the decoders hand a session's next call) give the same Chat message objects with the same
 * warnings, equal to a fresh encoding of copies; other options encode again.
 */
import { expect, test } from 'bun:test';
import type { IRMessage } from '../../src/core/ir.ts';
import { encodeChatMessages, ENGINE_CHAT_ENCODING, type ChatEncodeOptions } from '../../src/dialects/openai-chat/encode-messages.ts';

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
