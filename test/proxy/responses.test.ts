/**
 * The proxy's OpenAI Responses route through the official openai SDK (`client.responses.create` / `.stream`), against
 * the fake engine in vLLM and SGLang shape: text, tool calls (function, custom → custom_tool_call, namespace),
 * reasoning replayed through our encrypted_content, truncation, errors before and after the first byte, capture.
 */
import OpenAI from 'openai';
import { describe, expect, test } from 'bun:test';
import { fakeLogprob, type FakeReply } from '../support/fake-engine.ts';
import { expectedResponseIds, scenarioByMarker, sessionRecords, useProxyPerShape, type TestProxy } from '../support/proxy-harness.ts';

const PATCH = '*** Begin Patch\n*** Add File: hello.txt\n+héllo ✓\n*** End Patch';

const scenarios: Record<string, FakeReply> = {
  text: { kind: 'text', text: 'Voilà: héllo ✓ 🎉' },
  tool: { kind: 'tool-calls', calls: [{ name: 'exec_command', arguments: { cmd: 'ls' } }] },
  parallel: { kind: 'tool-calls', calls: [{ name: 'exec_command', arguments: { cmd: 'ls' } }, { name: 'exec_command', arguments: { cmd: 'pwd' } }] },
  custom: { kind: 'tool-calls', calls: [{ name: 'apply_patch', arguments: { input: PATCH } }] },
  namespace: { kind: 'tool-calls', calls: [{ name: 'multi_agent_v1__spawn_agent', arguments: { task: 'review' } }] },
  reasoning: { kind: 'text', text: 'The answer is 4.', reasoning: 'Two plus two is four.' },
  length: { kind: 'length', text: 'This reply was cut off by the tok' },
  fail500: { kind: 'error', status: 500, message: 'engine exploded' },
};

const scenarioOf = scenarioByMarker(scenarios);

const tools: OpenAI.Responses.Tool[] = [
  { type: 'function', name: 'exec_command', description: 'Run a command', strict: false, parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] } },
  { type: 'custom', name: 'apply_patch', description: 'Edit files', format: { type: 'grammar', syntax: 'lark', definition: 'start: /(.|\\n)+/' } },
  {
    type: 'namespace',
    name: 'multi_agent_v1',
    description: 'Sub-agents',
    tools: [{ type: 'function', name: 'spawn_agent', parameters: { type: 'object', properties: { task: { type: 'string' } } } }],
  } as unknown as OpenAI.Responses.Tool,
  { type: 'web_search' } as OpenAI.Responses.Tool,
];

const { engines, proxies } = useProxyPerShape({ script: scenarioOf, timeoutMs: 2000 });

const client = (proxy: TestProxy, key: string) => new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: key, maxRetries: 0 });

const okScenarios = ['text', 'tool', 'parallel', 'custom', 'namespace', 'reasoning', 'length'] as const;

