/**
 * Chat mode `restoreReasoning`: an assistant turn that comes back without its reasoning (as Gemini CLI sends its
 * history) gets the reasoning of this session's own answer back before the engine renders it, so the engine's prompt
 * holds the sampled think block and prefix_merging sees a verbatim join; without the option the join is re-rendered.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { ReasoningMemory } from '../../src/proxy/reasoning-restore.ts';
import { staticSessions } from '../../src/proxy/sessions.ts';
import { SimServer } from '../../src/sim/server.ts';
import { buildTrajectory } from '../../src/trace/index.ts';
import { startTestProxy, type TestProxy } from '../support/proxy-harness.ts';
import { startPolarProxy } from '../support/polar-cli.ts';
import { openStore } from '../../src/store/index.ts';
import type { CompletionRecord } from '../../src/core/records.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let sim: SimServer;
const proxies: Record<'on' | 'off', TestProxy> = {} as never;
const script = { variants: { solve: { weight: 1, steps: [{ think: 'List the files first.', shell: 'ls' }, { think: 'Two files.', say: 'There are two files.' }] } } };

beforeAll(async () => {
  sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0, scripts: { t: script } });
  const sessions = staticSessions({ 'sess-on': { session_id: 'sess-on', task_id: 't' }, 'sess-off': { session_id: 'sess-off', task_id: 't' } });
  proxies.on = await startTestProxy({ engineUrl: sim.url, kind: 'sim', sessions, options: { restoreReasoning: true } });
  proxies.off = await startTestProxy({ engineUrl: sim.url, kind: 'sim', sessions });
});
afterAll(async () => {
  for (const p of Object.values(proxies)) await p.stop();
  await sim.stop();
});

async function twoTurns(which: 'on' | 'off') {
  return twoTurnsAt(proxies[which].url, `sess-${which}`, (key) => proxies[which].store.completions.listBySession(key));
}

async function twoTurnsAt(url: string, key: string, listRecords: (key: string) => CompletionRecord[]) {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
  const tools = [{ type: 'function' as const, function: { name: 'bash', description: 'Run a shell command', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } } }];
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'system', content: 'agent' }, { role: 'user', content: 'how many files?' }];
  const first = await client.chat.completions.create({ model: 'm', messages, tools });
  const call = first.choices[0]!.message.tool_calls![0]! as { id: string; function: { name: string; arguments: string } };
  // The harness drops the reasoning from its history.
  messages.push({ role: 'assistant', content: null, tool_calls: [{ id: call.id, type: 'function', function: call.function }] }, { role: 'tool', tool_call_id: call.id, content: 'a\nb' });
  await client.chat.completions.create({ model: 'm', messages, tools });
  const records = listRecords(key);
  const trajectory = buildTrajectory(records, { strategy: 'prefix_merging', session_id: key, task_id: 't', harness: 'test', status: 'COMPLETED' });
  return { records, trajectory };
}

test('restored: the engine saw the sampled think block, one chain, no re-rendered join', async () => {
  const { records, trajectory } = await twoTurns('on');
  expect(records[1]!.warnings.join(' ')).toMatch(/^reasoning-restored/);
  const assistant = records[1]!.ir_request.messages[2]!;
  expect(assistant.role === 'assistant' && assistant.reasoning?.text.trim()).toBe('List the files first.');
  expect(sim.tokenizer.decode(records[1]!.prompt_ids)).toContain('List the files first.');
  expect(trajectory.metadata.reconstruction_stats).toMatchObject({ chains: 1, rerender_mismatches: 0 });
});

test('not restored (option off): the same history is a re-rendered join', async () => {
  const { records, trajectory } = await twoTurns('off');
  expect(records[1]!.warnings.join(' ')).not.toMatch(/reasoning-restored/);
  expect(sim.tokenizer.decode(records[1]!.prompt_ids)).not.toContain('List the files first.');
  expect(trajectory.metadata.reconstruction_stats.rerender_mismatches).toBe(1);
});

test('polar proxy --restore-reasoning turns it on (the config key proxy.restore_reasoning as a flag)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'polar-restore-cli-'));
  const db = join(dir, 'proxy.db');
  const { proc, url } = await startPolarProxy(['--port', '0', '--engine', 'sim', '--engine-url', sim.url, '--task', 't', '--db', db, '--restore-reasoning'], dir);
  try {
    const { records } = await twoTurnsAt(url, 'sess-cli', (key) => {
      const store = openStore(db);
      try {
        return store.completions.listBySession(key);
      } finally {
        store.close();
      }
    });
    expect(records).toHaveLength(2);
    expect(records[1]!.warnings.join(' ')).toMatch(/^reasoning-restored/);
    expect(sim.tokenizer.decode(records[1]!.prompt_ids)).toContain('List the files first.');
  } finally {
    proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}, 30_000);

test('answers that look alike keep their own reasoning, in the order they were given', () => {
  const memory = new ReasoningMemory();
  const answer = (reasoning: string) => ({
    id: 'r', model: 'm', content: [], reasoning: { text: reasoning }, toolCalls: [{ id: 'x', name: 'bash', arguments: '{"command": "cat a.py"}' }],
    finishReason: { unified: 'tool-calls' as const }, usage: { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 }, warnings: [], createdAt: 0,
  });
  memory.remember('s', answer('first look'));
  memory.remember('s', answer('second look'));
  const call = (id: string) => ({ role: 'assistant' as const, content: [], toolCalls: [{ id, name: 'bash', arguments: '{"command":"cat a.py"}' }] });
  const request = { version: 1 as const, model: 'm', messages: [call('a'), { role: 'tool' as const, toolCallId: 'a', content: [] }, call('b')], tools: [], sampling: {}, stream: false, warnings: [] };
  const { request: out, restored } = memory.restore('s', request);
  expect(restored).toBe(2);
  expect(out.messages.map((m) => (m.role === 'assistant' ? m.reasoning?.text : null))).toEqual(['first look', null, 'second look']);
  expect(memory.restore('other', request).restored).toBe(0);
});
