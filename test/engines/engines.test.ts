import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { fixedClock } from '../../src/core/clock.ts';
import { GatewayError } from '../../src/core/errors.ts';
import { sequentialIds } from '../../src/core/ids.ts';
import type { IRRequest } from '../../src/core/ir.ts';
import { buildChatRequest, DEFAULT_SAMPLING } from '../../src/engines/chat-request.ts';
import { createEngineClient, type EngineConfig } from '../../src/engines/index.ts';
import { llamacppTokenBackend, sglangTokenBackend, vllmTokenBackend } from '../../src/engines/token-backends.ts';
import { EOS_ID, fakeIds, fakeLogprob, startFakeEngine, type FakeEngine } from '../support/fake-engine.ts';

const ctx = { sessionId: 'sess-1', taskId: 'task-1', requestId: 'req-1' };

function irRequest(overrides: Partial<IRRequest> = {}): IRRequest {
  return {
    version: 1,
    model: 'claude-sonnet-4-5',
    messages: [
      { role: 'system', content: [{ type: 'text', text: 'You are helpful.' }] },
      { role: 'user', content: [{ type: 'text', text: 'List files' }] },
    ],
    tools: [{ name: 'Bash', description: 'run a command', parameters: { type: 'object', properties: { command: { type: 'string' } } }, origin: { kind: 'function' } }],
    sampling: {},
    stream: false,
    warnings: [],
    ...overrides,
  };
}

function config(engine: FakeEngine, kind: EngineConfig['kind'], extra: Partial<EngineConfig> = {}): EngineConfig {
  return { kind, url: engine.url, mode: 'chat', timeoutMs: 2000, now: fixedClock(), newId: sequentialIds(), ...extra };
}

describe('structured output reaches every engine as guided decoding', () => {
  const schema = { type: 'object', properties: { a: { type: 'string' } } };
  const input = { promptIds: [1, 2], sampling: { temperature: 1, topP: 1, topK: -1, minP: 0, maxTokens: 8 }, stopIds: [3], servedModel: 'm', ctx };
  test('chat mode: response_format', () => {
    const { body } = buildChatRequest(irRequest({ responseFormat: { type: 'json_schema', name: 'n', schema } }), { servedModel: 'm', defaults: DEFAULT_SAMPLING, reasoningField: 'reasoning' });
    expect(body.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'n', schema } });
    expect(buildChatRequest(irRequest({ responseFormat: { type: 'json_object' } }), { servedModel: 'm', defaults: DEFAULT_SAMPLING, reasoningField: 'reasoning' }).body.response_format).toEqual({ type: 'json_object' });
    expect(buildChatRequest(irRequest(), { servedModel: 'm', defaults: DEFAULT_SAMPLING, reasoningField: 'reasoning' }).body.response_format).toBeUndefined();
  });
  test('token mode: SGLang json_schema string, vLLM response_format, llama.cpp json_schema', () => {
    const responseFormat = { type: 'json_schema' as const, schema };
    expect((sglangTokenBackend.body({ ...input, responseFormat }).sampling_params as Record<string, unknown>).json_schema).toBe(JSON.stringify(schema));
    expect(vllmTokenBackend.body({ ...input, responseFormat }).response_format).toEqual({ type: 'json_schema', json_schema: { name: 'response', schema } });
    expect(vllmTokenBackend.body({ ...input, responseFormat: { type: 'json_object' } }).response_format).toEqual({ type: 'json_object' });
    expect(llamacppTokenBackend.body({ ...input, responseFormat: { type: 'json_object' } }).json_schema).toEqual({ type: 'object' });
    for (const backend of [sglangTokenBackend, vllmTokenBackend, llamacppTokenBackend]) {
      const body = JSON.stringify(backend.body(input));
      expect(body).not.toContain('json_schema');
      expect(body).not.toContain('response_format');
    }
  });
});

