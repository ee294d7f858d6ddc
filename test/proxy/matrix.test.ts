/**
 * Issue 4's acceptance matrix: the same scenarios (text, one tool call, parallel tool calls, reasoning, truncation by
 * length, engine error) through all four dialects (Anthropic Messages, OpenAI Chat, OpenAI Responses, Gemini) × both
 * engine shapes (vLLM, SGLang) × streaming and not, each through its official SDK. For one scenario every cell must
 * capture identical tokens (prompt_ids, response_ids, logprobs, unified finish reason) and give the client an
 * equivalent result once each SDK's result is normalised into {text, reasoning?, toolCalls, finish}.
 */
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI, type GenerateContentResponse } from '@google/genai';
import OpenAI from 'openai';
import { describe, expect, test } from 'bun:test';
import type { CompletionRecord } from '../../src/core/records.ts';
import { fakeLogprob, type FakeReply } from '../support/fake-engine.ts';
import { expectedResponseIds, scenarioByMarker, useProxyPerShape } from '../support/proxy-harness.ts';

type Shape = 'vllm' | 'sglang';
type Finish = 'stop' | 'length' | 'tool';
type ToolCallView = { name: string; args: unknown };
/** A client-visible result, normalised across SDKs. */
type Outcome = { text: string; reasoning?: string; toolCalls: ToolCallView[]; finish: Finish } | { error: string; status: number | null };

const SYSTEM = 'be brief';
const SCHEMA = { type: 'object' as const, properties: { command: { type: 'string' } }, required: ['command'] };

const scenarios = {
  text: { kind: 'text', text: 'Voilà: héllo ✓ 日本語 🎉' },
  tool: { kind: 'tool-calls', calls: [{ name: 'shell', arguments: { command: 'ls' } }] },
  parallel: { kind: 'tool-calls', calls: [{ name: 'shell', arguments: { command: 'ls' } }, { name: 'shell', arguments: { command: 'cat README.txt' } }] },
  reasoning: { kind: 'text', text: 'The answer is 4.', reasoning: 'Two plus two is four.' },
  length: { kind: 'length', text: 'This reply was cut off by the tok' },
  error: { kind: 'error', status: 500, message: 'engine exploded' },
} satisfies Record<string, FakeReply>;
type Scenario = keyof typeof scenarios;
const SCENARIOS = Object.keys(scenarios) as Scenario[];

/** The scenario is named in the last user turn, so one fake engine per shape serves the whole matrix. */
const scenarioOf = scenarioByMarker(scenarios);

/** What a client must see for a scenario, derived from the engine's script. */
function expectedOutcome(name: Scenario): Outcome {
  const reply: FakeReply = scenarios[name];
  switch (reply.kind) {
    case 'text':
      return { text: reply.text, ...(reply.reasoning ? { reasoning: reply.reasoning } : {}), toolCalls: [], finish: 'stop' };
    case 'tool-calls':
      return { text: reply.text ?? '', toolCalls: reply.calls.map((c) => ({ name: c.name, args: c.arguments })), finish: 'tool' };
    case 'length':
      return { text: reply.text, toolCalls: [], finish: 'length' };
    default:
      return { error: 'engine exploded', status: 502 };
  }
}

function errorOutcome(thrown: unknown): Outcome {
  const status = (thrown as { status?: unknown }).status;
  return { error: thrown instanceof Error ? thrown.message : String(thrown), status: typeof status === 'number' ? status : null };
}

const args = (raw: string): unknown => JSON.parse(raw) as unknown;

