/** OpenAI Responses codec: recorded Codex/pi requests, tool mapping both ways, reasoning payload, SSE sequence. */
import { describe, expect, test } from 'bun:test';
import type { CodecContext } from '../../src/core/dialect.ts';
import { GatewayError } from '../../src/core/errors.ts';
import type { IRRequest, IRResponse } from '../../src/core/ir.ts';
import { responseToStreamEvents, type IRStreamEvent } from '../../src/core/stream.ts';
import { decodeReasoningPayload, encodeReasoningPayload, openaiResponses } from '../../src/dialects/openai-responses/index.ts';
import { codecContext, dialectFixtureDir, irResponseFactory } from '../support/dialects.ts';

const fixtureDir = dialectFixtureDir('openai-responses');
const fixture = async (name: string) => ((await Bun.file(`${fixtureDir}/${name}`).json()) as { body: Record<string, unknown> }).body;
const ctx = (request?: IRRequest): CodecContext => codecContext(request ? { request } : {});

const irResponse = irResponseFactory({
  id: 'chatcmpl-1', model: 'gpt-5.5', createdAt: 1_700_000_000_500,
  usage: { inputTokens: 120, outputTokens: 30, cachedInputTokens: 64, reasoningTokens: 7 },
});

/** Parse SSE text into [{event, data}] frames, skipping comments. */
function parseSse(text: string): { event: string | undefined; data: Record<string, unknown> }[] {
  const frames: { event: string | undefined; data: Record<string, unknown> }[] = [];
  for (const block of text.split('\n\n')) {
    if (!block.trim()) continue;
    let event: string | undefined;
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;
      if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) data.push(line.slice(6));
    }
    if (data.length) frames.push({ event, data: JSON.parse(data.join('\n')) });
  }
  return frames;
}

function streamText(events: IRStreamEvent[], c: CodecContext): string {
  const encoder = openaiResponses.createStreamEncoder(c);
  let out = '';
  for (const event of events) out += encoder.push(event);
  return out + encoder.end();
}

function startEvent(response: IRResponse): IRStreamEvent {
  return { type: 'start', id: response.id, model: response.model, createdAt: response.createdAt, inputTokens: 0 };
}

