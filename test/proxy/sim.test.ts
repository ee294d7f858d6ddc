/** The proxy in front of the real simulator (engine kind `sim`, vLLM contract): a two-turn tool loop, re-scored. */
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { SimServer } from '../../src/sim/server.ts';
import { rescoreCompletion } from '../../src/sim/policy.ts';
import { staticSessions } from '../../src/proxy/sessions.ts';
import { startTestProxy, type TestProxy } from '../support/proxy-harness.ts';

let sim: SimServer;
let proxy: TestProxy;

beforeAll(async () => {
  sim = await SimServer.start({
    port: 0,
    prefillTps: 0,
    decodeTps: 0,
    scripts: { 'task-ls': { variants: { solve: { weight: 1, steps: [{ think: 'list first', shell: 'ls -la' }, { say: 'There are two files.' }] } } } },
  });
  proxy = await startTestProxy({
    engineUrl: sim.url,
    kind: 'sim',
    sessions: staticSessions({ 'sess-sim': { session_id: 'sess-sim', task_id: 'task-ls' } }),
  });
});
afterAll(async () => {
  await proxy.stop();
  await sim.stop();
});

test('a two-turn tool loop through the proxy is captured with the simulator policy logprobs', async () => {
  const client = new Anthropic({ baseURL: proxy.url, apiKey: 'sess-sim', maxRetries: 0 });
  const tools = [{ name: 'Bash', description: 'Run a shell command', input_schema: { type: 'object' as const, properties: { command: { type: 'string' } }, required: ['command'] } }];
  const first = await client.messages.create({ model: 'polar-test-model', max_tokens: 512, system: 'You are a coding agent.', tools, messages: [{ role: 'user', content: 'What is here?' }] });
  const use = first.content.find((block) => block.type === 'tool_use');
  expect(use).toBeDefined();
  expect((use as { name: string }).name).toBe('Bash');
  expect((use as { input: unknown }).input).toEqual({ command: 'ls -la' });
  const second = await client.messages
    .stream({
      model: 'polar-test-model',
      max_tokens: 512,
      system: 'You are a coding agent.',
      tools,
      messages: [
        { role: 'user', content: 'What is here?' },
        { role: 'assistant', content: first.content as never },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: (use as { id: string }).id, content: 'a.txt\nb.txt' }] },
      ],
    })
    .finalMessage();
  expect(second.content.filter((b) => b.type === 'text').map((b) => (b as { text: string }).text).join('')).toContain('There are two files.');
  const records = proxy.store.completions.listBySession('sess-sim');
  expect(records.length).toBe(2);
  for (const rec of records) {
    expect(rec.engine_id).toBe(`sim@${sim.url}`);
    expect(rec.capture_error).toBeNull();
    expect(rec.logprobs).toEqual(rescoreCompletion(rec.prompt_ids, rec.response_ids));
  }
  const prompt = sim.tokenizer.decode(records[1]!.prompt_ids);
  expect(prompt.startsWith('<|im_start|>system\nYou are a coding agent.')).toBe(true);
  expect(prompt).toContain('<tool_response>\na.txt\nb.txt\n</tool_response>');
});