describe('buildChatRequest', () => {
  test('merges every system message into one leading system message and sends every sampling default explicitly', () => {
    const request = irRequest({
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] },
        { role: 'system', content: [{ type: 'text', text: 'S1' }] },
        { role: 'system', content: [{ type: 'text', text: 'S2' }] },
      ],
      sampling: { temperature: 0.6, maxTokens: 300 },
    });
    const { body } = buildChatRequest(request, { servedModel: 'served', defaults: { ...DEFAULT_SAMPLING, topK: 20 }, reasoningField: 'reasoning' });
    expect(body.model).toBe('served');
    expect(body.messages).toEqual([
      { role: 'system', content: 'S1\n\nS2' },
      { role: 'user', content: 'a\nb' },
    ]);
    expect([body.temperature, body.top_p, body.top_k, body.min_p, body.max_tokens]).toEqual([0.6, 1, 20, 0, 300]);
    expect(body.stream).toBe(false);
  });

  test('never clamps: out-of-range values pass through exactly', () => {
    const { body } = buildChatRequest(irRequest({ sampling: { temperature: 7.5, topP: 0, maxTokens: 1_000_000 } }), {
      servedModel: 'm', defaults: DEFAULT_SAMPLING, reasoningField: 'reasoning',
    });
    expect([body.temperature, body.top_p, body.max_tokens]).toEqual([7.5, 0, 1_000_000]);
  });

  test('echoes reasoning under the configured field; images, also in tool results, as image_url parts', () => {
    const request = irRequest({
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'see' }, { type: 'image', mediaType: 'image/png', data: 'AAAA' }] },
        { role: 'assistant', content: [], reasoning: { text: 'hmm', signature: 'sig' }, toolCalls: [{ id: 'c1', name: 'Bash', arguments: '{"command":"ls"}' }] },
        { role: 'tool', toolCallId: 'c1', content: [{ type: 'text', text: 'a.txt' }, { type: 'image', mediaType: 'image/png', data: 'BB' }], isError: true },
      ],
      reasoning: { enabled: true, budgetTokens: 32000 },
      toolChoice: { name: 'Bash' },
    });
    for (const field of ['reasoning', 'reasoning_content'] as const) {
      const { body, warnings } = buildChatRequest(request, { servedModel: 'm', defaults: DEFAULT_SAMPLING, reasoningField: field });
      const messages = body.messages as Array<Record<string, unknown>>;
      expect(messages[0]!.content).toEqual([{ type: 'text', text: 'see' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }]);
      expect(messages[1]).toEqual({ role: 'assistant', content: null, [field]: 'hmm', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'Bash', arguments: '{"command":"ls"}' } }] });
      // vLLM and SGLang take non-text parts in tool messages: the model sees the image, not "[image]".
      expect(messages[2]).toEqual({ role: 'tool', tool_call_id: 'c1', content: [{ type: 'text', text: 'a.txt' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,BB' } }] });
      expect(warnings).toEqual([]);
      expect(body.chat_template_kwargs).toEqual({ enable_thinking: true });
      expect(body.tool_choice).toEqual({ type: 'function', function: { name: 'Bash' } });
    }
  });

  test('drops tool_choice when there are no tools', () => {
    const { body } = buildChatRequest(irRequest({ tools: [], toolChoice: 'required' }), { servedModel: 'm', defaults: DEFAULT_SAMPLING, reasoningField: 'reasoning' });
    expect(body.tools).toBeUndefined();
    expect(body.tool_choice).toBeUndefined();
  });

  test('system messages: merged into one leading message by default; in-place keeps a later one where it is', () => {
    const text = (t: string) => [{ type: 'text' as const, text: t }];
    const messages = [
      { role: 'system' as const, content: text('A') },
      { role: 'system' as const, content: text('B') },
      { role: 'user' as const, content: text('task') },
      { role: 'system' as const, content: text('C') },
    ];
    const base = { servedModel: 'm', defaults: DEFAULT_SAMPLING, reasoningField: 'reasoning' as const };
    const roles = (body: Record<string, unknown>) => (body.messages as { role: string; content: unknown }[]).map((m) => [m.role, m.content]);
    expect(roles(buildChatRequest(irRequest({ messages }), base).body)).toEqual([['system', 'A\n\nB\n\nC'], ['user', 'task']]);
    expect(roles(buildChatRequest(irRequest({ messages }), { ...base, systemMessages: 'in-place' }).body)).toEqual([['system', 'A\n\nB'], ['user', 'task'], ['system', 'C']]);
  });

  test('whitespace-only text next to tool calls is echoed as null content (keeps the next prompt an extension)', () => {
    const call = { id: 'c1', name: 'bash', arguments: '{"command":"ls"}' };
    const messages = (text: string) => [
      { role: 'user' as const, content: [{ type: 'text' as const, text: 'hi' }] },
      { role: 'assistant' as const, content: [{ type: 'text' as const, text }], toolCalls: [call] },
    ];
    const opts = { servedModel: 'm', defaults: DEFAULT_SAMPLING, reasoningField: 'reasoning' as const };
    const assistant = (text: string) => (buildChatRequest(irRequest({ messages: messages(text) }), opts).body.messages as { content: unknown }[])[1]!;
    expect(assistant('\n\n').content).toBeNull();
    expect(assistant('').content).toBeNull();
    expect(assistant('Running ls.').content).toBe('Running ls.');
  });
});