describe('decodeRequest on recorded traffic', () => {
  test('every recorded request decodes', async () => {
    for (const name of ['codex-quiet-001-request.json', 'codex-quiet-002-request.json', 'pi-responses-001-request.json', 'pi-responses-002-request.json']) {
      const ir = openaiResponses.decodeRequest(await fixture(name), ctx());
      expect(ir.messages[0]?.role).toBe('system');
      expect(ir.messages.some((m) => m.role === 'user')).toBe(true);
      expect(ir.stream).toBe(true);
      expect(ir.tools.length).toBeGreaterThan(3);
    }
  });

  test('Codex turn 2: developer items stay system messages where they stand; function_call and its output pair up by call_id', async () => {
    const ir = openaiResponses.decodeRequest(await fixture('codex-quiet-002-request.json'), ctx());
    expect(ir.messages.map((m) => m.role)).toEqual(['system', 'system', 'user', 'user', 'assistant', 'tool']);
    const assistant = ir.messages[4]!;
    const tool = ir.messages[5]!;
    expect(assistant.role === 'assistant' && assistant.toolCalls).toEqual([
      { id: 'call_2bd8b74980c43eb83e649d39', name: 'exec_command', arguments: '{"cmd":"ls"}' },
    ]);
    expect(tool).toMatchObject({ role: 'tool', toolCallId: 'call_2bd8b74980c43eb83e649d39', name: 'exec_command' });
    expect(ir.reasoning).toEqual({ enabled: true, effort: 'medium' });
    expect(ir.parallelToolCalls).toBe(true);
    expect(ir.toolChoice).toBe('auto');
  });

  test('pi: a role-only system item and max_output_tokens', async () => {
    const ir = openaiResponses.decodeRequest(await fixture('pi-responses-002-request.json'), ctx());
    expect(ir.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
    expect(ir.sampling).toEqual({ maxTokens: 8192 });
    expect(ir.tools.map((t) => t.name)).toEqual(['read', 'bash', 'edit', 'write']);
    expect(ir.warnings).toEqual([]);
  });

  test('Codex tools with custom, namespace, tool_search and web_search: the model sees functions only', async () => {
    const body = await fixture('codex-quiet-001-request.json');
    const tools = [...(body.tools as unknown[])];
    // The recorded run had no namespace tool (Codex sends one for unknown model names); add the shape it sends.
    tools.push({
      type: 'namespace',
      name: 'multi_agent_v1',
      description: 'Tools for spawning and managing sub-agents.',
      tools: [
        { type: 'function', name: 'spawn_agent', description: 'Spawn a sub-agent.', parameters: { type: 'object', properties: { task: { type: 'string' } }, required: ['task'] } },
        { type: 'function', name: 'close_agent', parameters: { type: 'object', properties: { id: { type: 'string' } } } },
      ],
    });
    const ir = openaiResponses.decodeRequest({ ...body, tools }, ctx());
    const names = ir.tools.map((t) => t.name);
    expect(names).toContain('apply_patch');
    expect(names).toContain('multi_agent_v1__spawn_agent');
    expect(names).toContain('multi_agent_v1__close_agent');
    expect(names.some((n) => n.includes('search'))).toBe(false);
    for (const tool of ir.tools) expect(tool.parameters.type).toBe('object');
    const patch = ir.tools.find((t) => t.name === 'apply_patch')!;
    expect(patch.origin.kind).toBe('custom');
    expect(patch.parameters).toMatchObject({ properties: { input: { type: 'string' } }, required: ['input'] });
    expect(patch.description).toContain('<vendor text: 578 chars>'); // the lark grammar goes into what the model reads
    expect(ir.tools.find((t) => t.name === 'multi_agent_v1__spawn_agent')!.origin).toEqual({
      kind: 'namespace',
      namespace: 'multi_agent_v1',
      originalName: 'spawn_agent',
    });
    expect(ir.warnings.filter((w) => w.code === 'tool-dropped').map((w) => w.message)).toEqual([
      'tools[8]: tool type "tool_search" cannot run locally and was not shown to the model',
      'tools[9]: tool type "web_search" cannot run locally and was not shown to the model',
    ]);
  });
});

describe('decodeRequest rules', () => {
  const base = { model: 'm', input: 'hi' };

  test('string input and instructions', () => {
    const ir = openaiResponses.decodeRequest({ ...base, instructions: 'be brief', temperature: 0.7, top_p: 0.9 }, ctx());
    expect(ir.messages).toEqual([
      { role: 'system', content: [{ type: 'text', text: 'be brief' }] },
      { role: 'user', content: [{ type: 'text', text: 'hi' }] },
    ]);
    expect(ir.sampling).toEqual({ temperature: 0.7, topP: 0.9 });
    expect(ir.stream).toBe(false);
  });

  test('previous_response_id is a clear 400', () => {
    let thrown: unknown;
    try {
      openaiResponses.decodeRequest({ ...base, previous_response_id: 'resp_abc' }, ctx());
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(GatewayError);
    expect((thrown as GatewayError).status).toBe(400);
    expect((thrown as GatewayError).message).toContain('previous_response_id is not supported');
    expect(openaiResponses.encodeError(thrown as GatewayError).body.error).toMatchObject({ type: 'invalid_request_error', param: 'previous_response_id' });
  });

  test('bad bodies name the field', () => {
    expect(() => openaiResponses.decodeRequest({ model: 'm' }, ctx())).toThrow(/input/);
    expect(() => openaiResponses.decodeRequest({ ...base, input: [{ type: 'function_call', name: 'x', arguments: '{}' }] }, ctx())).toThrow(/input\[0\]\.call_id/);
    expect(() => openaiResponses.decodeRequest('nope', ctx())).toThrow(GatewayError);
    // A bad part inside `content` (a string or a list of parts) is named at the part, not as the union's "Invalid input".
    expect(() => openaiResponses.decodeRequest({ ...base, input: [{ role: 'user', content: [{ type: 'input_text', text: 3 }] }] }, ctx())).toThrow(
      'input[0].content[0].text: Invalid input: expected string, received number',
    );
    expect(() => openaiResponses.decodeRequest({ ...base, input: [{ role: 'user', content: 5 }] }, ctx())).toThrow(/^input\[0\]\.content: /);
  });

  test('unknown fields are warnings, not errors; text.format json_schema becomes the IR response format', () => {
    const schema = { type: 'object', properties: { a: { type: 'string' } } };
    const ir = openaiResponses.decodeRequest({ ...base, frobnicate: 1, text: { format: { type: 'json_schema', name: 'x', schema } }, prompt_cache_key: 'k' }, ctx());
    expect(ir.warnings.map((w) => w.code).sort()).toEqual(['unknown-field']);
    expect(ir.responseFormat).toEqual({ type: 'json_schema', name: 'x', schema });
  });

  test('reasoning items: ours decode to the exact text, foreign payloads are dropped with a warning', () => {
    const ours = encodeReasoningPayload({ text: 'let me think: ünïcode ✓', signature: 'sig-1' });
    const ir = openaiResponses.decodeRequest(
      {
        ...base,
        input: [
          { type: 'message', role: 'user', content: 'q1' },
          { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: ours },
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'a1', annotations: [] }] },
          { type: 'message', role: 'user', content: 'q2' },
          { type: 'reasoning', id: 'rs_2', summary: [{ type: 'summary_text', text: 'sum' }], encrypted_content: 'gAAAAABfake-fernet-token' },
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'a2', annotations: [] }] },
        ],
      },
      ctx(),
    );
    expect(ir.messages[1]).toEqual({ role: 'assistant', content: [{ type: 'text', text: 'a1' }], reasoning: { text: 'let me think: ünïcode ✓', signature: 'sig-1' } });
    expect(ir.messages[3]).toEqual({ role: 'assistant', content: [{ type: 'text', text: 'a2' }] });
    expect(ir.warnings.map((w) => w.code)).toEqual(['reasoning-dropped']);
    expect(decodeReasoningPayload('gAAAAABfake')).toBeNull();
    expect(decodeReasoningPayload(Buffer.from('{"v":2,"text":"x"}').toString('base64url'))).toBeNull();
  });

  test('custom_tool_call and its output replay as one assistant turn with {"input"} arguments', () => {
    const patch = '*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch';
    const ir = openaiResponses.decodeRequest(
      {
        ...base,
        tools: [{ type: 'custom', name: 'apply_patch', format: { type: 'grammar', syntax: 'lark', definition: 'start: /.+/' } }],
        input: [
          { type: 'message', role: 'user', content: 'patch it' },
          { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: encodeReasoningPayload({ text: 'plan' }) },
          { type: 'custom_tool_call', id: 'ctc_1', call_id: 'call_9', name: 'apply_patch', input: patch },
          { type: 'custom_tool_call_output', call_id: 'call_9', output: 'Success' },
          { type: 'function_call', call_id: 'call_10', name: 'spawn_agent', namespace: 'multi_agent_v1', arguments: '{"task":"x"}' },
          { type: 'function_call_output', call_id: 'call_10', output: [{ type: 'input_text', text: 'ok' }] },
        ],
      },
      ctx(),
    );
    expect(ir.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'patch it' }] },
      { role: 'assistant', content: [], reasoning: { text: 'plan' }, toolCalls: [{ id: 'call_9', name: 'apply_patch', arguments: JSON.stringify({ input: patch }) }] },
      { role: 'tool', toolCallId: 'call_9', name: 'apply_patch', content: [{ type: 'text', text: 'Success' }] },
      { role: 'assistant', content: [], toolCalls: [{ id: 'call_10', name: 'multi_agent_v1__spawn_agent', arguments: '{"task":"x"}' }] },
      { role: 'tool', toolCallId: 'call_10', name: 'multi_agent_v1__spawn_agent', content: [{ type: 'text', text: 'ok' }] },
    ]);
  });
});

