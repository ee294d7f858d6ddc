/**
 * Codec tests of the Anthropic Messages dialect: recorded Claude Code and pi requests, round trips, the SSE event
 * sequence (reassembled and compared with the non-streaming body), seeded chunk splitting, errors, finish reasons.
 */
import { describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import type { CodecContext } from '../../src/core/dialect.ts';
import { GatewayError } from '../../src/core/errors.ts';
import { sequentialIds } from '../../src/core/ids.ts';
import type { IRRequest, IRResponse } from '../../src/core/ir.ts';
import { responseToStreamEvents, type IRStreamEvent } from '../../src/core/stream.ts';
import { anthropicMessages, decodeStopReason, encodeStopReason } from '../../src/dialects/anthropic-messages/index.ts';
import { MINTED_SIGNATURE_PREFIX, mintReasoningSignature } from '../../src/dialects/shared/signature.ts';
import { parseSse, parseSseChunks, reassembleAnthropic, splitAtRandom } from '../support/sse.ts';
import { codecContext, irResponseFactory, recordedRequests } from '../support/dialects.ts';

const fixtures = recordedRequests('anthropic-messages');

const ctx = (options?: CodecContext['options']): CodecContext => codecContext({ options });
const decode = (body: unknown, options?: CodecContext['options']) => anthropicMessages.decodeRequest(body, ctx(options));
const withoutWarnings = (request: IRRequest) => ({ ...request, warnings: [] });

const response = irResponseFactory({
  id: 'msg_test', model: 'claude-sonnet-4-5', createdAt: 1_700_000_000_000,
  usage: { inputTokens: 1200, outputTokens: 34, cachedInputTokens: 1000, reasoningTokens: 0 },
});

/** Encode a synthetic stream exactly as the proxy drives it: start (input 0), keep-alive, replayed events, end. */
function streamText(r: IRResponse, extra: IRStreamEvent[] = []): string {
  const encoder = anthropicMessages.createStreamEncoder(ctx());
  let out = encoder.push({ type: 'start', id: r.id, model: r.model, createdAt: r.createdAt, inputTokens: 0 });
  out += encoder.push({ type: 'keep-alive' });
  for (const event of [...responseToStreamEvents(r), ...extra]) out += encoder.push(event);
  return out + encoder.end();
}

const samples: Record<string, IRResponse> = {
  text: response({ content: [{ type: 'text', text: 'Hello — naïve café ✓ 你好 🎉' }] }),
  reasoningWithoutSignature: response({ reasoning: { text: 'Let me think… 🤔' }, content: [{ type: 'text', text: 'Done.' }] }),
  reasoningWithSignature: response({ reasoning: { text: 'plan', signature: 'sig-from-engine' }, content: [{ type: 'text', text: 'ok' }] }),
  parallelTools: response({
    content: [{ type: 'text', text: 'Running two commands.' }],
    toolCalls: [
      { id: 'toolu_1', name: 'Bash', arguments: '{"command":"ls -la"}' },
      { id: 'toolu_2', name: 'Read', arguments: '{"file_path":"/tmp/ü.txt"}' },
    ],
    finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
  }),
  invalidToolJson: response({
    toolCalls: [{ id: 'toolu_3', name: 'Bash', arguments: '{"command": "ls' }],
    finishReason: { unified: 'stop', raw: 'stop' },
  }),
  truncated: response({ content: [{ type: 'text', text: 'The answer is' }], finishReason: { unified: 'length', raw: 'length' } }),
};

describe('recorded harness requests', () => {
  test('the fixture set covers Claude Code and pi, two turns each, and Claude Code with a mid-conversation system message', () => {
    expect(fixtures.map((f) => f.name).sort()).toEqual([
      'claude-code-001-request.json',
      'claude-code-002-request.json',
      'claude-code-mid-system-request.json',
      'pi-001-request.json',
      'pi-002-request.json',
    ]);
  });

  for (const { name, body } of fixtures) {
    test(`${name}: one leading system message (+ one per mid-conversation system message), no billing line, no cache_control, tools as functions`, () => {
      const ir = decode(body);
      expect(ir.messages[0]?.role).toBe('system');
      const midConversation = (body.messages as { role: string }[]).filter((m) => m.role === 'system').length;
      expect(ir.messages.filter((m) => m.role === 'system')).toHaveLength(1 + midConversation);
      const json = JSON.stringify(ir.messages) + JSON.stringify(ir.tools);
      expect(json).not.toContain('x-anthropic-billing-header');
      expect(json).not.toContain('cache_control');
      expect(json).not.toContain('$schema');
      expect(ir.tools.length).toBe(body.tools.length);
      for (const tool of ir.tools) {
        expect(tool.origin.kind).toBe('function');
        expect(tool.parameters.type).toBe('object');
      }
      expect(ir.model).toBe(body.model);
      expect(ir.sampling.maxTokens).toBe(body.max_tokens);
      expect(ir.stream).toBe(true);
    });

    test(`${name}: encode → decode round trip keeps the IR`, () => {
      const ir = decode(body);
      const again = decode(anthropicMessages.encodeRequest(ir));
      expect(withoutWarnings(again)).toEqual(withoutWarnings(ir));
    });
  }

  test('Claude Code: billing header stripped by default, thinking budget kept, metadata.user_id opaque', () => {
    const body = fixtures.find((f) => f.name === 'claude-code-001-request.json')!.body;
    const ir = decode(body);
    expect(ir.messages[0]).toEqual({
      role: 'system',
      content: body.system.slice(1).map((b: { text: string }) => ({ type: 'text', text: b.text })),
    });
    expect(ir.warnings.map((w) => w.code)).toContain('billing-header-stripped');
    expect(ir.reasoning).toEqual({ enabled: true, budgetTokens: 31999 });
    expect(ir.user).toBe(body.metadata.user_id);
    // Claude Code's context_management clears nothing (clear_thinking, keep: all): honoured, no warning.
    expect(body.context_management).toEqual({ edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] });
    expect(ir.warnings.some((w) => w.message.includes('context_management'))).toBe(false);
  });

  test('context_management edits that would change the history are reported, malformed ones rejected', () => {
    const base = { model: 'm', max_tokens: 9, messages: [{ role: 'user', content: 'x' }] };
    const ir = decode({ ...base, context_management: { edits: [{ type: 'clear_tool_uses_20250919', trigger: { type: 'input_tokens', value: 100 } }, { type: 'clear_thinking_20251015', keep: { type: 'thinking_turns', value: 1 } }] } });
    const warning = ir.warnings.find((w) => w.code === 'context-management-not-applied');
    expect(warning?.message).toContain('clear_tool_uses_20250919, clear_thinking_20251015');
    expect(() => decode({ ...base, context_management: { edits: 'all' } })).toThrow(/context_management\.edits/);
    expect(() => decode({ ...base, context_management: { edits: [{ keep: 'all' }] } })).toThrow(/context_management\.edits\[0\]\.type/);
    // Two union branches that got equally far (base64 and url image sources): the union's own message, not a guess.
    expect(() => decode({ ...base, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 5 } }] }] })).toThrow(
      'messages[0].content[0].source: Invalid input',
    );
  });

  test('Claude Code: stripBillingHeader=false keeps the line', () => {
    const body = fixtures.find((f) => f.name === 'claude-code-001-request.json')!.body;
    const ir = decode(body, { stripBillingHeader: false });
    expect(JSON.stringify(ir.messages[0])).toContain('x-anthropic-billing-header: cc_version=');
  });

  test('Claude Code turn 2: tool_use → assistant tool call, tool_result → tool message with the tool name', () => {
    const ir = decode(fixtures.find((f) => f.name === 'claude-code-002-request.json')!.body);
    const assistant = ir.messages.find((m) => m.role === 'assistant');
    expect(assistant).toMatchObject({ toolCalls: [{ id: 'toolu_c47eb2ea48a8a4dff2436668', name: 'Bash', arguments: '{"command":"ls"}' }] });
    expect(ir.messages.at(-1)).toEqual({
      role: 'tool',
      toolCallId: 'toolu_c47eb2ea48a8a4dff2436668',
      name: 'Bash',
      content: [{ type: 'text', text: 'README.txt\nmain.py' }],
    });
  });

  // Regression (harness matrix): Claude Code 2.1.197 with a model name it doesn't know (polar run's `polar-sim`)
  // assumes a model with mid-conversation system messages and sends `{role: "system"}` after the first user turn
  // (anthropic-beta mid-conversation-system-2026-04-07); the decoder rejected every call with
  // `400 messages[1].role: Invalid option: expected one of "user"|"assistant"`.
  test('Claude Code mid-conversation system message: decoded in place as an IR system message, re-encoded in place', () => {
    const body = fixtures.find((f) => f.name === 'claude-code-mid-system-request.json')!.body;
    expect(body.messages.map((m: { role: string }) => m.role)).toEqual(['user', 'system']);
    const ir = decode(body);
    expect(ir.messages.map((m) => m.role)).toEqual(['system', 'user', 'system']);
    expect(ir.messages[2]).toEqual({ role: 'system', content: [{ type: 'text', text: body.messages[1].content }] });
    expect(ir.messages[1]).toEqual({ role: 'user', content: body.messages[0].content.map((b: { text: string }) => ({ type: 'text', text: b.text })) });
    const wire = anthropicMessages.encodeRequest(ir) as { system: unknown[]; messages: { role: string; content: { type: string; text: string }[] }[] };
    expect(wire.messages.map((m) => m.role)).toEqual(['user', 'system']);
    expect(wire.messages[1]!.content).toEqual([{ type: 'text', text: body.messages[1].content }]);
    expect(wire.system).toHaveLength(body.system.length - 1); // the billing line stays stripped
  });

  test('pi: eager_input_streaming is kept on the tool origin and re-encoded', () => {
    const ir = decode(fixtures.find((f) => f.name === 'pi-001-request.json')!.body);
    expect(ir.tools[0]?.origin.extra).toEqual({ eager_input_streaming: true });
    const wire = anthropicMessages.encodeRequest(ir) as { tools: { eager_input_streaming?: boolean }[] };
    expect(wire.tools[0]?.eager_input_streaming).toBe(true);
  });
});

