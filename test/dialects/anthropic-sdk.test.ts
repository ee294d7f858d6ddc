/**
 * The official @anthropic-ai/sdk against the Anthropic dialect's encoders, served from Bun.serve({port: 0}): its stream
 * accumulator (`messages.stream(...).finalMessage()`) must accept message_start with input_tokens 0 followed by a
 * message_delta that carries the real input_tokens, and report that real count.
 */
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { GatewayError } from '../../src/core/errors.ts';
import type { IRResponse } from '../../src/core/ir.ts';
import { responseToStreamEvents } from '../../src/core/stream.ts';
import { anthropicMessages } from '../../src/dialects/anthropic-messages/index.ts';
import { codecContext } from '../support/dialects.ts';

const ctx = () => codecContext();

const reply: IRResponse = {
  id: 'msg_sdk_1',
  model: 'polar-test-model',
  reasoning: { text: 'I should list the files. 🤔' },
  content: [{ type: 'text', text: 'Listing — ünïcode ✓' }],
  toolCalls: [
    { id: 'toolu_a', name: 'Bash', arguments: '{"command":"ls"}' },
    { id: 'toolu_b', name: 'Bash', arguments: '{"command": "cat' },
  ],
  finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
  usage: { inputTokens: 5000, outputTokens: 42, cachedInputTokens: 4096, reasoningTokens: 0 },
  warnings: [],
  createdAt: 1_700_000_000_000,
};

let server: ReturnType<typeof Bun.serve>;
let client: Anthropic;
const seenBodies: unknown[] = [];

beforeAll(() => {
  server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      const body = await req.json();
      seenBodies.push(body);
      let ir;
      try {
        ir = anthropicMessages.decodeRequest(body, ctx());
      } catch (error) {
        const { status, body: errorBody } = anthropicMessages.encodeError(error as GatewayError);
        return Response.json(errorBody, { status });
      }
      const model = ir.model;
      if (model === 'overloaded') {
        const { status, body: errorBody } = anthropicMessages.encodeError(new GatewayError('overloaded', 'engine overloaded'));
        return Response.json(errorBody, { status });
      }
      const r = { ...reply, model };
      if (!ir.stream) return Response.json(anthropicMessages.encodeResponse(r, ctx()));
      const encoder = anthropicMessages.createStreamEncoder({ ...ctx(), request: ir });
      let text = encoder.push({ type: 'start', id: r.id, model, createdAt: r.createdAt, inputTokens: 0 });
      text += encoder.push({ type: 'keep-alive' });
      if (model === 'midstream-error') text += encoder.push({ type: 'error', error: new GatewayError('upstream', 'engine died') });
      else for (const event of responseToStreamEvents(r)) text += encoder.push(event);
      text += encoder.end();
      return new Response(text, { headers: { 'content-type': 'text/event-stream' } });
    },
  });
  client = new Anthropic({ baseURL: `http://127.0.0.1:${server.port}`, apiKey: 'test-key', maxRetries: 0 });
});

afterAll(() => server.stop(true));

const params = (model: string) => ({
  model,
  max_tokens: 1024,
  thinking: { type: 'enabled' as const, budget_tokens: 4096 },
  messages: [{ role: 'user' as const, content: 'list files' }],
  tools: [{ name: 'Bash', input_schema: { type: 'object' as const, properties: { command: { type: 'string' } } } }],
});

test('stream accumulator: input_tokens 0 at message_start is replaced by message_delta; content and signature intact', async () => {
  const stream = client.messages.stream(params('polar-test-model'));
  const starts: number[] = [];
  stream.on('streamEvent', (event) => {
    if (event.type === 'message_start') starts.push(event.message.usage.input_tokens);
  });
  const message = await stream.finalMessage();
  expect(starts).toEqual([0]);
  expect(message.usage).toMatchObject({ input_tokens: 5000 - 4096, output_tokens: 42, cache_read_input_tokens: 4096, cache_creation_input_tokens: 0 });
  expect(message.stop_reason).toBe('tool_use');
  expect(message.content.map((b) => b.type)).toEqual(['thinking', 'text', 'tool_use', 'tool_use']);
  const [thinking, text, toolA, toolB] = message.content;
  expect(thinking).toMatchObject({ type: 'thinking', thinking: 'I should list the files. 🤔' });
  expect((thinking as { signature: string }).signature.length).toBeGreaterThan(0);
  expect(text).toMatchObject({ type: 'text', text: 'Listing — ünïcode ✓' });
  expect(toolA).toMatchObject({ type: 'tool_use', id: 'toolu_a', name: 'Bash', input: { command: 'ls' } });
  expect(toolB).toMatchObject({ type: 'tool_use', id: 'toolu_b', input: { _raw: '{"command": "cat' } });
  // The whole message equals the non-streaming body.
  expect(JSON.parse(JSON.stringify(message))).toMatchObject(anthropicMessages.encodeResponse(reply, ctx()) as object);
});

test('non-streaming create returns the same message', async () => {
  const message = await client.messages.create(params('polar-test-model'));
  expect(message.usage.input_tokens).toBe(5000 - 4096);
  expect(message.content).toEqual(anthropicMessages.encodeResponse(reply, ctx()).content as never);
});

test('HTTP errors arrive as the SDK error class with the provider type', async () => {
  let thrown: unknown;
  try {
    await client.messages.create(params('overloaded'));
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(Anthropic.APIError);
  expect((thrown as InstanceType<typeof Anthropic.APIError>).status).toBe(529);
  expect(JSON.stringify((thrown as InstanceType<typeof Anthropic.APIError>).error)).toContain('overloaded_error');
});

test('an in-band error event rejects the stream with the error body', async () => {
  let thrown: unknown;
  try {
    await client.messages.stream(params('midstream-error')).finalMessage();
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(Error);
  expect(String((thrown as Error).message)).toContain('engine died');
});

test('a bad request body is a 400 invalid_request_error the SDK surfaces', async () => {
  let thrown: unknown;
  try {
    await client.messages.create({ ...params('m'), messages: [{ role: 'user', content: [{ type: 'tool_result' } as never] }] });
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(Anthropic.BadRequestError);
  expect(String((thrown as Error).message)).toContain('tool_use_id');
});
