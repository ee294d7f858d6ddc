/**
 * Token mode through the proxy for each model family, with the simulator serving that family's real tokenizer and
 * chat template (`tokenizerDir`, as `polar sim --tokenizer DIR`): a multi-turn conversation keeps one chain (every
 * prompt is the previous prompt + the sampled ids + the suffix of the new messages), the golden check agrees with the
 * simulator's /tokenize, and the engine's stop ids are the family's. Families whose template renders tools (Qwen3,
 * Llama 3.1, gpt-oss) run a tool loop; the others (DeepSeek templates render no tool definitions, Gemma 3 has no tool
 * turns) run a text conversation.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import type { CompletionRecord } from '../../src/core/records.ts';
import { createEngineClient, type TokenModeEngine } from '../../src/engines/index.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { adHocSessions } from '../../src/proxy/sessions.ts';
import { rescoreCompletion } from '../../src/sim/policy.ts';
import { SimServer } from '../../src/sim/server.ts';
import { openStore } from '../../src/store/index.ts';
import { resolveFamilyIds } from '../../src/tokenization/families.ts';
import { buildTrajectory } from '../../src/trace/index.ts';
import { modelDir, MODEL_DIR_NAMES, MODEL_DIRS } from '../support/model-dirs.ts';

const TASK = 'task-families';
const script = {
  variants: { solve: { weight: 1, steps: [{ think: 'Look first.', shell: 'ls -la' }, { think: 'Read it.', shell: 'cat main.py' }, { say: 'One file, main.py.' }] } },
};
const tools = [{ type: 'function', function: { name: 'bash', description: 'Run a shell command', parameters: { type: 'object', properties: { command: { type: 'string', description: 'the command' } }, required: ['command'] } } }];
const TOOL_FAMILIES = new Set(['qwen3', 'llama3', 'gpt-oss']);
const cleanup: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const fn of cleanup) await fn();
});

describe.each(MODEL_DIR_NAMES)('%s through the proxy in token mode', (name) => {
  test('one chain over three turns; golden check clean; the family\'s stop ids', async () => {
    const dir = modelDir(name);
    const sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0, tokenizerDir: dir, scripts: { [TASK]: script } });
    const store = openStore(':memory:');
    const logs: string[] = [];
    const engine = createEngineClient({ kind: 'sim', url: sim.url, mode: 'token', timeoutMs: 10_000, tokenizerDir: dir, goldenRate: 1, log: (m) => logs.push(m) }) as TokenModeEngine;
    await engine.probe();
    const app = createProxyApp({ engine, store, sessions: adHocSessions({ taskId: TASK }) });
    const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: app.fetch, idleTimeout: 0 });
    cleanup.push(async () => {
      await server.stop(true);
      store.close();
      await sim.stop();
    });
    const family = sim.family;
    expect(family.name).toBe(MODEL_DIRS[name].family);
    const withTools = TOOL_FAMILIES.has(family.name);
    const messages: unknown[] = [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'What is in this project?' }];
    for (let turn = 0; turn < 3; turn++) {
      const response = await fetch(`http://127.0.0.1:${server.port}/v1/chat/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${name}` },
        body: JSON.stringify({ model: 'm', messages, ...(withTools ? { tools } : {}) }),
      });
      expect(response.status).toBe(200);
      const answer = (await response.json()) as { usage: { completion_tokens_details?: { reasoning_tokens?: number } }; choices: { finish_reason: string; message: { content: string | null; reasoning_content?: string; tool_calls?: { id: string; function: { name: string; arguments: string } }[] } }[] };
      const message = answer.choices[0]!.message;
      if (withTools && turn < 2) {
        expect(answer.choices[0]!.finish_reason).toBe('tool_calls');
        // gpt-oss reasons in its analysis channel: counted as reasoning tokens too.
        if (family.reasoningField !== null) expect(answer.usage.completion_tokens_details?.reasoning_tokens ?? 0).toBeGreaterThan(0);
        expect(JSON.parse(message.tool_calls![0]!.function.arguments)).toEqual({ command: turn === 0 ? 'ls -la' : 'cat main.py' });
        messages.push({ role: 'assistant', content: message.content, tool_calls: message.tool_calls });
        messages.push({ role: 'tool', tool_call_id: message.tool_calls![0]!.id, content: turn === 0 ? 'main.py' : 'print("hi")' });
      } else {
        expect(answer.choices[0]!.finish_reason).toBe('stop');
        expect(message.content).toContain(withTools ? 'One file, main.py.' : 'I would run this command');
        messages.push({ role: 'assistant', content: message.content });
        messages.push({ role: 'user', content: `And turn ${turn + 2}?` });
      }
    }
    await engine.settled();
    const records: CompletionRecord[] = store.completions.listBySession(name);
    expect(records.length).toBe(3);
    for (const [i, rec] of records.entries()) {
      expect(rec.mode).toBe('token');
      expect(rec.capture_error).toBeNull();
      expect(rec.logprobs).toEqual(rescoreCompletion(rec.prompt_ids, rec.response_ids));
      if (i > 0) {
        const head = [...records[i - 1]!.prompt_ids, ...records[i - 1]!.response_ids];
        expect(rec.prompt_ids.slice(0, head.length)).toEqual(head);
        expect(rec.prompt_ids.length).toBeGreaterThan(head.length);
      }
    }
    // Each sample ended on one of the family's stop ids (gpt-oss: <|call|> for a call, <|return|> for the answer).
    const stopIds = resolveFamilyIds(sim.tokenizer, family).stopIds;
    for (const rec of records) expect(stopIds).toContain(rec.response_ids.at(-1)!);
    if (family.name === 'gpt-oss') expect(sim.tokenizer.decode([records[0]!.response_ids.at(-1)!])).toBe('<|call|>');
    const trajectory = buildTrajectory(records, { strategy: 'prefix_merging', session_id: name, task_id: TASK, harness: 'test', status: 'COMPLETED', eotIds: sim.tokenizer.eosTokenIds });
    expect(trajectory.metadata.reconstruction_stats.chains).toBe(1);
    const stats = engine.stats();
    expect(stats.family).toBe(family.name);
    expect(stats.token_buffer).toMatchObject({ incremental: 2, full: 1 });
    expect(stats.golden.mismatches).toBe(0);
    expect(stats.golden.checks).toBeGreaterThanOrEqual(4);
    expect(logs).toEqual([]);
  }, 60_000);
});
