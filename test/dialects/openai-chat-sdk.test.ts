/**
 * The official `openai` SDK against the OpenAI Chat dialect's encoders, served from Bun.serve({port: 0}): non-streaming
 * create, the stream helper's accumulator (`chat.completions.stream(...).finalChatCompletion()`), include_usage, errors.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import OpenAI from 'openai';
import { GatewayError } from '../../src/core/errors.ts';
import type { IRResponse } from '../../src/core/ir.ts';
import { responseToStreamEvents } from '../../src/core/stream.ts';
import { openaiChat } from '../../src/dialects/openai-chat/index.ts';
import { codecContext } from '../support/dialects.ts';

const ctx = () => codecContext();

const reply: IRResponse = {
  id: 'chatcmpl-sdk',
  model: 'qwen3-8b',
  reasoning: { text: 'List first. 🤔' },
  content: [{ type: 'text', text: 'Running — ünïcode ✓' }],
  toolCalls: [
    { id: 'call_a', name: 'run_shell_command', arguments: '{"command": "ls"}' },
    { id: 'call_b', name: 'read_file', arguments: '{"path": "READ' },
  ],
  finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
  usage: { inputTokens: 3000, outputTokens: 64, cachedInputTokens: 2048, reasoningTokens: 7 },
  warnings: [],
  createdAt: 1_700_000_000_000,
};

let server: ReturnType<typeof Bun.serve>;
let client: OpenAI;

beforeAll(() => {
  server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      let ir;
      try {
        ir = openaiChat.decodeRequest(await req.json(), ctx());
      } catch (error) {
        const { status, body } = openaiChat.encodeError(error as GatewayError);
        return Response.json(body, { status });
      }
      if (ir.model === 'too-long') {
        const { status, body } = openaiChat.encodeError(new GatewayError('context-overflow', "This model's maximum context length is 4096 tokens. However, you requested 9000 tokens"));
        return Response.json(body, { status });
      }
      const r = { ...reply, model: ir.model };
      if (!ir.stream) return Response.json(openaiChat.encodeResponse(r, ctx()));
      const encoder = openaiChat.createStreamEncoder({ ...ctx(), request: ir });
      let text = encoder.push({ type: 'start', id: r.id, model: r.model, createdAt: r.createdAt, inputTokens: 0 });
      text += encoder.push({ type: 'keep-alive' });
      if (ir.model === 'midstream-error') text += encoder.push({ type: 'error', error: new GatewayError('upstream', 'engine died') });
      else for (const event of responseToStreamEvents(r)) text += encoder.push(event);
      text += encoder.end();
      return new Response(text, { headers: { 'content-type': 'text/event-stream' } });
    },
  });
  client = new OpenAI({ baseURL: `http://127.0.0.1:${server.port}/v1`, apiKey: 'test-key', maxRetries: 0 });
});

afterAll(() => server.stop(true));

const params = (model: string) => ({
  model,
  messages: [
    { role: 'system' as const, content: 'be brief' },
    { role: 'user' as const, content: 'list files' },
  ],
  tools: [{ type: 'function' as const, function: { name: 'run_shell_command', parameters: { type: 'object', properties: { command: { type: 'string' } } } } }],
});

test('non-streaming create', async () => {
  const completion = await client.chat.completions.create(params('qwen3-8b'));
  const expected = openaiChat.encodeResponse(reply, ctx());
  expect(JSON.parse(JSON.stringify(completion))).toEqual(expected as never);
  expect(completion.usage?.prompt_tokens_details?.cached_tokens).toBe(2048);
});

test('stream helper accumulates the same message, tool calls and usage (include_usage)', async () => {
  const stream = client.chat.completions.stream({ ...params('qwen3-8b'), stream_options: { include_usage: true } });
  const final = await stream.finalChatCompletion();
  const message = final.choices[0]!.message;
  expect(message.content).toBe('Running — ünïcode ✓');
  expect(message.tool_calls?.map((c) => (c.type === 'function' ? [c.id, c.function.name, c.function.arguments] : []))).toEqual([
    ['call_a', 'run_shell_command', '{"command": "ls"}'],
    ['call_b', 'read_file', '{"path": "READ'],
  ]);
  expect((message as unknown as { reasoning_content?: string }).reasoning_content).toBe('List first. 🤔');
  expect(final.choices[0]!.finish_reason).toBe('tool_calls');
  expect(final.usage).toEqual(openaiChat.encodeResponse(reply, ctx()).usage as never);
});

test('raw streaming without include_usage has no usage chunk', async () => {
  const stream = await client.chat.completions.create({ ...params('qwen3-8b'), stream: true });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  expect(chunks[0]?.choices[0]?.delta).toEqual({ role: 'assistant', content: '' });
  expect(chunks.some((c) => c.usage)).toBe(false);
  expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('tool_calls');
});

test('errors: context_length_exceeded before the first byte, in-band error after it, n > 1 rejected', async () => {
  const caught = async (p: Promise<unknown>) => p.then(() => undefined, (error: unknown) => error);
  const overflow = await caught(client.chat.completions.create(params('too-long')));
  expect(overflow).toBeInstanceOf(OpenAI.BadRequestError);
  expect((overflow as InstanceType<typeof OpenAI.APIError>).code).toBe('context_length_exceeded');
  expect(String((overflow as Error).message)).toContain('9000 tokens');

  const midstream = await caught(client.chat.completions.stream(params('midstream-error')).finalChatCompletion());
  expect(midstream).toBeInstanceOf(Error);
  expect(String((midstream as Error).message)).toContain('engine died');

  const n = await caught(client.chat.completions.create({ ...params('qwen3-8b'), n: 2 }));
  expect(n).toBeInstanceOf(OpenAI.BadRequestError);
  expect((n as InstanceType<typeof OpenAI.APIError>).param).toBe('n');
});