describe('encodeResponse', () => {
  const request = (): IRRequest => {
    const ir = openaiResponses.decodeRequest(
      {
        model: 'gpt-5.5',
        input: 'go',
        temperature: 0.6,
        tools: [
          { type: 'function', name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' } } } },
          { type: 'custom', name: 'apply_patch' },
          { type: 'namespace', name: 'multi_agent_v1', description: 'd', tools: [{ type: 'function', name: 'spawn_agent', parameters: { type: 'object' } }] },
        ],
      },
      ctx(),
    );
    return ir;
  };

  test('a call to the custom tool comes back as custom_tool_call; namespace members with their own name', () => {
    const req = request();
    const body = openaiResponses.encodeResponse(
      irResponse({
        toolCalls: [
          { id: 'call_1', name: 'apply_patch', arguments: '{"input":"*** Begin Patch\\n*** End Patch"}' },
          { id: 'call_2', name: 'multi_agent_v1__spawn_agent', arguments: '{"task":"t"}' },
          { id: 'call_3', name: 'exec_command', arguments: '{"cmd":"ls"}' },
        ],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
      }),
      ctx(req),
    );
    expect(body.output).toEqual([
      { id: 'ctc_1', type: 'custom_tool_call', call_id: 'call_1', name: 'apply_patch', input: '*** Begin Patch\n*** End Patch' },
      { id: 'fc_2', type: 'function_call', call_id: 'call_2', name: 'spawn_agent', namespace: 'multi_agent_v1', arguments: '{"task":"t"}', status: 'completed' },
      { id: 'fc_3', type: 'function_call', call_id: 'call_3', name: 'exec_command', arguments: '{"cmd":"ls"}', status: 'completed' },
    ]);
    expect(body.status).toBe('completed');
    expect(body.temperature).toBe(0.6);
  });

  test('response object: ids, reasoning payload, message, complete usage', () => {
    const body = openaiResponses.encodeResponse(
      irResponse({ reasoning: { text: 'think' }, content: [{ type: 'text', text: 'Hello' }] }),
      ctx(),
    );
    expect(body).toMatchObject({
      id: 'resp_chatcmpl-1',
      object: 'response',
      created_at: 1_700_000_000,
      status: 'completed',
      error: null,
      incomplete_details: null,
      model: 'gpt-5.5',
      usage: {
        input_tokens: 120,
        input_tokens_details: { cached_tokens: 64 },
        output_tokens: 30,
        output_tokens_details: { reasoning_tokens: 7 },
        total_tokens: 150,
      },
    });
    const [reasoning, message] = body.output;
    expect(reasoning).toMatchObject({ id: 'rs_1', type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text: 'think' }] });
    expect(decodeReasoningPayload(reasoning!.encrypted_content as string)).toEqual({ text: 'think' });
    expect(message).toEqual({
      id: 'msg_2',
      type: 'message',
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: 'Hello', annotations: [], logprobs: [] }],
    });
  });

  test('truncation → incomplete with max_output_tokens', () => {
    const body = openaiResponses.encodeResponse(irResponse({ content: [{ type: 'text', text: 'cut' }], finishReason: { unified: 'length', raw: 'length' } }), ctx());
    expect(body.status).toBe('incomplete');
    expect(body.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(body.output.map((item) => (item as { status?: string }).status)).toEqual(['incomplete']);
    expect(openaiResponses.decodeResponse(body, ctx()).finishReason).toEqual({ unified: 'length', raw: 'max_output_tokens' });
  });

  test('decodeResponse inverts encodeResponse (with the request tools)', () => {
    const req = request();
    const response = irResponse({
      id: 'resp_x',
      reasoning: { text: 'r', signature: 's' },
      content: [{ type: 'text', text: 'done' }],
      toolCalls: [
        { id: 'call_1', name: 'apply_patch', arguments: '{"input":"p"}' },
        { id: 'call_2', name: 'multi_agent_v1__spawn_agent', arguments: '{}' },
      ],
      finishReason: { unified: 'tool-calls', raw: 'completed' },
      createdAt: 1_700_000_001_000,
    });
    expect(openaiResponses.decodeResponse(openaiResponses.encodeResponse(response, ctx(req)), ctx())).toEqual(response);
  });
});

