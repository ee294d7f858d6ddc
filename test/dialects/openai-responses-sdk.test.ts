/**
 * The official `openai` SDK against the OpenAI Responses dialect's encoders, served from Bun.serve({port: 0}):
 * `responses.create` and `responses.stream(...)`, fed either by a replayed response (synthetic streaming) or by the
 * engines' DeltaEmitter with parallel tool calls whose deltas interleave (live streaming). The wire order is the one
 * OpenAI's API sends (a recorded gpt-4o stream with two parallel function calls: each output item's
 * `output_item.added` → deltas → `.done` → `output_item.done` before the next item's `output_item.added`), and the
 * output the SDK's own accumulator (`accumulateResponse`) builds from the incremental events equals the
 * `response.completed` response and the non-streamed body.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import OpenAI from 'openai';
import { accumulateResponse } from 'openai/lib/responses/ResponseAccumulator';
import type { GatewayError } from '../../src/core/errors.ts';
import type { IRRequest, IRResponse } from '../../src/core/ir.ts';
import { responseToStreamEvents, type IRStreamEvent } from '../../src/core/stream.ts';
import { openaiResponses } from '../../src/dialects/openai-responses/index.ts';
import { DeltaEmitter } from '../../src/engines/delta-emitter.ts';
import { codecContext } from '../support/dialects.ts';

const PATCH = '*** Begin Patch\n*** Add File: a.txt\n+ünïcode ✓\n*** End Patch';

const reply = (model: string): IRResponse => ({
  id: 'chatcmpl-sdk',
  model,
  reasoning: { text: 'List, then patch. 🤔' },
  content: [{ type: 'text', text: 'Running — three calls' }],
  toolCalls: [
    { id: 'call_a', name: 'exec_command', arguments: '{"cmd":"ls"}' },
    { id: 'call_b', name: 'exec_command', arguments: '{"cmd":"pwd"}' },
    { id: 'call_c', name: 'apply_patch', arguments: JSON.stringify({ input: PATCH }) },
  ],
  finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
  usage: { inputTokens: 3000, outputTokens: 64, cachedInputTokens: 2048, reasoningTokens: 7 },
  warnings: [],
  createdAt: 1_700_000_000_000,
});

/**
 * What the live path sends for `reply`: the engine's chunks through the DeltaEmitter, with the second and third call
 * starting while the first one's arguments are still arriving (the emitter ends every call only at `finish`).
 */
function interleavedEvents(response: IRResponse): IRStreamEvent[] {
  const events: IRStreamEvent[] = [];
  const emitter = new DeltaEmitter((event) => {
    if (event.type !== 'answered' && event.type !== 'prompt') events.push(event);
  });
  emitter.reasoning(response.reasoning!.text);
  emitter.text('Running — ');
  emitter.text('three calls');
  emitter.toolStart(0, 'call_a', 'exec_command');
  emitter.toolDelta(0, '{"cmd":');
  emitter.toolStart(1, 'call_b', 'exec_command');
  emitter.toolDelta(1, '{"cmd":"pw');
  emitter.toolDelta(0, '"ls"');
  emitter.toolStart(2, 'call_c', 'apply_patch');
  emitter.toolDelta(2, '{"input":');
  emitter.toolDelta(1, 'd"}');
  emitter.finish(response);
  events.push({ type: 'finish', finishReason: response.finishReason, usage: response.usage, response });
  return events;
}

let server: ReturnType<typeof Bun.serve>;
let client: OpenAI;

beforeAll(() => {
  server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      const body: unknown = await req.json();
      const ctx = (request?: IRRequest) => codecContext(request ? { request, requestBody: body } : {});
      let ir: IRRequest;
      try {
        ir = openaiResponses.decodeRequest(body, ctx());
      } catch (error) {
        const { status, body } = openaiResponses.encodeError(error as GatewayError);
        return Response.json(body, { status });
      }
      // The model name picks the producer: `live` = DeltaEmitter with interleaved calls, else a replayed response.
      const r = ir.model === 'truncated' ? { ...reply(ir.model), toolCalls: [], finishReason: { unified: 'length' as const, raw: 'length' } } : reply(ir.model);
      if (!ir.stream) return Response.json(openaiResponses.encodeResponse(r, ctx(ir)));
      const encoder = openaiResponses.createStreamEncoder(ctx(ir));
      let text = encoder.push({ type: 'start', id: r.id, model: r.model, createdAt: r.createdAt, inputTokens: 0 });
      for (const event of ir.model === 'live' ? interleavedEvents(r) : responseToStreamEvents(r)) text += encoder.push(event);
      text += encoder.end();
      return new Response(text, { headers: { 'content-type': 'text/event-stream' } });
    },
  });
  client = new OpenAI({ baseURL: `http://127.0.0.1:${server.port}/v1`, apiKey: 'test-key', maxRetries: 0 });
});

afterAll(() => server.stop(true));

const tools: OpenAI.Responses.Tool[] = [
  { type: 'function', name: 'exec_command', description: 'Run a command', strict: false, parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] } },
  { type: 'custom', name: 'apply_patch', description: 'Edit files', format: { type: 'grammar', syntax: 'lark', definition: 'start: /(.|\\n)+/' } },
];

