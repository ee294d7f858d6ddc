/**
 * The proxy's Gemini routes through the official @google/genai client (`models.generateContent`,
 * `generateContentStream`, `countTokens`, `list`), with `httpOptions.baseUrl` pointing at the proxy, against the fake
 * engine in vLLM and SGLang shape: text, tool calls (ids kept and matched), reasoning, truncation, errors, capture.
 */
import { ApiError, GoogleGenAI, type GenerateContentResponse } from '@google/genai';
import { describe, expect, test } from 'bun:test';
import { staticSessions } from '../../src/proxy/sessions.ts';
import { fakeLogprob, type FakeReply } from '../support/fake-engine.ts';
import { expectedResponseIds, scenarioByMarker, sessionRecords, startTestProxy, useProxyPerShape, type TestProxy } from '../support/proxy-harness.ts';

const scenarios: Record<string, FakeReply> = {
  text: { kind: 'text', text: 'Voilà: héllo ✓ 🎉' },
  tool: { kind: 'tool-calls', calls: [{ name: 'run_shell_command', arguments: { command: 'ls' } }] },
  parallel: { kind: 'tool-calls', calls: [{ name: 'run_shell_command', arguments: { command: 'ls' } }, { name: 'run_shell_command', arguments: { command: 'pwd' } }] },
  reasoning: { kind: 'text', text: 'The answer is 4.', reasoning: 'Two plus two is four.' },
  length: { kind: 'length', text: 'This reply was cut off by the tok' },
  fail500: { kind: 'error', status: 500, message: 'engine exploded' },
};

const scenarioOf = scenarioByMarker(scenarios);

const shellTool = {
  functionDeclarations: [
    { name: 'run_shell_command', description: 'Run a shell command', parametersJsonSchema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } },
  ],
};

const { engines, proxies } = useProxyPerShape({ script: scenarioOf, timeoutMs: 2000 });

const genai = (proxy: TestProxy, key: string) => new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: proxy.url, retryOptions: { attempts: 1 } } as never });

/** Merge streamed chunks the way gemini-cli does: text concatenated per kind, function calls collected in order. */
function merge(chunks: GenerateContentResponse[]) {
  let text = '';
  let thoughts = '';
  const calls: { id?: string; name?: string; args?: Record<string, unknown> }[] = [];
  let finishReason: string | undefined;
  for (const chunk of chunks) {
    const candidate = chunk.candidates?.[0];
    for (const part of candidate?.content?.parts ?? []) {
      expect(part.text).not.toBe('');
      if (part.functionCall) calls.push(part.functionCall);
      else if (part.thought) thoughts += part.text ?? '';
      else text += part.text ?? '';
    }
    finishReason = candidate?.finishReason ?? finishReason;
  }
  return { text, thoughts, calls, finishReason, usage: chunks.at(-1)?.usageMetadata };
}

const okScenarios = ['text', 'tool', 'parallel', 'reasoning', 'length'] as const;

