/**
 * Codec tests of the OpenAI Chat dialect: recorded pi and qwen-code requests, system/developer placement, round trips,
 * the chunk stream (reassembled and compared with the non-streaming body), seeded chunk splitting, errors, finish reasons.
 */
import { describe, expect, test } from 'bun:test';
import { ENGINE_CHAT_ENCODING, encodeChatMessages } from '../../src/dialects/openai-chat/encode-messages.ts';
import type { CodecContext } from '../../src/core/dialect.ts';
import { GatewayError } from '../../src/core/errors.ts';
import type { IRRequest, IRResponse } from '../../src/core/ir.ts';
import { responseToStreamEvents } from '../../src/core/stream.ts';
import { decodeFinishReason, encodeFinishReason, openaiChat } from '../../src/dialects/openai-chat/index.ts';
import { parseSse, parseSseChunks, reassembleOpenAIChat, splitAtRandom } from '../support/sse.ts';
import { codecContext, irResponseFactory, recordedRequests } from '../support/dialects.ts';

const fixtures = recordedRequests('openai-chat');

const ctx = (request?: IRRequest): CodecContext => codecContext({ request });
const decode = (body: unknown) => openaiChat.decodeRequest(body, ctx());
const withoutWarnings = (request: IRRequest) => ({ ...request, warnings: [] });

const response = irResponseFactory({
  id: 'chatcmpl-test', model: 'qwen3-coder-plus', createdAt: 1_700_000_123_456,
  usage: { inputTokens: 900, outputTokens: 55, cachedInputTokens: 512, reasoningTokens: 20 },
});

const samples: Record<string, IRResponse> = {
  text: response({ content: [{ type: 'text', text: 'Hello — naïve café ✓ 你好 🎉' }] }),
  reasoning: response({ reasoning: { text: 'thinking… 🤔', signature: 'ignored-here' }, content: [{ type: 'text', text: 'Done.' }] }),
  parallelTools: response({
    toolCalls: [
      { id: 'call_1', name: 'run_shell_command', arguments: '{"command": "ls -la"}' },
      { id: 'call_2', name: 'read_file', arguments: '{"path":"/tmp/ü.txt"}' },
    ],
    finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
  }),
  invalidToolJson: response({ toolCalls: [{ id: 'call_3', name: 'bash', arguments: '{"command": "ls' }] }),
  truncated: response({ content: [{ type: 'text', text: 'The answer is' }], finishReason: { unified: 'length', raw: 'length' } }),
};

function streamText(r: IRResponse, includeUsage: boolean): string {
  const request = { streamUsage: includeUsage } as IRRequest;
  const encoder = openaiChat.createStreamEncoder(ctx(request));
  let out = encoder.push({ type: 'start', id: r.id, model: r.model, createdAt: r.createdAt, inputTokens: 0 });
  out += encoder.push({ type: 'keep-alive' });
  for (const event of responseToStreamEvents(r)) out += encoder.push(event);
  return out + encoder.end();
}