/** One official SDK per dialect: call the proxy for a scenario and normalise the SDK's result. */
const dialects: Record<CompletionRecord['dialect'], (url: string, key: string, name: Scenario, stream: boolean) => Promise<Outcome>> = {
  async 'anthropic-messages'(url, key, name, stream) {
    const client = new Anthropic({ baseURL: url, apiKey: key, maxRetries: 0 });
    const params = {
      model: 'claude-test',
      max_tokens: 256,
      system: SYSTEM,
      tools: [{ name: 'shell', description: 'Run a shell command', input_schema: SCHEMA }],
      messages: [{ role: 'user' as const, content: `scenario:${name}` }],
      ...(name === 'reasoning' ? { thinking: { type: 'enabled' as const, budget_tokens: 1024 } } : {}),
    };
    const message = stream ? await client.messages.stream(params).finalMessage() : await client.messages.create(params);
    let text = '';
    let reasoning: string | undefined;
    const toolCalls: ToolCallView[] = [];
    for (const block of message.content) {
      if (block.type === 'text') text += block.text;
      else if (block.type === 'thinking') reasoning = (reasoning ?? '') + block.thinking;
      else if (block.type === 'tool_use') toolCalls.push({ name: block.name, args: block.input });
    }
    const finish = ({ end_turn: 'stop', max_tokens: 'length', tool_use: 'tool' } as const)[message.stop_reason as 'end_turn'];
    return { text, ...(reasoning !== undefined ? { reasoning } : {}), toolCalls, finish };
  },

  async 'openai-chat'(url, key, name, stream) {
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
    const params = {
      model: 'gpt-test',
      max_completion_tokens: 256,
      tools: [{ type: 'function' as const, function: { name: 'shell', description: 'Run a shell command', parameters: SCHEMA } }],
      messages: [{ role: 'system' as const, content: SYSTEM }, { role: 'user' as const, content: `scenario:${name}` }],
      ...(name === 'reasoning' ? { reasoning_effort: 'medium' as const } : {}),
    };
    const completion = stream
      ? await client.chat.completions.stream({ ...params, stream_options: { include_usage: true } }).finalChatCompletion()
      : await client.chat.completions.create(params);
    const choice = completion.choices[0]!;
    const reasoning = (choice.message as { reasoning_content?: string | null }).reasoning_content;
    const toolCalls = (choice.message.tool_calls ?? []).map((c) => {
      const fn = (c as { function: { name: string; arguments: string } }).function;
      return { name: fn.name, args: args(fn.arguments) };
    });
    const finish = ({ stop: 'stop', length: 'length', tool_calls: 'tool' } as const)[choice.finish_reason as 'stop'];
    return { text: choice.message.content ?? '', ...(reasoning ? { reasoning } : {}), toolCalls, finish };
  },

  async 'openai-responses'(url, key, name, stream) {
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
    const params = {
      model: 'gpt-test',
      instructions: SYSTEM,
      max_output_tokens: 256,
      store: false,
      tools: [{ type: 'function' as const, name: 'shell', description: 'Run a shell command', strict: false, parameters: SCHEMA }],
      input: [{ type: 'message' as const, role: 'user' as const, content: `scenario:${name}` }],
      ...(name === 'reasoning' ? { reasoning: { effort: 'medium' as const } } : {}),
    };
    const response = stream ? await client.responses.stream(params).finalResponse() : await client.responses.create(params);
    // The SDK's stream helper does not throw on `response.failed`: it hands back the failed response.
    if (response.status === 'failed') return { error: response.error?.message ?? 'failed', status: null };
    let reasoning: string | undefined;
    const toolCalls: ToolCallView[] = [];
    for (const item of response.output) {
      if (item.type === 'reasoning') reasoning = (reasoning ?? '') + (item.content ?? []).map((c) => c.text).join('');
      else if (item.type === 'function_call') toolCalls.push({ name: item.name, args: args(item.arguments) });
    }
    const finish: Finish = response.status === 'incomplete' ? 'length' : toolCalls.length > 0 ? 'tool' : 'stop';
    expect(response.status).toBe(finish === 'length' ? 'incomplete' : 'completed');
    return { text: response.output_text, ...(reasoning !== undefined ? { reasoning } : {}), toolCalls, finish };
  },

  async gemini(url, key, name, stream) {
    const ai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: url, retryOptions: { attempts: 1 } } as never });
    const params = {
      model: 'gemini-test',
      contents: [{ role: 'user', parts: [{ text: `scenario:${name}` }] }],
      config: {
        systemInstruction: SYSTEM,
        maxOutputTokens: 256,
        tools: [{ functionDeclarations: [{ name: 'shell', description: 'Run a shell command', parametersJsonSchema: SCHEMA }] }],
        ...(name === 'reasoning' ? { thinkingConfig: { includeThoughts: true, thinkingBudget: 1024 } } : {}),
      },
    };
    const chunks: GenerateContentResponse[] = stream ? await Array.fromAsync(await ai.models.generateContentStream(params)) : [await ai.models.generateContent(params)];
    let text = '';
    let reasoning: string | undefined;
    const toolCalls: ToolCallView[] = [];
    let finishReason: string | undefined;
    for (const chunk of chunks) {
      const candidate = chunk.candidates?.[0];
      for (const part of candidate?.content?.parts ?? []) {
        if (part.functionCall) toolCalls.push({ name: part.functionCall.name ?? '', args: part.functionCall.args });
        else if (part.thought) reasoning = (reasoning ?? '') + (part.text ?? '');
        else text += part.text ?? '';
      }
      finishReason = candidate?.finishReason ?? finishReason;
    }
    // Gemini has no tool-use finish reason: a turn that calls tools ends with STOP.
    const finish: Finish = finishReason === 'MAX_TOKENS' ? 'length' : toolCalls.length > 0 ? 'tool' : 'stop';
    expect(finishReason).toBe(finish === 'length' ? 'MAX_TOKENS' : 'STOP');
    return { text, ...(reasoning !== undefined ? { reasoning } : {}), toolCalls, finish };
  },
};
const DIALECTS = Object.keys(dialects) as CompletionRecord['dialect'][];