describe('decodeRequest details', () => {
  const rich = {
    model: 'm',
    max_tokens: 8000,
    system: 'x-anthropic-billing-header: cc_version=1; cch=abc;\nYou are helpful.',
    thinking: { type: 'enabled', budget_tokens: 32000 },
    temperature: 0.7,
    top_p: 0.95,
    top_k: 20,
    stop_sequences: ['</done>'],
    metadata: { user_id: '{"device_id":"d"}' },
    tool_choice: { type: 'tool', name: 'get', disable_parallel_tool_use: true },
    tools: [
      { name: 'get', description: 'd', input_schema: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { q: { type: 'string' } } } },
      { type: 'web_search_20250305', name: 'web_search', max_uses: 3 },
    ],
    service_tier: 'auto',
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'look', cache_control: { type: 'ephemeral' } }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBO' } }, { type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'hmm', signature: 'sig1' },
          { type: 'redacted_thinking', data: 'opaque' },
          { type: 'text', text: 'calling' },
          { type: 'tool_use', id: 't1', name: 'get', input: { q: 'a' } },
          { type: 'tool_use', id: 't2', name: 'get', input: { _raw: '{"q": ' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 't1', is_error: true, content: [{ type: 'text', text: 'boom' }, { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: '/9j/' } }], cache_control: { type: 'ephemeral' } },
          { type: 'tool_result', tool_use_id: 't2', content: 'ok' },
          { type: 'text', text: 'continue' },
          { type: 'document', source: { type: 'text', data: 'x' } },
        ],
      },
    ],
  };

  test('everything docs/protocol-notes.md lists for Anthropic Messages maps to the IR', () => {
    const ir = decode(rich);
    expect(ir.messages[0]).toEqual({ role: 'system', content: [{ type: 'text', text: 'You are helpful.' }] });
    expect(ir.sampling).toEqual({ maxTokens: 8000, temperature: 0.7, topP: 0.95, topK: 20, stop: ['</done>'] });
    expect(ir.reasoning).toEqual({ enabled: true, budgetTokens: 32000 }); // budget > max_tokens accepted
    expect(ir.toolChoice).toEqual({ name: 'get' });
    expect(ir.parallelToolCalls).toBe(false);
    expect(ir.user).toBe('{"device_id":"d"}');
    expect(ir.tools).toEqual([{ name: 'get', description: 'd', parameters: { type: 'object', properties: { q: { type: 'string' } } }, origin: { kind: 'function' } }]);
    expect(ir.messages[1]).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'look' },
        { type: 'image', mediaType: 'image/png', data: 'iVBO' },
        { type: 'image', mediaType: 'image/*', url: 'https://x/y.png' },
      ],
    });
    expect(ir.messages[2]).toEqual({
      role: 'assistant',
      content: [{ type: 'text', text: 'calling' }],
      reasoning: { text: 'hmm', signature: 'sig1', redacted: 'opaque' },
      toolCalls: [
        { id: 't1', name: 'get', arguments: '{"q":"a"}' },
        { id: 't2', name: 'get', arguments: '{"q": ' }, // our own {_raw} wrapper gives the exact text back
      ],
    });
    expect(ir.messages[3]).toEqual({
      role: 'tool',
      toolCallId: 't1',
      name: 'get',
      isError: true,
      content: [{ type: 'text', text: 'boom' }, { type: 'image', mediaType: 'image/jpeg', data: '/9j/' }],
    });
    expect(ir.messages[4]).toEqual({ role: 'tool', toolCallId: 't2', name: 'get', content: [{ type: 'text', text: 'ok' }] });
    expect(ir.messages[5]).toEqual({ role: 'user', content: [{ type: 'text', text: 'continue' }] });
    const codes = ir.warnings.map((w) => w.code);
    expect(codes).toContain('unsupported-tool'); // web_search server tool dropped
    expect(codes).toContain('unknown-field'); // service_tier
    expect(codes).toContain('unsupported-content'); // document block
    expect(codes).toContain('billing-header-stripped');
    expect(JSON.stringify(ir)).not.toContain('cache_control');
  });

  test('mid-conversation system messages: string or text blocks, kept at their position; other blocks and empty ones dropped with warnings', () => {
    const ir = decode({
      model: 'm',
      system: 'top',
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'system', content: [{ type: 'text', text: 'be brief', cache_control: { type: 'ephemeral' } }, { type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'Bash', input: { command: 'ls' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'a.txt' }] },
        { role: 'system', content: 'now answer in one line' },
      ],
    });
    expect(ir.messages).toEqual([
      { role: 'system', content: [{ type: 'text', text: 'top' }] },
      { role: 'user', content: [{ type: 'text', text: 'hi' }] },
      { role: 'system', content: [{ type: 'text', text: 'be brief' }] },
      { role: 'assistant', content: [], toolCalls: [{ id: 't1', name: 'Bash', arguments: '{"command":"ls"}' }] },
      { role: 'tool', toolCallId: 't1', name: 'Bash', content: [{ type: 'text', text: 'a.txt' }] },
      { role: 'system', content: [{ type: 'text', text: 'now answer in one line' }] },
    ]);
    const messages = ir.warnings.filter((w) => w.code === 'unsupported-content').map((w) => w.message);
    expect(messages).toEqual(['messages[1].content[1] of type image in a system message was dropped']);
    expect(withoutWarnings(decode(anthropicMessages.encodeRequest(ir)))).toEqual(withoutWarnings(ir));
    // An IR system message the API has no place for (after an assistant turn, e.g. from OpenAI Chat) goes to the top.
    const hoisted = anthropicMessages.encodeRequest({
      ...ir,
      messages: [ir.messages[0]!, ir.messages[1]!, { role: 'assistant', content: [{ type: 'text', text: 'ok' }] }, { role: 'system', content: [{ type: 'text', text: 'late' }] }],
    }) as { system: unknown; messages: { role: string }[] };
    expect(hoisted.system).toEqual([{ type: 'text', text: 'top' }, { type: 'text', text: 'late' }]);
    expect(hoisted.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    const empty = decode({ model: 'm', messages: [{ role: 'user', content: 'hi' }, { role: 'system', content: [] }] });
    expect(empty.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'hi' }] }]);
    expect(empty.warnings.map((w) => w.message)).toContain('messages[1]: a system message without text was dropped');
  });

  test('rich request round-trips through encodeRequest', () => {
    const ir = decode(rich);
    expect(withoutWarnings(decode(anthropicMessages.encodeRequest(ir)))).toEqual(withoutWarnings(ir));
  });

  test('thinking adaptive/disabled and tool_choice without tools', () => {
    const base = { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };
    expect(decode({ ...base, thinking: { type: 'adaptive' } }).reasoning).toEqual({ enabled: true });
    expect(decode({ ...base, thinking: { type: 'disabled' } }).reasoning).toEqual({ enabled: false });
    const dropped = decode({ ...base, tool_choice: { type: 'any' } });
    expect(dropped.toolChoice).toBeUndefined();
    expect(dropped.warnings.map((w) => w.code)).toContain('tool-choice-dropped');
    expect(decode(base).messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'hi' }] }]);
  });

  test('bad input is a clear invalid-request error, never a crash', () => {
    const cases: [unknown, RegExp][] = [
      [null, /request body/],
      [{ model: 'm', max_tokens: 1 }, /messages/],
      [{ model: 'm', messages: [{ role: 'system', content: 'x' }] }, /messages\[0\]\.role: a "system" message must follow a "user" turn \(it cannot be the first/],
      [{ model: 'm', messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: 'y' }, { role: 'system', content: 'z' }] }, /messages\[2\]\.role: .* follows a "assistant" message/],
      [{ model: 'm', messages: [{ role: 'developer', content: 'x' }] }, /messages\[0\]\.role/],
      [{ model: 'm', messages: [{ role: 'user', content: [{ type: 'tool_result', content: 'x' }] }] }, /messages\[0\]\.content\[0\]\.tool_use_id/],
      [{ model: 'm', messages: [], tool_choice: { type: 'tool' }, tools: [{ name: 'a', input_schema: {} }] }, /tool_choice\.name/],
      [{ model: 'm', messages: [], max_tokens: -5 }, /max_tokens/],
    ];
    for (const [body, message] of cases) {
      let thrown: unknown;
      try {
        decode(body);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(GatewayError);
      expect((thrown as GatewayError).kind).toBe('invalid-request');
      expect((thrown as GatewayError).message).toMatch(message);
    }
  });
});