describe('response object echo (https://platform.openai.com/docs/api-reference/responses/object)', () => {
  const echoed = (body: Record<string, unknown>) => {
    const request = openaiResponses.decodeRequest(body, ctx());
    const c = () => codecContext({ request, requestBody: body });
    const response = irResponse({ toolCalls: [{ id: 'call_1', name: 'exec_command', arguments: '{"cmd":"ls"}' }], finishReason: { unified: 'tool-calls', raw: 'tool_calls' } });
    const frames = parseSse(streamText([startEvent(response), ...responseToStreamEvents(response)], c()));
    const streamed = frames.filter((f) => (f.data.response as object | undefined) !== undefined).map((f) => [f.event, f.data.response as Record<string, unknown>] as const);
    expect(streamed.map(([event]) => event)).toEqual(['response.created', 'response.in_progress', 'response.completed']);
    return { body: openaiResponses.encodeResponse(response, c()) as unknown as Record<string, unknown>, streamed: streamed.map(([, r]) => r) };
  };

  test('recorded Codex turn: the tools it sent (the ones the model saw, as sent), tool_choice, parallel_tool_calls, reasoning, prompt_cache_key', async () => {
    const codex = await fixture('codex-quiet-001-request.json');
    const { body, streamed } = echoed(codex);
    const sent = codex.tools as { type: string }[];
    const shown = sent.filter((t) => ['function', 'custom', 'namespace'].includes(t.type));
    expect(shown.length).toBe(sent.length - 2); // tool_search and web_search cannot run here and were not shown
    for (const response of [body, ...streamed]) {
      expect(response.tools).toEqual(shown);
      expect(response).toMatchObject({
        tool_choice: 'auto',
        parallel_tool_calls: true,
        reasoning: { effort: 'medium', summary: null },
        prompt_cache_key: codex.prompt_cache_key as string,
        instructions: null,
        store: false,
        text: { format: { type: 'text' } },
      });
    }
  });

  test('instructions, text.format, a namespaced tool_choice, metadata, user and safety_identifier come back as sent', () => {
    const format = { type: 'json_schema', name: 'answer', schema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false }, strict: true };
    const tools = [
      { type: 'function', name: 'exec_command', description: 'Run', strict: true, parameters: { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'], additionalProperties: false } },
      { type: 'namespace', name: 'multi_agent_v1', description: 'd', tools: [{ type: 'function', name: 'spawn_agent', parameters: { type: 'object' } }] },
    ];
    const { body, streamed } = echoed({
      model: 'gpt-5.5',
      instructions: 'be brief',
      input: 'go',
      tools,
      tool_choice: { type: 'function', name: 'spawn_agent', namespace: 'multi_agent_v1' },
      parallel_tool_calls: false,
      text: { format },
      metadata: { run: 'r1' },
      user: 'u-1',
      safety_identifier: 's-1',
      temperature: 0.6,
      top_p: 0.9,
      max_output_tokens: 64,
    });
    for (const response of [body, ...streamed]) {
      expect(response).toMatchObject({
        instructions: 'be brief',
        tools,
        tool_choice: { type: 'function', name: 'spawn_agent', namespace: 'multi_agent_v1' },
        parallel_tool_calls: false,
        text: { format },
        metadata: { run: 'r1' },
        user: 'u-1',
        safety_identifier: 's-1',
        temperature: 0.6,
        top_p: 0.9,
        max_output_tokens: 64,
      });
    }
  });

  test('without tools or settings: the API defaults', () => {
    const { body } = echoed({ model: 'gpt-5.5', input: 'go' });
    expect(body).toMatchObject({ instructions: null, tools: [], tool_choice: 'auto', parallel_tool_calls: true, text: { format: { type: 'text' } }, metadata: {}, user: null, safety_identifier: null, prompt_cache_key: null, temperature: null, top_p: null, max_output_tokens: null });
  });
});

describe('encodeRequest', () => {
  test('IR → wire → IR is lossless for a tool loop with reasoning, custom and namespace tools', async () => {
    const original = openaiResponses.decodeRequest(await fixture('codex-quiet-002-request.json'), ctx());
    const withTools: IRRequest = {
      ...original,
      messages: [
        ...original.messages,
        { role: 'assistant', content: [{ type: 'text', text: 'patching' }], reasoning: { text: 'why' }, toolCalls: [{ id: 'call_p', name: 'apply_patch', arguments: '{"input":"x"}' }] },
        { role: 'tool', toolCallId: 'call_p', name: 'apply_patch', content: [{ type: 'text', text: 'ok' }] },
      ],
      warnings: [],
    };
    const again = openaiResponses.decodeRequest(openaiResponses.encodeRequest(withTools), ctx());
    expect(again.messages).toEqual(withTools.messages);
    expect(again.tools.map((t) => [t.name, t.origin.kind])).toEqual(withTools.tools.map((t) => [t.name, t.origin.kind]));
    expect(again.sampling).toEqual(withTools.sampling);
    expect(again.reasoning).toEqual(withTools.reasoning);
  });
});

describe('stream encoder', () => {
  const full = () =>
    irResponse({
      reasoning: { text: 'thinking…' },
      content: [{ type: 'text', text: 'I will run ls.' }],
      toolCalls: [
        { id: 'call_a', name: 'exec_command', arguments: '{"cmd":"ls"}' },
        { id: 'call_b', name: 'apply_patch', arguments: '{"input":"*** Begin Patch"}' },
      ],
      finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
    });
  const req = () =>
    openaiResponses.decodeRequest(
      { model: 'gpt-5.5', input: 'x', tools: [{ type: 'function', name: 'exec_command' }, { type: 'custom', name: 'apply_patch' }] },
      ctx(),
    );

  test('the exact event sequence, with sequence_number on every event', () => {
    const response = full();
    const request = req();
    const text = streamText([startEvent(response), { type: 'keep-alive' }, ...responseToStreamEvents(response)], ctx(request));
    expect(text).toContain(': keep-alive\n\n');
    const frames = parseSse(text);
    for (const frame of frames) expect(frame.event).toBe(frame.data.type as string);
    expect(frames.map((f) => f.data.sequence_number)).toEqual(frames.map((_, i) => i));
    expect(frames.map((f) => f.event)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.reasoning_text.delta',
      'response.reasoning_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.custom_tool_call_input.delta',
      'response.custom_tool_call_input.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(frames[0]!.data.response).toMatchObject({ status: 'in_progress', output: [], usage: null });
  });

  test('SSE reassembly equals the non-streaming response', () => {
    const response = full();
    const request = req();
    const frames = parseSse(streamText([startEvent(response), ...responseToStreamEvents(response)], ctx(request)));
    const completed = frames.at(-1)!.data.response as Record<string, unknown>;
    expect(completed).toEqual(openaiResponses.encodeResponse(response, ctx(request)) as unknown as Record<string, unknown>);
    // Rebuild the output from the incremental events alone: it must match the final object.
    const items = new Map<number, Record<string, unknown>>();
    for (const { data } of frames) {
      const index = data.output_index as number;
      if (data.type === 'response.output_item.added') items.set(index, { ...(data.item as object) });
      const item = items.get(index);
      if (!item) continue;
      if (data.type === 'response.reasoning_text.delta') item.text = `${item.text ?? ''}${data.delta}`;
      if (data.type === 'response.output_text.delta') item.text = `${item.text ?? ''}${data.delta}`;
      if (data.type === 'response.function_call_arguments.delta') item.arguments = `${item.arguments}${data.delta}`;
      if (data.type === 'response.custom_tool_call_input.delta') item.input = `${item.input}${data.delta}`;
    }
    const output = completed.output as Record<string, unknown>[];
    expect(items.get(0)!.text).toBe((output[0]!.content as { text: string }[])[0]!.text);
    expect(items.get(1)!.text).toBe((output[1]!.content as { text: string }[])[0]!.text);
    expect(items.get(2)!.arguments).toBe(output[2]!.arguments);
    expect(items.get(3)!.input).toBe(output[3]!.input);
    expect(output[3]!.input).toBe('*** Begin Patch');
  });

  test('seeded random chunk splitting of the SSE bytes does not change what a parser sees', async () => {
    const response = full();
    const text = streamText([startEvent(response), ...responseToStreamEvents(response)], ctx(req()));
    const bytes = new TextEncoder().encode(text);
    const baseline = parseSse(text);
    for (const seed of [1, 2, 3, 42, 1234]) {
      let state = seed;
      const decoder = new TextDecoder();
      let buffer = '';
      const frames: ReturnType<typeof parseSse> = [];
      for (let offset = 0; offset < bytes.length; ) {
        state = (state * 1103515245 + 12345) & 0x7fffffff;
        const size = (state % 17) + 1; // 1..17 bytes: splits inside UTF-8 sequences and SSE lines
        buffer += decoder.decode(bytes.slice(offset, offset + size), { stream: true });
        offset += size;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          frames.push(...parseSse(buffer.slice(0, end + 2)));
          buffer = buffer.slice(end + 2);
        }
      }
      expect(buffer).toBe('');
      expect(frames).toEqual(baseline);
    }
  });

  test('truncation ends with response.incomplete; an error after the first byte with response.failed', () => {
    const cut = irResponse({ content: [{ type: 'text', text: 'par' }], finishReason: { unified: 'length', raw: 'length' } });
    const frames = parseSse(streamText([startEvent(cut), ...responseToStreamEvents(cut)], ctx()));
    expect(frames.at(-1)!.event).toBe('response.incomplete');
    expect(frames.at(-1)!.data.response).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });

    const failed = parseSse(
      streamText(
        [startEvent(cut), { type: 'text-delta', text: 'par' }, { type: 'error', error: new GatewayError('context-overflow', 'prompt is too long') }, { type: 'text-delta', text: 'ignored' }],
        ctx(),
      ),
    );
    expect(failed.map((f) => f.event).slice(-3)).toEqual(['response.content_part.done', 'response.output_item.done', 'response.failed']);
    expect(failed.at(-1)!.data.response).toMatchObject({
      status: 'failed',
      error: { code: 'context_length_exceeded', message: 'prompt is too long' },
      usage: { input_tokens: 0, input_tokens_details: { cached_tokens: 0 }, output_tokens: 0, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 0 },
    });
  });
});