describe.each(['vllm', 'sglang'] as const)('engine shape %s', (shape) => {
  for (const stream of [false, true]) {
    test(`models.${stream ? 'generateContentStream' : 'generateContent'}: every scenario answers in Gemini parts and is recorded`, async () => {
      const proxy = proxies[shape];
      const session = `gem-${shape}-${stream}`;
      const ai = genai(proxy, session);
      for (const name of okScenarios) {
        const params = {
          model: 'gemini-2.5-pro',
          contents: [{ role: 'user', parts: [{ text: `scenario:${name}` }] }],
          config: {
            systemInstruction: 'be brief',
            tools: [shellTool],
            maxOutputTokens: 256,
            temperature: 0.7,
            ...(name === 'reasoning' ? { thinkingConfig: { includeThoughts: true, thinkingBudget: 1024 } } : {}),
          },
        };
        const result = stream ? merge(await Array.fromAsync(await ai.models.generateContentStream(params))) : merge([await ai.models.generateContent(params)]);
        expect(result.usage).toMatchObject({ promptTokenCount: expect.any(Number), candidatesTokenCount: expect.any(Number), totalTokenCount: expect.any(Number) });
        switch (name) {
          case 'text':
            expect(result.text).toBe('Voilà: héllo ✓ 🎉');
            expect(result.finishReason).toBe('STOP');
            break;
          case 'tool':
          case 'parallel':
            expect(result.calls.map((c) => c.args)).toEqual(name === 'tool' ? [{ command: 'ls' }] : [{ command: 'ls' }, { command: 'pwd' }]);
            expect(result.calls.every((c) => c.name === 'run_shell_command' && typeof c.id === 'string')).toBe(true);
            expect(new Set(result.calls.map((c) => c.id)).size).toBe(result.calls.length);
            expect(result.finishReason).toBe('STOP');
            break;
          case 'reasoning':
            expect(result.thoughts).toBe('Two plus two is four.');
            expect(result.text).toBe('The answer is 4.');
            break;
          case 'length':
            expect(result.finishReason).toBe('MAX_TOKENS');
            break;
        }
      }
      const recs = await sessionRecords(proxy, session);
      expect(recs.map((r) => r.seq)).toEqual(okScenarios.map((_, i) => i));
      for (const [i, rec] of recs.entries()) {
        expect(rec.dialect).toBe('gemini');
        expect(rec.capture_error).toBeNull();
        expect(rec.response_ids).toEqual(expectedResponseIds(scenarios[okScenarios[i]!]!));
        expect(rec.logprobs).toEqual(rec.response_ids.map((_, k) => fakeLogprob(k)));
        expect(rec.ir_request.model).toBe('gemini-2.5-pro');
      }
      const engineRequest = engines[shape].chatRequests().at(-1)!.body;
      expect(engineRequest.temperature).toBe(0.7);
      expect(engineRequest.messages).toEqual([{ role: 'system', content: 'be brief' }, expect.objectContaining({ role: 'user' })]);
    });
  }

  test('a two-turn tool loop: the functionResponse (no id, as pi sends it) pairs with the call by order', async () => {
    const ai = genai(proxies[shape], `gem-loop-${shape}`);
    const first = await ai.models.generateContent({ model: 'gemini-2.5-pro', contents: 'scenario:parallel', config: { tools: [shellTool] } });
    const calls = first.functionCalls!;
    expect(calls.length).toBe(2);
    await ai.models.generateContent({
      model: 'gemini-2.5-pro',
      config: { tools: [shellTool] },
      contents: [
        { role: 'user', parts: [{ text: 'scenario:parallel' }] },
        { role: 'model', parts: calls.map((call) => ({ functionCall: { name: call.name, args: call.args }, thoughtSignature: 'skip_thought_signature_validator' })) },
        { role: 'user', parts: [{ functionResponse: { name: 'run_shell_command', response: { output: 'a.txt' } } }, { functionResponse: { name: 'run_shell_command', response: { output: '/root' } } }] },
      ],
    });
    const messages = engines[shape].chatRequests().at(-1)!.body.messages as { role: string; tool_call_id?: string; tool_calls?: { id: string }[]; content: unknown }[];
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'tool']);
    const ids = messages[1]!.tool_calls!.map((c) => c.id);
    expect(messages.slice(2).map((m) => [m.tool_call_id, m.content])).toEqual([
      [ids[0], 'a.txt'],
      [ids[1], '/root'],
    ]);
  });
});

describe('other endpoints and errors', () => {
  test('countTokens, models.list and models.get through the SDK', async () => {
    const ai = genai(proxies.vllm, 'gem-misc');
    const count = await ai.models.countTokens({ model: 'gemini-2.5-pro', contents: 'hello' });
    expect(count.totalTokens).toBeGreaterThan(0);
    const listed = [];
    for await (const model of await ai.models.list()) listed.push(model.name);
    expect(listed).toEqual(['models/qwen3-test']);
    expect((await ai.models.get({ model: 'gemini-2.5-pro' })).name).toBe('models/gemini-2.5-pro');
  });

  test('key in ?key= works; an unknown session is 401 in Google shape; candidateCount 2 is 400', async () => {
    const gated = await startTestProxy({ engineUrl: engines.vllm.url, kind: 'vllm', sessions: staticSessions({ 'sess-ok': { session_id: 'sess-ok' } }) });
    try {
      const body = JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] });
      const ok = await fetch(`${gated.url}/v1beta/models/gemini-2.5-pro:generateContent?key=sess-ok`, { method: 'POST', body });
      expect(ok.status).toBe(200);
      const unknown = await fetch(`${gated.url}/v1beta/models/gemini-2.5-pro:generateContent`, { method: 'POST', body, headers: { 'x-goog-api-key': 'nope' } });
      expect(unknown.status).toBe(401);
      expect(await unknown.json()).toEqual({ error: { code: 401, message: expect.stringContaining('unknown session'), status: 'UNAUTHENTICATED' } });
      const error = await genai(gated, 'sess-ok')
        .models.generateContent({ model: 'gemini-2.5-pro', contents: 'hi', config: { candidateCount: 2 } })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ApiError);
      expect((error as ApiError).status).toBe(400);
      expect((error as ApiError).message).toContain('candidateCount');
    } finally {
      await gated.stop();
    }
  });

  test('engine 5xx: 502 before the first byte; in a stream the in-band error becomes an ApiError', async () => {
    const ai = genai(proxies.sglang, 'gem-fail');
    const error = await ai.models.generateContent({ model: 'gemini-2.5-pro', contents: 'scenario:fail500' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).status).toBe(502);
    const streamed = await (async () => {
      for await (const _chunk of await ai.models.generateContentStream({ model: 'gemini-2.5-pro', contents: 'scenario:fail500' })) {
        // no chunk is expected before the error
      }
    })().catch((e: unknown) => e);
    expect(streamed).toBeInstanceOf(ApiError);
    expect((streamed as ApiError).message).toContain('engine exploded');
    expect(await sessionRecords(proxies.sglang, 'gem-fail')).toEqual([]);
  });
});