describe('recorded harness requests', () => {
  test('the fixture set covers pi and qwen-code, two turns each', () => {
    expect(fixtures.map((f) => f.name).sort()).toEqual(['pi-001-request.json', 'pi-002-request.json', 'qwen-code-002-request.json', 'qwen-code-003-request.json']);
  });

  for (const { name, body } of fixtures) {
    test(`${name}: one leading system message, tools as functions, caps and include_usage`, () => {
      const ir = decode(body);
      expect(ir.messages[0]?.role).toBe('system');
      expect(ir.messages.filter((m) => m.role === 'system')).toHaveLength(1);
      expect(ir.tools.length).toBe(body.tools.length);
      for (const tool of ir.tools) expect(tool.origin.kind).toBe('function');
      expect(ir.sampling.maxTokens).toBe(body.max_completion_tokens ?? body.max_tokens);
      expect(ir.stream).toBe(true);
      expect(ir.streamUsage).toBe(true);
      expect(ir.warnings).toEqual([]); // store, stream_options … are all understood
    });

    test(`${name}: encode → decode round trip keeps the IR`, () => {
      const ir = decode(body);
      expect(withoutWarnings(decode(openaiChat.encodeRequest(ir)))).toEqual(withoutWarnings(ir));
    });
  }

  test('qwen-code turn 3: tool message with an array of text parts; raw arguments kept', () => {
    const ir = decode(fixtures.find((f) => f.name === 'qwen-code-003-request.json')!.body);
    const assistant = ir.messages.at(-2);
    expect(assistant).toEqual({
      role: 'assistant',
      content: [],
      toolCalls: [{ id: 'call_9b738e3e2d47b9cfdeb05e30', name: 'run_shell_command', arguments: '{"command":"ls"}' }],
    });
    const tool = ir.messages.at(-1);
    expect(tool).toMatchObject({ role: 'tool', toolCallId: 'call_9b738e3e2d47b9cfdeb05e30', name: 'run_shell_command' });
    expect(tool?.content).toHaveLength(1);
    expect(tool?.content[0]).toMatchObject({ type: 'text' });
    expect((tool?.content[0] as { text: string }).text).toStartWith('Command: ls\n');
  });
});