describe('chat-mode engines against the fake engine', () => {
  let vllm: FakeEngine;
  let sglang: FakeEngine;
  let oldSglang: FakeEngine;
  beforeAll(async () => {
    const script = [{ kind: 'tool-calls' as const, calls: [{ name: 'Bash', arguments: { command: 'ls' } }, { name: 'Bash', arguments: { command: 'pwd' } }], reasoning: 'two calls' }];
    vllm = await startFakeEngine({ shape: 'vllm', servedModel: 'qwen3', script });
    sglang = await startFakeEngine({ shape: 'sglang', servedModel: 'qwen3', script, weightVersion: '7' });
    oldSglang = await startFakeEngine({ shape: 'sglang', servedModel: 'qwen3', script, acceptsReturnTokenIds: false });
  });
  afterAll(async () => {
    await Promise.all([vllm.stop(), sglang.stop(), oldSglang.stop()]);
  });

  test('vLLM and SGLang shapes give the same response and capture; the requested model is restored', async () => {
    const results = [];
    for (const [engine, kind] of [[vllm, 'vllm'], [sglang, 'sglang'], [oldSglang, 'sglang']] as const) {
      const client = createEngineClient(config(engine, kind));
      await client.probe();
      expect(client.servedModel()).toBe('qwen3');
      const result = await client.complete(irRequest(), ctx);
      expect(result.response.model).toBe('claude-sonnet-4-5');
      expect(result.capture?.captureError).toBeNull();
      results.push(result);
    }
    const [a, b, c] = results;
    expect(b!.response).toEqual({ ...a!.response, id: b!.response.id });
    expect(b!.capture).toEqual(a!.capture);
    expect(c!.capture).toEqual(a!.capture);
    expect(a!.response.toolCalls.map((call) => call.arguments)).toEqual(['{"command":"ls"}', '{"command":"pwd"}']);
    expect(a!.response.reasoning).toEqual({ text: 'two calls' });
    expect(a!.response.finishReason).toEqual({ unified: 'tool-calls', raw: 'tool_calls' });
    const ids = a!.capture!.responseIds;
    expect(ids.at(-1)).toBe(EOS_ID);
    expect(a!.capture!.logprobs).toEqual(ids.map((_, k) => fakeLogprob(k)));
    expect(b!.policyVersion).toBe('7');
    expect(a!.policyVersion).toBeNull();
  });

  test('capture flags, served model, headers and rid reach the engine', async () => {
    const last = (engine: FakeEngine) => engine.chatRequests().at(-1)!;
    const v = last(vllm);
    expect(v.body).toMatchObject({ model: 'qwen3', logprobs: true, top_logprobs: 0, return_token_ids: true, stream: false });
    expect(v.headers['x-polar-session']).toBe('sess-1');
    expect(v.headers['x-polar-task']).toBe('task-1');
    expect((v.body.messages as unknown[])[0]).toEqual({ role: 'system', content: 'You are helpful.' });
    const s = last(sglang);
    expect(s.body).toMatchObject({ logprobs: true, return_prompt_token_ids: true, return_meta_info: true, return_token_ids: true, rid: 'sess-1:req-1' });
    expect(last(oldSglang).body.return_token_ids).toBeUndefined();
  });

  test('the probe reports field names and the vLLM reasoning field', async () => {
    const client = createEngineClient(config(vllm, 'vllm'));
    await client.probe();
    expect(client.probeReport()).toMatchObject({
      servedModel: 'qwen3',
      reasoningField: 'reasoning',
      captureFields: { promptIds: 'prompt_token_ids', responseIds: 'choices[0].token_ids', logprobs: 'choices[0].logprobs.content[k].logprob' },
      captureError: null,
    });
    const old = await startFakeEngine({ shape: 'vllm', servedModel: 'qwen3', version: '0.9.2' });
    try {
      const oldClient = createEngineClient(config(old, 'vllm'));
      await oldClient.probe();
      expect(oldClient.probeReport()?.reasoningField).toBe('reasoning_content');
    } finally {
      await old.stop();
    }
  });

  test('a configured served model that the engine does not serve fails the probe clearly', async () => {
    const client = createEngineClient(config(vllm, 'vllm', { servedModel: 'nope' }));
    await expect(client.probe()).rejects.toThrow('does not serve model "nope"');
  });

  test('countTokens uses the engine /tokenize with the rendered messages', async () => {
    const client = createEngineClient(config(vllm, 'vllm'));
    const n = await client.countTokens(irRequest(), ctx);
    const sent = vllm.requests.filter((r) => r.path === '/tokenize').at(-1)!;
    expect(sent.body.add_generation_prompt).toBe(true);
    expect(n).toBe(fakeIds(JSON.stringify({ messages: sent.body.messages, tools: sent.body.tools })).length);
  });
});