describe.each(['vllm', 'sglang'] as const)('engine shape %s', (shape) => {
  for (const stream of [false, true]) {
    test(`responses.${stream ? 'stream' : 'create'}: every scenario answers in Responses items and is recorded`, async () => {
      const proxy = proxies[shape];
      const session = `resp-${shape}-${stream}`;
      const openai = client(proxy, session);
      for (const name of okScenarios) {
        const params = {
          model: 'gpt-5.5',
          instructions: 'be brief',
          input: [{ type: 'message' as const, role: 'user' as const, content: `scenario:${name}` }],
          tools,
          max_output_tokens: 256,
          store: false,
          ...(name === 'reasoning' ? { reasoning: { effort: 'medium' as const } } : {}),
        };
        const events: OpenAI.Responses.ResponseStreamEvent[] = [];
        const response = stream ? await openai.responses.stream(params).on('event', (e) => events.push(e)).finalResponse() : await openai.responses.create(params);
        // Output items never interleave (OpenAI's order): the output_index of item events never goes back.
        const indices = events.flatMap((e) => ('output_index' in e ? [e.output_index] : []));
        expect(indices).toEqual([...indices].sort((a, b) => a - b));
        // The response object echoes the request's settings, from response.created on: the tools the model was shown
        // as sent (web_search was not), instructions, limits.
        const objects = [response, ...events.flatMap((e) => ('response' in e ? [e.response] : []))];
        expect(objects.length).toBe(stream ? 4 : 1);
        for (const object of objects) {
          expect(object.tools).toEqual(tools.filter((t) => t.type !== 'web_search'));
          expect(object).toMatchObject({ instructions: 'be brief', tool_choice: 'auto', max_output_tokens: 256, store: false });
        }
        expect(response.object).toBe('response');
        expect(response.id.startsWith('resp_')).toBe(true);
        expect(response.model).toBe('gpt-5.5');
        expect(response.usage).toMatchObject({ input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: expect.any(Number) } });
        expect(response.usage!.total_tokens).toBe(response.usage!.input_tokens + response.usage!.output_tokens);
        const types = response.output.map((item) => item.type);
        switch (name) {
          case 'text':
            expect(response.output_text).toBe('Voilà: héllo ✓ 🎉');
            expect(response.status).toBe('completed');
            break;
          case 'tool':
          case 'parallel': {
            const calls = response.output.filter((item) => item.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall[];
            expect(calls.map((c) => JSON.parse(c.arguments))).toEqual(name === 'tool' ? [{ cmd: 'ls' }] : [{ cmd: 'ls' }, { cmd: 'pwd' }]);
            expect(new Set(calls.map((c) => c.call_id)).size).toBe(calls.length);
            break;
          }
          case 'custom':
            expect(response.output).toEqual([expect.objectContaining({ type: 'custom_tool_call', name: 'apply_patch', input: PATCH })]);
            break;
          case 'namespace':
            expect(response.output).toEqual([expect.objectContaining({ type: 'function_call', name: 'spawn_agent', namespace: 'multi_agent_v1', arguments: '{"task":"review"}' })]);
            break;
          case 'reasoning':
            expect(types).toEqual(['reasoning', 'message']);
            expect(response.output_text).toBe('The answer is 4.');
            expect((response.output[0] as OpenAI.Responses.ResponseReasoningItem).encrypted_content).toBeString();
            break;
          case 'length':
            expect(response.status).toBe('incomplete');
            expect(response.incomplete_details).toEqual({ reason: 'max_output_tokens' });
            break;
        }
      }
      const recs = await sessionRecords(proxy, session);
      expect(recs.map((r) => r.seq)).toEqual(okScenarios.map((_, i) => i));
      for (const [i, rec] of recs.entries()) {
        expect(rec.dialect).toBe('openai-responses');
        expect(rec.capture_error).toBeNull();
        expect(rec.response_ids).toEqual(expectedResponseIds(scenarios[okScenarios[i]!]!));
        expect(rec.logprobs).toEqual(rec.response_ids.map((_, k) => fakeLogprob(k)));
      }
      // The engine saw functions only: web_search dropped, custom and namespace flattened.
      const engineTools = (engines[shape].chatRequests().at(-1)!.body.tools as { function: { name: string } }[]).map((t) => t.function.name);
      expect(engineTools).toEqual(['exec_command', 'apply_patch', 'multi_agent_v1__spawn_agent']);
    });
  }

  test('a two-turn loop: the reasoning item and custom tool call replay into the engine conversation', async () => {
    const proxy = proxies[shape];
    const openai = client(proxy, `resp-loop-${shape}`);
    const first = await openai.responses.create({ model: 'gpt-5.5', input: 'scenario:custom', tools, store: false, include: ['reasoning.encrypted_content'] });
    const call = first.output[0] as OpenAI.Responses.ResponseCustomToolCall;
    const reasoning = { type: 'reasoning' as const, id: 'rs_prev', summary: [], encrypted_content: (await openai.responses.create({ model: 'gpt-5.5', input: 'scenario:reasoning', reasoning: { effort: 'low' } })).output.find((i) => i.type === 'reasoning')!.encrypted_content! };
    await openai.responses.create({
      model: 'gpt-5.5',
      tools,
      store: false,
      input: [
        { type: 'message', role: 'user', content: 'scenario:custom' },
        reasoning,
        { type: 'custom_tool_call', id: call.id, call_id: call.call_id, name: call.name, input: call.input },
        { type: 'custom_tool_call_output', call_id: call.call_id, output: 'Done!' },
        { type: 'message', role: 'user', content: 'scenario:text' },
      ],
    });
    const messages = engines[shape].chatRequests().at(-1)!.body.messages as Record<string, unknown>[];
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'user']);
    expect(JSON.stringify(messages[1])).toContain('Two plus two is four.');
    expect(JSON.stringify(messages[1])).toContain(JSON.stringify(JSON.stringify({ input: PATCH })).slice(1, -1));
    expect(messages[2]).toMatchObject({ tool_call_id: call.call_id, content: 'Done!' });
  });
});

describe('errors', () => {
  test('previous_response_id → 400 BadRequestError with a clear message; unknown route dialect errors stay OpenAI-shaped', async () => {
    const openai = client(proxies.vllm, 'resp-errors');
    const error = await openai.responses.create({ model: 'gpt-5.5', input: 'hi', previous_response_id: 'resp_123' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).message).toContain('previous_response_id is not supported');
    const bad = await fetch(`${proxies.vllm.url}/v1/responses`, { method: 'POST', headers: { authorization: 'Bearer k', 'content-type': 'application/json' }, body: '{"model": "m"' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { type: string } }).error.type).toBe('invalid_request_error');
  });

  test('engine 5xx before the first byte: 502, streaming or not (after it, response.failed: streaming.test.ts)', async () => {
    const openai = client(proxies.sglang, 'resp-fail');
    for (const stream of [false, true]) {
      const error = await openai.responses.create({ model: 'gpt-5.5', input: 'scenario:fail500', stream }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.APIError);
      expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
      expect((error as Error).message).toContain('engine exploded');
    }
    expect(await sessionRecords(proxies.sglang, 'resp-fail')).toEqual([]);
  });
});