describe('decodeRequest details', () => {
  test('system and developer messages stay where they stand in the IR; the engine encoding places them (merge or in place)', () => {
    const ir = decode({
      model: 'm',
      messages: [
        { role: 'developer', content: 'dev rules' },
        { role: 'system', content: [{ type: 'text', text: 'sys rules' }] },
        { role: 'user', content: 'hi' },
        { role: 'system', content: 'late reminder' },
      ],
    });
    expect(ir.messages).toEqual([
      { role: 'system', content: [{ type: 'text', text: 'dev rules' }] },
      { role: 'system', content: [{ type: 'text', text: 'sys rules' }] },
      { role: 'user', content: [{ type: 'text', text: 'hi' }] },
      { role: 'system', content: [{ type: 'text', text: 'late reminder' }] },
    ]);
    expect(ir.warnings).toEqual([]);
    // engine.system_messages: merge (the default) moves the late one to the front and says so; in_place keeps it.
    const merged = encodeChatMessages(ir.messages, { ...ENGINE_CHAT_ENCODING, systemMessages: 'merge' });
    expect(merged.messages).toEqual([{ role: 'system', content: 'dev rules\n\nsys rules\n\nlate reminder' }, { role: 'user', content: 'hi' }]);
    expect(merged.warnings.map((w) => w.code)).toEqual(['system-message-moved']);
    const inPlace = encodeChatMessages(ir.messages, { ...ENGINE_CHAT_ENCODING, systemMessages: 'in-place' });
    expect(inPlace.messages).toEqual([{ role: 'system', content: 'dev rules\n\nsys rules' }, { role: 'user', content: 'hi' }, { role: 'system', content: 'late reminder' }]);
    expect(inPlace.warnings).toEqual([]);
    // Leading system messages only: nothing moved, no warning.
    expect(encodeChatMessages(ir.messages.slice(0, 3), { ...ENGINE_CHAT_ENCODING, systemMessages: 'merge' }).warnings).toEqual([]);
  });

  test('all supported fields map exactly; unsupported ones are warnings', () => {
    const ir = decode({
      model: 'm',
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'see' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0' } }, { type: 'image_url', image_url: { url: 'https://x/y.jpg', detail: 'high' } }, { type: 'input_audio', input_audio: {} }] },
        { role: 'assistant', content: null, reasoning_content: 'because', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a": 1,}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: 'result' },
        { role: 'assistant', content: 'ok', reasoning: 'vllm-style' },
      ],
      tools: [{ type: 'function', function: { name: 'f', parameters: { $schema: 'x', type: 'object', properties: {} }, strict: true } }, { type: 'custom', custom: { name: 'g' } }],
      tool_choice: { type: 'function', function: { name: 'f' } },
      parallel_tool_calls: false,
      max_tokens: 100,
      max_completion_tokens: 200,
      temperature: 0.6,
      top_p: 0.95,
      top_k: 20,
      min_p: 0,
      seed: 7,
      presence_penalty: 0.5,
      frequency_penalty: -0.5,
      stop: '###',
      n: 1,
      stream: true,
      stream_options: { include_usage: false },
      user: 'u1',
      response_format: { type: 'json_object' },
      logprobs: true,
      chat_template_kwargs: { enable_thinking: true },
      prompt_cache_key: 'k',
    });
    expect(ir.sampling).toEqual({ maxTokens: 200, temperature: 0.6, topP: 0.95, topK: 20, minP: 0, seed: 7, presencePenalty: 0.5, frequencyPenalty: -0.5, stop: ['###'] });
    expect(ir.messages[0]).toEqual({
      role: 'user',
      content: [{ type: 'text', text: 'see' }, { type: 'image', mediaType: 'image/png', data: 'iVBORw0' }, { type: 'image', mediaType: 'image/*', url: 'https://x/y.jpg' }],
    });
    expect(ir.messages[1]).toEqual({ role: 'assistant', content: [], reasoning: { text: 'because' }, toolCalls: [{ id: 'c1', name: 'f', arguments: '{"a": 1,}' }] });
    expect(ir.messages[2]).toEqual({ role: 'tool', toolCallId: 'c1', name: 'f', content: [{ type: 'text', text: 'result' }] });
    expect(ir.messages[3]).toEqual({ role: 'assistant', content: [{ type: 'text', text: 'ok' }], reasoning: { text: 'vllm-style' } });
    expect(ir.tools).toEqual([{ name: 'f', parameters: { type: 'object', properties: {} }, origin: { kind: 'function', extra: { strict: true } } }]);
    expect(ir.toolChoice).toEqual({ name: 'f' });
    expect(ir.parallelToolCalls).toBe(false);
    expect(ir.streamUsage).toBe(false);
    expect(ir.user).toBe('u1');
    expect(ir.reasoning).toEqual({ enabled: true });
    expect(ir.warnings.map((w) => w.code).sort()).toEqual(
      ['conflicting-fields', 'unknown-field', 'unsupported-content', 'unsupported-field', 'unsupported-tool'].sort(),
    );
    expect(withoutWarnings(decode(openaiChat.encodeRequest(ir)))).toEqual(withoutWarnings(ir));
  });

  test('n > 1 is rejected with a clear message and param n', () => {
    let thrown: unknown;
    try {
      decode({ model: 'm', n: 3, messages: [{ role: 'user', content: 'hi' }] });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(GatewayError);
    expect((thrown as GatewayError).kind).toBe('invalid-request');
    expect((thrown as GatewayError).details.param).toBe('n');
    expect((thrown as GatewayError).message).toContain('n=1');
    expect(openaiChat.encodeError(thrown as GatewayError).body.error.param).toBe('n');
  });

  test('bad input is a clear invalid-request error, never a crash', () => {
    const cases: [unknown, RegExp][] = [
      ['nope', /request body/],
      [{ model: 'm' }, /messages/],
      [{ model: 'm', messages: [{ role: 'wizard', content: 'x' }] }, /messages\[0\]/],
      [{ model: 'm', messages: [{ role: 'tool', content: 'x' }] }, /messages\[0\]\.tool_call_id/],
      [{ model: 'm', messages: [{ role: 'user', content: [{ type: 'text' }] }] }, /messages\[0\]\.content\[0\]\.text/],
      [{ model: 'm', messages: [], max_tokens: 0 }, /max_tokens/],
    ];
    for (const [body, message] of cases) {
      let thrown: unknown;
      try {
        decode(body);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(GatewayError);
      expect((thrown as GatewayError).message).toMatch(message);
    }
  });
});

describe('responses', () => {
  test('chat.completion shape with reasoning_content, tool_calls and usage details', () => {
    const body = openaiChat.encodeResponse(samples.parallelTools!, ctx());
    expect(body).toEqual({
      id: 'chatcmpl-test',
      object: 'chat.completion',
      created: 1_700_000_123,
      model: 'qwen3-coder-plus',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'call_1', type: 'function', function: { name: 'run_shell_command', arguments: '{"command": "ls -la"}' } },
              { id: 'call_2', type: 'function', function: { name: 'read_file', arguments: '{"path":"/tmp/ü.txt"}' } },
            ],
          },
          logprobs: null,
          finish_reason: 'tool_calls',
        },
      ],
      usage: { prompt_tokens: 900, completion_tokens: 55, total_tokens: 955, prompt_tokens_details: { cached_tokens: 512 }, completion_tokens_details: { reasoning_tokens: 20 } },
    });
  });

  test('encodeResponse → decodeResponse round trip', () => {
    for (const r of Object.values(samples)) {
      const back = openaiChat.decodeResponse(openaiChat.encodeResponse(r, ctx()), ctx());
      expect(back.content).toEqual(r.content);
      expect(back.toolCalls).toEqual(r.toolCalls);
      expect(back.usage).toEqual(r.usage);
      expect(back.createdAt).toBe(Math.floor(r.createdAt / 1000) * 1000);
      expect(back.finishReason.unified).toBe(r.toolCalls.length > 0 ? 'tool-calls' : r.finishReason.unified);
      if (r.reasoning) expect(back.reasoning).toEqual({ text: r.reasoning.text });
    }
  });
});