describe('capture checks and errors', () => {
  test('a logprob/id length mismatch becomes captureError, not a silent gap', async () => {
    const engine = await startFakeEngine({ shape: 'vllm', dropLastLogprob: true, script: [{ kind: 'text', text: 'hello' }] });
    try {
      const client = createEngineClient(config(engine, 'vllm'));
      const result = await client.complete(irRequest(), ctx);
      expect(result.capture?.captureError).toContain('logprobs for');
      expect(result.capture!.logprobs.length).toBe(result.capture!.responseIds.length - 1);
    } finally {
      await engine.stop();
    }
  });

  test('engine 5xx → upstream 502, hang → timeout 504, overflow → context-overflow, other 4xx → invalid-request with the engine message', async () => {
    for (const shape of ['vllm', 'sglang'] as const) {
      const engine = await startFakeEngine({
        shape,
        script: [
          { kind: 'error', status: 500, message: 'CUDA out of memory' },
          { kind: 'hang' },
          { kind: 'context-overflow' },
          { kind: 'error', status: 400, message: 'temperature must be non-negative' },
        ],
      });
      try {
        const client = createEngineClient(config(engine, shape, { timeoutMs: 300 }));
        await client.probe();
        const kinds: Array<[string, number, string]> = [];
        for (let i = 0; i < 4; i++) {
          try {
            await client.complete(irRequest(), ctx);
            kinds.push(['none', 0, '']);
          } catch (thrown) {
            const error = thrown as GatewayError;
            expect(error).toBeInstanceOf(GatewayError);
            kinds.push([error.kind, error.status, error.message]);
          }
        }
        expect(kinds.map(([k, s]) => [k, s])).toEqual([['upstream', 502], ['timeout', 504], ['context-overflow', 400], ['invalid-request', 400]]);
        expect(kinds[0]![2]).toContain('CUDA out of memory');
        expect(kinds[3]![2]).toBe('temperature must be non-negative');
      } finally {
        await engine.stop();
      }
    }
  });

  test('connection refused → upstream', async () => {
    const engine = await startFakeEngine({ shape: 'vllm' });
    const url = engine.url;
    await engine.stop();
    const client = createEngineClient({ kind: 'vllm', url, mode: 'chat', timeoutMs: 1000, servedModel: 'fake-model' });
    const error = await client.complete(irRequest(), ctx).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GatewayError);
    expect((error as GatewayError).kind).toBe('upstream');
    expect((error as GatewayError).status).toBe(502);
  });

  test('a 200 answer that is not JSON (or is cut inside prompt_token_ids) → upstream 502 naming the body', async () => {
    for (const body of ['<html>bad gateway</html>', '{"choices":[{"message":{"content":"x"}}],"prompt_token_ids":[1,2,3']) {
      const server = Bun.serve({
        port: 0,
        hostname: '127.0.0.1',
        fetch: (req) => (new URL(req.url).pathname === '/v1/models' ? Response.json({ data: [{ id: 'fake-model' }] }) : new Response(body, { headers: { 'content-type': 'application/json' } })),
      });
      try {
        const client = createEngineClient({ kind: 'vllm', url: `http://127.0.0.1:${server.port}`, mode: 'chat', timeoutMs: 1000, servedModel: 'fake-model' });
        const error = (await client.complete(irRequest(), ctx).catch((e: unknown) => e)) as GatewayError;
        expect(error).toBeInstanceOf(GatewayError);
        expect([error.kind, error.status]).toEqual(['upstream', 502]);
        expect(error.message).toContain('not JSON');
        expect(error.message).toContain(body.slice(0, 20));
      } finally {
        server.stop(true);
      }
    }
  });

  test('kind openai: no capture flags, capture null, a warning on every completion', async () => {
    const engine = await startFakeEngine({ shape: 'vllm', script: [{ kind: 'text', text: 'plain' }] });
    try {
      const client = createEngineClient(config(engine, 'openai'));
      const result = await client.complete(irRequest(), ctx);
      expect(result.capture).toBeNull();
      expect(result.warnings.map((w) => w.code)).toContain('no-token-capture');
      expect(engine.chatRequests().at(-1)!.body.return_token_ids).toBeUndefined();
      expect(client.id).toBe(`openai@${engine.url}`);
    } finally {
      await engine.stop();
    }
  });

  test('kind sim talks the vLLM contract with engine_id sim@<url>; openai in token mode and llamacpp in chat mode are rejected', () => {
    const client = createEngineClient({ kind: 'sim', url: 'http://127.0.0.1:9', mode: 'chat', timeoutMs: 1 });
    expect(client.id).toBe('sim@http://127.0.0.1:9');
    expect(() => createEngineClient({ kind: 'openai', url: 'http://x', mode: 'token', timeoutMs: 1 })).toThrow('token');
    expect(() => createEngineClient({ kind: 'llamacpp', url: 'http://x', mode: 'chat', timeoutMs: 1 })).toThrow('llamacpp');
    expect(() => createEngineClient({ kind: 'vllm', url: 'not a url', mode: 'chat', timeoutMs: 1 })).toThrow('not a valid URL');
  });
});
