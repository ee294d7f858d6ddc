/**
 * Property test: for append-only conversations whose sampled turns are exactly the template's canonical tokens,
 * token mode's incremental prompt (previous prompt + sampled ids + encoded suffix of only the new messages) equals
 * the full rendering encoded from scratch, token for token, at every turn. Seeded random conversations: unicode,
 * whitespace, parallel tool calls, tool results, new user queries, arguments re-serialised by the client.
 */
import { describe, expect, test } from 'bun:test';
import { detectModelFamily, loadTokenizer, pythonJsonDumps, SessionTokenBuffers, type ChatMessage } from '../../src/tokenization/index.ts';

const tk = await loadTokenizer();
const family = detectModelFamily(tk);
const eot = tk.eosTokenIds[0]!;
const tools = [
  { type: 'function', function: { name: 'bash', description: 'Run a shell command', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } } },
  { type: 'function', function: { name: 'edit', description: 'Edit a file', parameters: { type: 'object', properties: { path: { type: 'string' }, lines: { type: 'array' } } } } },
];
const words = ['ls', 'héllo', '世界', '🎉', ' spaced  out ', 'tab\there', 'line\nbreak', '"quoted"', '{json: 1}', '12.5', 'naïve', '  ', 'end.'];

function rng(seed: number): () => number {
  let state = seed >>> 0;
  return () => ((state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

/** The text Qwen3's template renders for a non-final assistant turn without reasoning (what a canonical sample is). */
function canonicalBody(message: { content: string; calls: { name: string; args: Record<string, unknown> }[] }): string {
  let out = message.content;
  message.calls.forEach((call, i) => {
    if (i > 0 || message.content) out += '\n';
    out += `<tool_call>\n{"name": "${call.name}", "arguments": ${pythonJsonDumps(call.args)}}\n</tool_call>`;
  });
  return out;
}

describe('incremental suffix encoding equals full encoding (append-only, canonical samples)', () => {
  for (let seed = 1; seed <= 24; seed++) {
    test(`seed ${seed}`, () => {
      const random = rng(seed);
      const pick = <T,>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
      const text = (n: number) => Array.from({ length: 1 + Math.floor(random() * n) }, () => pick(words)).join(pick([' ', '', '\n']));
      const buffers = new SessionTokenBuffers(tk, family);
      const settings = { tools: random() < 0.8 ? tools : [] };
      const messages: ChatMessage[] = [];
      if (random() < 0.7) messages.push({ role: 'system', content: text(6) });
      messages.push({ role: 'user', content: text(8) });
      let callId = 0;
      for (let turn = 0; turn < 8; turn++) {
        const plan = buffers.prepare('s', messages, settings);
        expect(Array.from(plan.promptIds)).toEqual(tk.renderChatIds(messages, { tools: settings.tools }));
        expect(plan.incremental).toBe(turn > 0);
        const calls = settings.tools.length > 0 && random() < 0.7
          ? Array.from({ length: 1 + Math.floor(random() * 2) }, () => (random() < 0.5 ? { name: 'bash', args: { command: text(3) } } : { name: 'edit', args: { path: text(1), lines: [1, text(2), { k: random() < 0.5 }] } }))
          : [];
        const content = calls.length > 0 && random() < 0.5 ? '' : text(6).trim() || 'ok';
        const sampled = [...tk.encode(canonicalBody({ content, calls })), eot];
        const ids = calls.map(() => `call_${++callId}`);
        const answer: ChatMessage = { role: 'assistant', content, ...(calls.length > 0 ? { tool_calls: calls.map((c, i) => ({ id: ids[i], type: 'function', function: { name: c.name, arguments: pythonJsonDumps(c.args) } })) } : {}) };
        buffers.commit(plan, sampled, answer);
        // The client echoes the turn with its own serialisation of the arguments and its own call ids.
        messages.push({ ...answer, ...(calls.length > 0 ? { tool_calls: calls.map((c, i) => ({ id: `client_${ids[i]}`, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.args, null, i % 2 ? 1 : 0) } })) } : {}) });
        for (const id of ids) messages.push({ role: 'tool', tool_call_id: `client_${id}`, content: text(5) });
        if (calls.length === 0 || random() < 0.25) messages.push({ role: 'user', content: text(6) });
      }
      expect(buffers.stats().incremental).toBe(7);
    });
  }
});