/** The captured part of a record that must not depend on the dialect. */
function capture(rec: CompletionRecord) {
  return { prompt_ids: rec.prompt_ids, response_ids: rec.response_ids, logprobs: rec.logprobs, finish: rec.finish_reason.unified, capture_error: rec.capture_error };
}

const { engines, proxies } = useProxyPerShape({ script: scenarioOf, timeoutMs: 2000 });

/** shape → scenario → the capture every cell of that row agreed on. */
const captured: Record<Shape, Partial<Record<Scenario, ReturnType<typeof capture>>>> = { vllm: {}, sglang: {} };

describe.each(['vllm', 'sglang'] as const)('engine shape %s', (shape) => {
  test.each(SCENARIOS)('scenario %s: 4 dialects × streaming and not agree on the captured tokens and the client result', async (name) => {
    const proxy = proxies[shape];
    const cells = DIALECTS.flatMap((dialect) => [false, true].map((stream) => ({ dialect, stream, session: `${shape}-${dialect}-${stream ? 'stream' : 'json'}-${name}` })));
    const outcomes = await Promise.all(cells.map((cell) => dialects[cell.dialect](proxy.url, cell.session, name, cell.stream).catch(errorOutcome)));
    const expected = expectedOutcome(name);
    for (const [i, cell] of cells.entries()) {
      const outcome = outcomes[i]!;
      const label = `${cell.dialect} ${cell.stream ? 'streaming' : 'non-streaming'}`;
      const records = proxy.store.completions.listBySession(cell.session);
      if ('error' in expected) {
        expect('error' in outcome, label).toBe(true);
        expect((outcome as { error: string }).error, label).toContain(expected.error);
        // Before the first byte the error is an HTTP status; a stream has already sent 200 and reports it in-band.
        if (!cell.stream) expect((outcome as { status: number | null }).status, label).toBe(expected.status);
        expect(records, label).toEqual([]);
        continue;
      }
      expect(outcome, label).toEqual(expected);
      expect(records.length, label).toBe(1);
      expect(records[0]!.dialect, label).toBe(cell.dialect);
      const got = capture(records[0]!);
      const reference = (captured[shape][name] ??= got);
      expect(got, label).toEqual(reference);
    }
    if ('error' in expected) return;
    const reference = captured[shape][name]!;
    expect(reference.capture_error).toBeNull();
    expect(reference.response_ids).toEqual(expectedResponseIds(scenarios[name]));
    expect(reference.logprobs).toEqual(reference.response_ids.map((_, k) => fakeLogprob(k)));
    expect(reference.finish).toBe(({ stop: 'stop', length: 'length', tool: 'tool-calls' } as const)[expected.finish]);
    expect(reference.prompt_ids.length).toBeGreaterThan(0);
  });
});

test('both engine shapes yield the same captured tokens for every scenario', () => {
  const ok = SCENARIOS.filter((name) => name !== 'error');
  expect(Object.keys(captured.vllm).sort()).toEqual([...ok].sort());
  for (const name of ok) expect(captured.sglang[name], name).toEqual(captured.vllm[name]!);
});