const params = (model: string) => ({
  model,
  instructions: 'be brief',
  input: [{ type: 'message' as const, role: 'user' as const, content: 'list, then patch' }],
  tools,
  tool_choice: 'auto' as const,
  parallel_tool_calls: true,
  max_output_tokens: 512,
  store: false,
});

/** A response as it was on the wire: without what the SDK adds (`output_text`, `output_parsed`, `parsed`, `parsed_arguments`). */
function wire(response: OpenAI.Responses.Response): Record<string, unknown> {
  const { output_text: _, output_parsed: __, ...rest } = JSON.parse(JSON.stringify(response)) as Record<string, unknown>;
  for (const item of rest.output as Record<string, unknown>[]) {
    delete item.parsed_arguments;
    for (const part of (item.content ?? []) as Record<string, unknown>[]) delete part.parsed;
  }
  return rest;
}

/** Every event of one `responses.stream` call, and its `finalResponse()`. */
async function streamed(model: string) {
  const stream = client.responses.stream(params(model));
  const events: OpenAI.Responses.ResponseStreamEvent[] = [];
  stream.on('event', (event) => events.push(event));
  const final = await stream.finalResponse();
  return { events, final };
}

describe.each(['replayed', 'live'] as const)('%s stream', (model) => {
  test('each output item runs added → deltas → done → output_item.done before the next item is added', async () => {
    const { events } = await streamed(model);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const itemEvents = events.filter((e) => 'output_index' in e) as (OpenAI.Responses.ResponseStreamEvent & { output_index: number })[];
    // The output_index of consecutive item events never goes back: no item's events arrive after a later item began.
    const indices = itemEvents.map((e) => e.output_index);
    expect(indices).toEqual([...indices].sort((a, b) => a - b));
    for (const index of new Set(indices)) {
      const own = itemEvents.filter((e) => e.output_index === index).map((e) => e.type);
      expect(own[0]).toBe('response.output_item.added');
      expect(own.at(-1)).toBe('response.output_item.done');
      expect(own.filter((t) => t === 'response.output_item.done')).toHaveLength(1);
    }
    const calls = itemEvents.filter((e) => e.type.startsWith('response.function_call_arguments.') || e.type.startsWith('response.custom_tool_call_input.') || (e.type.startsWith('response.output_item.') && e.output_index >= 2));
    expect(calls.map((e) => `${e.output_index} ${e.type}`)).toEqual([
      '2 response.output_item.added',
      // live: '{"cmd":', '"ls"', then '}' from the record at finish; replayed: the whole arguments at once
      ...Array(model === 'live' ? 3 : 1).fill('2 response.function_call_arguments.delta'),
      '2 response.function_call_arguments.done',
      '2 response.output_item.done',
      '3 response.output_item.added',
      // live: what arrived while call_a streamed, buffered into one delta as the item opens
      '3 response.function_call_arguments.delta',
      '3 response.function_call_arguments.done',
      '3 response.output_item.done',
      '4 response.output_item.added',
      '4 response.custom_tool_call_input.delta',
      '4 response.custom_tool_call_input.done',
      '4 response.output_item.done',
    ]);
  });

  test('the SDK-assembled output equals response.completed, finalResponse() and the non-streamed body', async () => {
    const { events, final } = await streamed(model);
    const completed = events.at(-1)!;
    expect(completed.type).toBe('response.completed');
    // The SDK's accumulator over every event before the terminal one: what a client that stops at the last item sees.
    let snapshot: OpenAI.Responses.Response | undefined;
    for (const event of events.slice(0, -1)) snapshot = accumulateResponse(event, snapshot);
    const completedResponse = (completed as OpenAI.Responses.ResponseCompletedEvent).response;
    expect(snapshot!.output).toEqual(completedResponse.output);
    expect(wire(final)).toEqual(wire(completedResponse));
    expect(final.output.map((item) => [item.type, 'call_id' in item ? item.call_id : undefined])).toEqual([
      ['reasoning', undefined],
      ['message', undefined],
      ['function_call', 'call_a'],
      ['function_call', 'call_b'],
      ['custom_tool_call', 'call_c'],
    ]);
    expect((final.output[4] as OpenAI.Responses.ResponseCustomToolCall).input).toBe(PATCH);
    expect(final.tools).toEqual(tools);

    expect(wire(final)).toEqual(wire(await client.responses.create(params(model))));
  });
});

test('a truncated reply: the cut item is incomplete in its output_item.done as in response.incomplete', async () => {
  const { events, final } = await streamed('truncated');
  const terminal = events.at(-1)!;
  expect(terminal.type).toBe('response.incomplete');
  let snapshot: OpenAI.Responses.Response | undefined;
  for (const event of events.slice(0, -1)) snapshot = accumulateResponse(event, snapshot);
  const incomplete = (terminal as OpenAI.Responses.ResponseIncompleteEvent).response;
  expect(incomplete).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
  expect(incomplete.output.map((item) => [item.type, 'status' in item ? item.status : undefined])).toEqual([
    ['reasoning', undefined],
    ['message', 'incomplete'],
  ]);
  expect(snapshot!.output).toEqual(incomplete.output);
  expect(wire(final)).toEqual(wire(await client.responses.create(params('truncated'))));
});