describe('responses', () => {
  test('block order thinking → text → tool_use; minted signature; stop_reason tool_use; cache-aware usage', () => {
    const body = anthropicMessages.encodeResponse(
      response({
        reasoning: { text: 'why' },
        content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }],
        toolCalls: [{ id: 'toolu_9', name: 'Bash', arguments: '{"command":"pwd"}' }],
        finishReason: { unified: 'stop', raw: 'stop' },
      }),
      ctx(),
    );
    expect(body.content).toEqual([
      { type: 'thinking', thinking: 'why', signature: mintReasoningSignature('why') },
      { type: 'text', text: 'ab' },
      { type: 'tool_use', id: 'toolu_9', name: 'Bash', input: { command: 'pwd' } },
    ]);
    expect(mintReasoningSignature('why').startsWith(MINTED_SIGNATURE_PREFIX)).toBe(true);
    expect(mintReasoningSignature('why')).not.toBe(mintReasoningSignature('why not'));
    expect(body.stop_reason).toBe('tool_use');
    expect(body.usage).toEqual({ input_tokens: 200, output_tokens: 34, cache_read_input_tokens: 1000, cache_creation_input_tokens: 0 });
  });

  test('invalid tool-call JSON is sent as {_raw} and decodes back to the exact text', () => {
    const r = samples.invalidToolJson!;
    const body = anthropicMessages.encodeResponse(r, ctx());
    expect(body.content).toEqual([{ type: 'tool_use', id: 'toolu_3', name: 'Bash', input: { _raw: '{"command": "ls' } }]);
    expect(anthropicMessages.decodeResponse(body, ctx()).toolCalls).toEqual(r.toolCalls);
  });

  test('encodeResponse → decodeResponse round trip', () => {
    for (const r of Object.values(samples)) {
      const back = anthropicMessages.decodeResponse(anthropicMessages.encodeResponse(r, ctx()), { now: () => r.createdAt, newId: sequentialIds() });
      const text = r.content.map((p) => (p.type === 'text' ? p.text : '')).join('');
      expect(back.content).toEqual(text ? [{ type: 'text', text }] : []);
      expect(back.toolCalls).toEqual(r.toolCalls);
      expect(back.usage).toEqual(r.usage);
      expect(back.finishReason.unified).toBe(r.toolCalls.length > 0 ? 'tool-calls' : r.finishReason.unified);
      if (r.reasoning) expect(back.reasoning).toEqual({ text: r.reasoning.text, signature: r.reasoning.signature ?? mintReasoningSignature(r.reasoning.text) });
    }
  });
});