describe('stream', () => {
  for (const [name, r] of Object.entries(samples)) {
    test(`${name}: reassembled chunks equal the non-streaming body (include_usage)`, () => {
      const { events, comments } = parseSse(streamText(r, true));
      expect(comments).toEqual(['keep-alive']);
      const first = JSON.parse(events[0]!.data);
      expect(first.choices[0].delta).toEqual({ role: 'assistant', content: '' });
      expect(events.at(-1)?.data).toBe('[DONE]');
      const usageChunk = JSON.parse(events.at(-2)!.data);
      expect(usageChunk.choices).toEqual([]);
      // Every other chunk carries usage: null, as the API documents for include_usage.
      expect(events.slice(0, -2).map((e) => JSON.parse(e.data).usage)).toEqual(events.slice(0, -2).map(() => null));
      expect(reassembleOpenAIChat(events)).toEqual(openaiChat.encodeResponse(r, ctx()) as unknown as Record<string, unknown>);
    });
  }

  test('without include_usage there is no usage chunk', () => {
    const { events } = parseSse(streamText(samples.text!, false));
    expect(events.some((e) => e.data !== '[DONE]' && 'usage' in JSON.parse(e.data))).toBe(false);
    expect(JSON.parse(events.at(-2)!.data).choices[0].finish_reason).toBe('stop');
  });

  test('tool calls stream as index/id/type/function{name, arguments} then argument fragments', () => {
    const { events } = parseSse(streamText(samples.parallelTools!, false));
    const toolDeltas = events.filter((e) => e.data !== '[DONE]').flatMap((e) => JSON.parse(e.data).choices.flatMap((c: any) => c.delta.tool_calls ?? []));
    expect(toolDeltas).toEqual([
      { index: 0, id: 'call_1', type: 'function', function: { name: 'run_shell_command', arguments: '' } },
      { index: 0, function: { arguments: '{"command": "ls -la"}' } },
      { index: 1, id: 'call_2', type: 'function', function: { name: 'read_file', arguments: '' } },
      { index: 1, function: { arguments: '{"path":"/tmp/ü.txt"}' } },
    ]);
  });

  test('an error after the first byte is data: {"error"} then [DONE]', () => {
    const encoder = openaiChat.createStreamEncoder(ctx());
    let out = encoder.push({ type: 'start', id: 'x', model: 'm', createdAt: 0, inputTokens: 0 });
    out += encoder.push({ type: 'error', error: new GatewayError('timeout', 'engine timed out') });
    out += encoder.push({ type: 'text-delta', text: 'late' });
    out += encoder.end();
    const { events } = parseSse(out);
    expect(events).toHaveLength(3);
    expect(JSON.parse(events[1]!.data)).toEqual({ error: { message: 'engine timed out', type: 'server_error', param: null, code: 'timeout' } });
    expect(events[2]!.data).toBe('[DONE]');
  });

  test('seeded random chunk splitting (1–17 bytes, inside UTF-8) parses to identical events', () => {
    for (const r of Object.values(samples)) {
      const bytes = new TextEncoder().encode(streamText(r, true));
      const baseline = parseSse(bytes);
      for (let seed = 1; seed <= 25; seed++) expect(parseSseChunks(splitAtRandom(bytes, seed))).toEqual(baseline);
    }
  });
});

