/**
 * Compaction, as Claude Code and Gemini CLI do it (request shapes from their sources): after some turns the harness
 * asks for a summary of its history in a request of its own (another system prompt, no tools), then continues the
 * agent conversation from that summary with a shorter history. Through the proxy and the simulator, in chat and in
 * token mode, the session's trajectory has three labelled chains: the main conversation, the summary request (side,
 * linked to the main chain) and the continued conversation (compaction, linked to the chain it compacted).
 */
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI, type Content } from '@google/genai';
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { staticSessions } from '../../src/proxy/sessions.ts';
import { SimServer } from '../../src/sim/server.ts';
import { buildTrajectory, verifyTraces } from '../../src/trace/index.ts';
import { startTestProxy, type TestProxy } from '../support/proxy-harness.ts';

const steps = ['ls', 'cat a.py', 'python3 -m unittest', 'cat b.py', 'sed -i s/x/y/ a.py', 'python3 -m unittest -v'].map((shell, i) => ({ think: `step ${i}`, shell }));
const script = { variants: { solve: { weight: 1, steps: [...steps, { say: 'done' }] } } };
const SYSTEM = 'You are a coding agent.';
const SUMMARY_SYSTEM = 'You are a helpful AI assistant tasked with summarizing conversations.';

let sim: SimServer;
const proxies: Record<'chat' | 'token', TestProxy> = {} as never;
const ids = ['claude-chat', 'claude-token', 'gemini-chat', 'gemini-token'];

beforeAll(async () => {
  sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0, scripts: { t: script } });
  const sessions = staticSessions(Object.fromEntries(ids.map((id) => [id, { session_id: id, task_id: 't' }])));
  for (const mode of ['chat', 'token'] as const) proxies[mode] = await startTestProxy({ engineUrl: sim.url, kind: 'sim', sessions, mode });
});
afterAll(async () => {
  for (const p of Object.values(proxies)) await p.stop();
  await sim.stop();
});

/** Claude Code: Messages API; the summary request carries the whole history plus the summary instruction. */
async function claudeCode(proxy: TestProxy, key: string): Promise<void> {
  const client = new Anthropic({ baseURL: proxy.url, apiKey: key, maxRetries: 0 });
  const tools = [{ name: 'Bash', description: 'Run a shell command', input_schema: { type: 'object' as const, properties: { command: { type: 'string' } }, required: ['command'] } }];
  const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Fix the failing tests.' }];
  const turn = async (n: number) => {
    for (let i = 0; i < n; i++) {
      const reply = await client.messages.create({ model: 'claude', max_tokens: 1024, system: SYSTEM, tools, messages, thinking: { type: 'enabled', budget_tokens: 512 } });
      const use = reply.content.find((b) => b.type === 'tool_use') as Anthropic.ToolUseBlock;
      messages.push({ role: 'assistant', content: reply.content as never }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: `output ${messages.length}` }] });
    }
  };
  await turn(3);
  const summary = await client.messages.create({
    model: 'claude', max_tokens: 1024, system: SUMMARY_SYSTEM,
    messages: [...messages, { role: 'user', content: 'Your task is to create a detailed summary of the conversation so far.' }],
  });
  const text = summary.content.filter((b) => b.type === 'text').map((b) => (b as Anthropic.TextBlock).text).join('');
  // The continued conversation: the summary replaces the history; the tool results so far are restated in it.
  messages.splice(0, messages.length, { role: 'user', content: `This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n${text}` });
  await turn(1);
}

/** Gemini CLI: the compression request has its own system instruction; the new history is [snapshot, ack, …]. */
async function geminiCli(proxy: TestProxy, key: string): Promise<void> {
  const ai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: proxy.url, retryOptions: { attempts: 1 } } as never });
  const tools = [{ functionDeclarations: [{ name: 'run_shell_command', description: 'Run a shell command', parametersJsonSchema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } }] }];
  let contents: Content[] = [{ role: 'user', parts: [{ text: 'Fix the failing tests.' }] }];
  const turn = async (n: number) => {
    for (let i = 0; i < n; i++) {
      const reply = await ai.models.generateContent({ model: 'gemini-2.5-pro', contents, config: { systemInstruction: SYSTEM, tools, thinkingConfig: { includeThoughts: true, thinkingBudget: -1 } } });
      const call = reply.functionCalls![0]!;
      // Gemini CLI keeps only the non-thought parts in its history.
      const parts = reply.candidates![0]!.content!.parts!.filter((p) => !p.thought);
      contents = [...contents, { role: 'model', parts }, { role: 'user', parts: [{ functionResponse: { id: call.id, name: call.name!, response: { output: `output ${contents.length}` } } }] }];
    }
  };
  await turn(3);
  const summary = await ai.models.generateContent({
    model: 'gemini-2.5-flash', contents: [...contents, { role: 'user', parts: [{ text: 'First, reason in your scratchpad. Then, generate the <state_snapshot>.' }] }],
    config: { systemInstruction: SUMMARY_SYSTEM },
  });
  contents = [
    { role: 'user', parts: [{ text: `<state_snapshot>${summary.text ?? ''}</state_snapshot>` }] },
    { role: 'model', parts: [{ text: 'Got it. Thanks for the additional context!' }] },
    { role: 'user', parts: [{ text: 'Continue.' }] },
  ];
  await turn(1);
}

describe.each([['claude', claudeCode], ['gemini', geminiCli]] as const)('%s', (harness, run) => {
  for (const mode of ['chat', 'token'] as const) {
    test(`${mode} mode: main, side (the summary request) and compaction chains, labelled and linked`, async () => {
      const key = `${harness}-${mode}`;
      await run(proxies[mode], key);
      const records = proxies[mode].store.completions.listBySession(key);
      expect(records).toHaveLength(5);
      const trajectory = buildTrajectory(records, { strategy: 'prefix_merging', session_id: key, task_id: 't', harness, status: 'COMPLETED' });
      expect(trajectory.traces.map((t) => [t.metadata.chain_role, t.metadata.source_chain, t.metadata.completion_ids.length])).toEqual([
        ['main', null, 3], ['side', 0, 1], ['compaction', 0, 1],
      ]);
      expect(trajectory.metadata.reconstruction_stats.chain_roles).toEqual({ main: 1, side: 1, retry: 0, compaction: 1 });
      // Chat mode: Gemini CLI strips thought parts, so its joins are re-rendered (the engine saw the answer without its
      // <think> block); verify reports that unless accepted knowingly. Token mode needs no such allowance.
      expect(verifyTraces(records, trajectory, { acceptRerenderedJoins: mode === 'chat' }).ok).toBe(true);
    });
  }
});