describe('stream', () => {
  for (const [name, r] of Object.entries(samples)) {
    test(`${name}: reassembled SSE equals the non-streaming body`, () => {
      const { events, comments } = parseSse(streamText(r));
      expect(comments).toEqual([]);
      expect(events[0]?.event).toBe('message_start');
      expect(JSON.parse(events[0]!.data).message.usage.input_tokens).toBe(0);
      expect(events[1]?.event).toBe('ping');
      expect(events.at(-2)?.event).toBe('message_delta');
      expect(events.at(-1)?.event).toBe('message_stop');
      expect(reassembleAnthropic(events)).toEqual(anthropicMessages.encodeResponse(r, ctx()) as unknown as Record<string, unknown>);
    });
  }

  test('a thinking block ends with a non-empty signature_delta before its stop', () => {
    const { events } = parseSse(streamText(samples.reasoningWithoutSignature!));
    const data = events.map((e) => JSON.parse(e.data));
    const stop = data.findIndex((d) => d.type === 'content_block_stop' && d.index === 0);
    expect(data[stop - 1]).toEqual({ type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: mintReasoningSignature('Let me think… 🤔') } });
  });

  test('parallel tool calls are separate blocks with the whole input_json_delta before each stop', () => {
    const { events } = parseSse(streamText(samples.parallelTools!));
    const data = events.map((e) => JSON.parse(e.data)).filter((d) => d.type.startsWith('content_block'));
    expect(data.map((d) => `${d.type}:${d.index}:${d.delta?.type ?? d.content_block?.type ?? ''}`)).toEqual([
      'content_block_start:0:text',
      'content_block_delta:0:text_delta',
      'content_block_stop:0:',
      'content_block_start:1:tool_use',
      'content_block_delta:1:input_json_delta',
      'content_block_stop:1:',
      'content_block_start:2:tool_use',
      'content_block_delta:2:input_json_delta',
      'content_block_stop:2:',
    ]);
    expect(JSON.parse(data[4].delta.partial_json)).toEqual({ command: 'ls -la' });
  });

  test('interleaved tool-call deltas still produce sequential blocks', () => {
    const encoder = anthropicMessages.createStreamEncoder(ctx());
    const r = samples.parallelTools!;
    let out = encoder.push({ type: 'start', id: r.id, model: r.model, createdAt: 0, inputTokens: 0 });
    const events: IRStreamEvent[] = [
      { type: 'tool-call-start', index: 0, id: 'a', name: 'Bash' },
      { type: 'tool-call-start', index: 1, id: 'b', name: 'Bash' },
      { type: 'tool-call-delta', index: 1, argumentsDelta: '{"command":' },
      { type: 'tool-call-delta', index: 0, argumentsDelta: '{"command":"x"}' },
      { type: 'tool-call-delta', index: 1, argumentsDelta: '"y"}' },
      { type: 'tool-call-end', index: 1 },
      { type: 'tool-call-end', index: 0 },
      { type: 'finish', finishReason: { unified: 'tool-calls' }, usage: r.usage, response: r },
    ];
    for (const e of events) out += encoder.push(e);
    const message = reassembleAnthropic(parseSse(out).events);
    expect(message.content).toEqual([
      { type: 'tool_use', id: 'b', name: 'Bash', input: { command: 'y' } },
      { type: 'tool_use', id: 'a', name: 'Bash', input: { command: 'x' } },
    ]);
    expect(message.stop_reason).toBe('tool_use');
  });

  test('message_delta carries the real input_tokens after a start with 0', () => {
    const { events } = parseSse(streamText(samples.text!));
    const delta = JSON.parse(events.at(-2)!.data);
    expect(delta.usage).toEqual({ input_tokens: 200, output_tokens: 34, cache_read_input_tokens: 1000, cache_creation_input_tokens: 0 });
    expect(delta.delta.stop_reason).toBe('end_turn');
  });

  test('an error after the first byte is an in-band `event: error`, and nothing follows', () => {
    const encoder = anthropicMessages.createStreamEncoder(ctx());
    let out = encoder.push({ type: 'start', id: 'msg_e', model: 'm', createdAt: 0, inputTokens: 0 });
    out += encoder.push({ type: 'keep-alive' });
    out += encoder.push({ type: 'error', error: new GatewayError('overloaded', 'engine busy') });
    out += encoder.push({ type: 'text-delta', text: 'late' });
    out += encoder.end();
    const { events } = parseSse(out);
    expect(events.map((e) => e.event)).toEqual(['message_start', 'ping', 'error']);
    expect(JSON.parse(events[2]!.data)).toEqual({ type: 'error', error: { type: 'overloaded_error', message: 'engine busy' } });
  });

  test('nothing is emitted after message_stop', () => {
    const encoder = anthropicMessages.createStreamEncoder(ctx());
    const r = samples.text!;
    encoder.push({ type: 'start', id: r.id, model: r.model, createdAt: 0, inputTokens: 0 });
    for (const e of responseToStreamEvents(r)) encoder.push(e);
    expect(encoder.push({ type: 'keep-alive' })).toBe('');
    expect(encoder.end()).toBe('');
  });

  test('seeded random chunk splitting (1–17 bytes, inside UTF-8) parses to identical events', () => {
    for (const r of Object.values(samples)) {
      const bytes = new TextEncoder().encode(streamText(r));
      const baseline = parseSse(bytes).events;
      for (let seed = 1; seed <= 25; seed++) expect(parseSseChunks(splitAtRandom(bytes, seed)).events).toEqual(baseline);
    }
  });
});