describe('finish reasons and errors', () => {
  test('finish_reason decoding: known values, unknown → other, never throws', () => {
    expect(decodeFinishReason('stop')).toEqual({ unified: 'stop', raw: 'stop' });
    expect(decodeFinishReason('length')).toEqual({ unified: 'length', raw: 'length' });
    expect(decodeFinishReason('tool_calls')).toEqual({ unified: 'tool-calls', raw: 'tool_calls' });
    expect(decodeFinishReason('content_filter')).toEqual({ unified: 'content-filter', raw: 'content_filter' });
    expect(decodeFinishReason('abort')).toEqual({ unified: 'other', raw: 'abort' });
    expect(decodeFinishReason('constructor')).toEqual({ unified: 'other', raw: 'constructor' });
    expect(decodeFinishReason(undefined)).toEqual({ unified: 'other' });
  });

  test('finish_reason encoding', () => {
    expect(encodeFinishReason({ unified: 'length', raw: 'max_tokens' }, false)).toBe('length');
    expect(encodeFinishReason({ unified: 'stop', raw: 'end_turn' }, true)).toBe('tool_calls');
    expect(encodeFinishReason({ unified: 'tool-calls', raw: 'tool_use' }, false)).toBe('stop');
    expect(encodeFinishReason({ unified: 'content-filter' }, false)).toBe('content_filter');
    expect(encodeFinishReason({ unified: 'other', raw: 'weird' }, false)).toBe('stop');
  });

  test('provider error shapes: context_length_exceeded, statuses, types', () => {
    const overflow = openaiChat.encodeError(new GatewayError('context-overflow', 'prompt is too long: 40000 tokens > 32768 maximum'));
    expect(overflow).toEqual({
      status: 400,
      body: {
        error: {
          message: "This model's maximum context length is 32768 tokens. However, your messages resulted in 40000 tokens. Please reduce the length of the messages.",
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
      },
    });
    expect(openaiChat.encodeError(new GatewayError('context-overflow', 'opaque')).body.error).toMatchObject({ message: 'opaque', code: 'context_length_exceeded' });
    expect(openaiChat.encodeError(new GatewayError('overloaded', 'busy')).status).toBe(503);
    expect(openaiChat.encodeError(new GatewayError('upstream', 'bad gateway'))).toEqual({ status: 502, body: { error: { message: 'bad gateway', type: 'server_error', param: null, code: null } } });
    expect(openaiChat.encodeError(new GatewayError('invalid-request', 'bad', { param: 'messages[0]' })).body.error).toEqual({ message: 'bad', type: 'invalid_request_error', param: 'messages[0]', code: null });
    expect(openaiChat.encodeError(new GatewayError('authentication', 'who')).status).toBe(401);
  });
});