test('encodeError renders the OpenAI error shape with the status of the kind', () => {
  expect(openaiResponses.encodeError(new GatewayError('authentication', 'unknown session'))).toEqual({
    status: 401,
    body: { error: { message: 'unknown session', type: 'authentication_error', param: null, code: 'invalid_api_key' } },
  });
  expect(openaiResponses.encodeError(new GatewayError('rate-limited', 'slow down')).status).toBe(429);
});

test('a length cut with text after an open tool call: each output_item.done has the status of the final object', () => {
  // A live stream can start a message while a tool call is still open (the IR ends calls only at finish); the item
  // the cut marks incomplete in response.incomplete must say so in its own output_item.done too.
  const response = irResponse({ content: [{ type: 'text', text: 'and more' }], toolCalls: [{ id: 'call_1', name: 'shell', arguments: '{"cmd":"ls"}' }], finishReason: { unified: 'length', raw: 'length' } });
  const events: IRStreamEvent[] = [
    { type: 'start', id: response.id, model: response.model, createdAt: response.createdAt, inputTokens: 0 },
    { type: 'tool-call-start', index: 0, id: 'call_1', name: 'shell' },
    { type: 'tool-call-delta', index: 0, argumentsDelta: '{"cmd":"ls"}' },
    { type: 'text-delta', text: 'and more' },
    { type: 'finish', finishReason: response.finishReason, usage: response.usage, response },
  ];
  const frames = parseSse(streamText(events, ctx()));
  const final = frames.at(-1)!.data.response as { status: string; output: { id: string; status?: string }[] };
  expect(final.status).toBe('incomplete');
  const done = new Map(frames.filter((f) => f.event === 'response.output_item.done').map((f) => {
    const item = f.data.item as { id: string; status?: string };
    return [item.id, item.status];
  }));
  expect(final.output.map((item) => done.get(item.id))).toEqual(final.output.map((item) => item.status));
  expect(final.output.filter((item) => item.status === 'incomplete')).toHaveLength(1);
});