describe('finish reasons and errors', () => {
  test('stop_reason decoding: known values, unknown → other, never throws', () => {
    expect(decodeStopReason('end_turn')).toEqual({ unified: 'stop', raw: 'end_turn' });
    expect(decodeStopReason('max_tokens')).toEqual({ unified: 'length', raw: 'max_tokens' });
    expect(decodeStopReason('tool_use')).toEqual({ unified: 'tool-calls', raw: 'tool_use' });
    expect(decodeStopReason('refusal')).toEqual({ unified: 'content-filter', raw: 'refusal' });
    expect(decodeStopReason('brand_new_reason')).toEqual({ unified: 'other', raw: 'brand_new_reason' });
    expect(decodeStopReason(null)).toEqual({ unified: 'other' });
    expect(decodeStopReason('__proto__')).toEqual({ unified: 'other', raw: '__proto__' });
  });

  test('stop_reason encoding: truncation → max_tokens, tool calls → tool_use, raw kept, other → end_turn', () => {
    expect(encodeStopReason({ unified: 'length', raw: 'length' }, false)).toBe('max_tokens');
    expect(encodeStopReason({ unified: 'length', raw: 'length' }, true)).toBe('max_tokens');
    expect(encodeStopReason({ unified: 'stop', raw: 'stop' }, true)).toBe('tool_use');
    expect(encodeStopReason({ unified: 'tool-calls', raw: 'tool_use' }, false)).toBe('end_turn');
    expect(encodeStopReason({ unified: 'stop', raw: 'stop_sequence' }, false)).toBe('stop_sequence');
    expect(encodeStopReason({ unified: 'other', raw: 'abort' }, false)).toBe('end_turn');
    expect(encodeStopReason({ unified: 'content-filter' }, false)).toBe('refusal');
  });

  test('provider error shapes and statuses', () => {
    const overflow = anthropicMessages.encodeError(
      new GatewayError('context-overflow', "This model's maximum context length is 32768 tokens. However, your request has 40000 input tokens."),
    );
    expect(overflow).toEqual({ status: 400, body: { type: 'error', error: { type: 'invalid_request_error', message: 'prompt is too long: 40000 tokens > 32768 maximum' } } });
    const sglang = anthropicMessages.encodeError(
      new GatewayError('context-overflow', 'engine said', { upstream: { status: 400, body: "The input (50000 tokens) is longer than the model's context length (40960 tokens)." } }),
    );
    expect(sglang.body.error.message).toBe('prompt is too long: 50000 tokens > 40960 maximum');
    expect(anthropicMessages.encodeError(new GatewayError('context-overflow', 'too long')).body.error.message).toBe('prompt is too long: too long');
    expect(anthropicMessages.encodeError(new GatewayError('overloaded', 'busy'))).toEqual({ status: 529, body: { type: 'error', error: { type: 'overloaded_error', message: 'busy' } } });
    const table: [ConstructorParameters<typeof GatewayError>[0], number, string][] = [
      ['invalid-request', 400, 'invalid_request_error'],
      ['authentication', 401, 'authentication_error'],
      ['permission', 403, 'permission_error'],
      ['not-found', 404, 'not_found_error'],
      ['rate-limited', 429, 'rate_limit_error'],
      ['upstream', 502, 'api_error'],
      ['timeout', 504, 'timeout_error'],
      ['internal', 500, 'api_error'],
    ];
    for (const [kind, status, type] of table) {
      const { status: s, body } = anthropicMessages.encodeError(new GatewayError(kind, 'x'));
      expect({ s, type: body.error.type as string }).toEqual({ s: status, type });
    }
  });
});
