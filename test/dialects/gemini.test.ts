/** Gemini generateContent codec: recorded gemini-cli/pi requests, call-id matching, generationConfig, SSE frames. */
import { describe, expect, test } from 'bun:test';
import type { CodecContext } from '../../src/core/dialect.ts';
import { GatewayError } from '../../src/core/errors.ts';
import type { IRResponse } from '../../src/core/ir.ts';
import { responseToStreamEvents, type IRStreamEvent } from '../../src/core/stream.ts';
import { decodeCountTokensRequest, encodeCountTokensResponse, encodeModelList, gemini } from '../../src/dialects/gemini/index.ts';
import { codecContext, dialectFixtureDir, irResponseFactory } from '../support/dialects.ts';

const fixtureDir = dialectFixtureDir('gemini');
const fixture = async (name: string) => (await Bun.file(`${fixtureDir}/${name}`).json()) as { url: string; body: Record<string, unknown> };
const ctx = (extra: Partial<CodecContext> = {}): CodecContext => codecContext({ pathModel: 'gemini-2.5-pro', ...extra });

const irResponse = irResponseFactory({
  id: 'resp-1', model: 'gemini-2.5-pro', createdAt: 1_700_000_000_000,
  usage: { inputTokens: 100, outputTokens: 40, cachedInputTokens: 32, reasoningTokens: 10 },
});

function dataFrames(text: string): Record<string, unknown>[] {
  return text
    .split('\n\n')
    .filter((block) => block.startsWith('data: '))
    .map((block) => JSON.parse(block.slice(6)) as Record<string, unknown>);
}

function stream(events: IRStreamEvent[], c: CodecContext = ctx()): string {
  const encoder = gemini.createStreamEncoder(c);
  let out = '';
  for (const event of events) out += encoder.push(event);
  return out + encoder.end();
}

type Candidate = { content: { role: string; parts: Record<string, unknown>[] }; finishReason?: string; index: number };

/** Merge streamed chunks the way a client accumulates them: consecutive text parts of the same kind join. */
function reassemble(frames: Record<string, unknown>[]): Record<string, unknown> {
  const parts: Record<string, unknown>[] = [];
  let finishReason: string | undefined;
  for (const frame of frames) {
    const candidate = (frame.candidates as Candidate[])[0]!;
    for (const part of candidate.content.parts) {
      const last = parts.at(-1);
      if (typeof part.text === 'string' && last && typeof last.text === 'string' && Boolean(last.thought) === Boolean(part.thought)) {
        last.text += part.text;
      } else parts.push({ ...part });
    }
    finishReason = candidate.finishReason ?? finishReason;
  }
  const last = frames.at(-1)!;
  return {
    candidates: [{ content: { role: 'model', parts }, finishReason, index: 0 }],
    usageMetadata: last.usageMetadata,
    modelVersion: last.modelVersion,
    responseId: last.responseId,
  };
}

describe('decodeRequest on recorded traffic', () => {
  test('every recorded request decodes; the model comes from the path', async () => {
    for (const name of ['gemini-cli-quiet-001-request.json', 'gemini-cli-quiet-002-request.json', 'pi-gemini-001-request.json', 'pi-gemini-002-request.json']) {
      const { url, body } = await fixture(name);
      const pathModel = /models\/([^:]+):/.exec(url)![1]!;
      const ir = gemini.decodeRequest(body, ctx({ pathModel, pathStream: url.includes(':streamGenerateContent') }));
      expect(ir.model).toBe('gemini-2.5-pro');
      expect(ir.stream).toBe(true);
      expect(ir.messages[0]!.role).toBe('system');
      expect(ir.tools.length).toBeGreaterThanOrEqual(4);
      for (const tool of ir.tools) expect(tool.parameters.type).toBe('object');
    }
  });

  test('gemini-cli turn 2: call ids kept, thoughtSignature ignored, generationConfig exact', async () => {
    const ir = gemini.decodeRequest((await fixture('gemini-cli-quiet-002-request.json')).body, ctx());
    expect(ir.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
    expect(ir.messages[2]).toEqual({
      role: 'assistant',
      content: [],
      toolCalls: [{ id: 'run_shell_command_1795944249713_0', name: 'run_shell_command', arguments: '{"command":"ls"}' }],
    });
    expect(ir.messages[3]).toMatchObject({ role: 'tool', toolCallId: 'run_shell_command_1795944249713_0', name: 'run_shell_command' });
    expect(ir.sampling).toEqual({ temperature: 1, topP: 0.95, topK: 64 });
    expect(ir.reasoning).toEqual({ enabled: true, budgetTokens: 8192 });
    expect(ir.tools.map((t) => t.name)).toContain('run_shell_command');
    expect(ir.warnings).toEqual([]);
  });

  test('pi turn 2: no ids → minted and the response matched by order', async () => {
    const ir = gemini.decodeRequest((await fixture('pi-gemini-002-request.json')).body, ctx());
    const assistant = ir.messages[2]!;
    expect(assistant.role === 'assistant' && assistant.toolCalls?.[0]?.id).toBe('call_1');
    expect(ir.messages[3]).toEqual({ role: 'tool', toolCallId: 'call_1', name: 'bash', content: [{ type: 'text', text: 'README.txt\nmain.py\n' }] });
    expect(ir.sampling).toEqual({ maxTokens: 8192 });
  });
});

describe('decodeRequest rules', () => {
  const body = (contents: unknown[], extra: Record<string, unknown> = {}) => ({ contents, ...extra });

  test('parallel calls to the same function: matched by id, then by order, never by name', () => {
    const ir = gemini.decodeRequest(
      body([
        { role: 'user', parts: [{ text: 'two' }] },
        {
          role: 'model',
          parts: [
            { text: 'hmm', thought: true, thoughtSignature: 'sig' },
            { functionCall: { name: 'sh', args: { command: 'a' } } },
            { functionCall: { name: 'sh', args: { command: 'b' } } },
            { functionCall: { id: 'c3', name: 'sh', args: { command: 'c' } } },
          ],
        },
        {
          role: 'user',
          parts: [
            { functionResponse: { id: 'c3', name: 'sh', response: { output: 'C' } } },
            { functionResponse: { name: 'sh', response: { output: 'A' } } },
            { functionResponse: { name: 'sh', response: { error: 'B failed' } } },
          ],
        },
      ]),
      ctx(),
    );
    expect(ir.messages[1]).toEqual({
      role: 'assistant',
      content: [],
      reasoning: { text: 'hmm' },
      toolCalls: [
        { id: 'call_1', name: 'sh', arguments: '{"command":"a"}' },
        { id: 'call_2', name: 'sh', arguments: '{"command":"b"}' },
        { id: 'c3', name: 'sh', arguments: '{"command":"c"}' },
      ],
    });
    expect(ir.messages.slice(2)).toEqual([
      { role: 'tool', toolCallId: 'c3', name: 'sh', content: [{ type: 'text', text: 'C' }] },
      { role: 'tool', toolCallId: 'call_1', name: 'sh', content: [{ type: 'text', text: 'A' }] },
      { role: 'tool', toolCallId: 'call_2', name: 'sh', content: [{ type: 'text', text: 'B failed' }], isError: true },
    ]);
  });

  test('candidateCount > 1 and a missing model are 400s; bad parts name the field', () => {
    const err = (fn: () => unknown) => {
      try {
        fn();
      } catch (error) {
        return error as GatewayError;
      }
      throw new Error('expected a throw');
    };
    const many = err(() => gemini.decodeRequest(body([{ role: 'user', parts: [{ text: 'x' }] }], { generationConfig: { candidateCount: 2 } }), ctx()));
    expect(many.status).toBe(400);
    expect(many.message).toContain('candidateCount');
    expect(gemini.encodeError(many)).toEqual({ status: 400, body: { error: { code: 400, message: many.message, status: 'INVALID_ARGUMENT' } } });
    expect(err(() => gemini.decodeRequest(body([]), ctx({ pathModel: undefined }))).message).toContain('no model');
    expect(err(() => gemini.decodeRequest(body([{ role: 'user', parts: [{ functionCall: { args: {} } }] }]), ctx())).message).toContain('contents[0].parts[0].functionCall.name');
  });

  test('generationConfig, thinkingConfig and OpenAPI-style parameters', () => {
    const ir = gemini.decodeRequest(
      body([{ parts: [{ text: 'hi' }] }], {
        systemInstruction: { parts: [{ text: 'sys' }] },
        tools: [
          { functionDeclarations: [{ name: 'f', parameters: { type: 'OBJECT', properties: { a: { type: 'STRING', nullable: true }, b: { type: 'ARRAY', items: { type: 'INTEGER' } } } } }] },
          { googleSearch: {} },
        ],
        toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['f'] } },
        generationConfig: { maxOutputTokens: 100, stopSequences: ['END'], seed: 7, thinkingConfig: { thinkingBudget: 0 }, responseMimeType: 'application/json' },
      }),
      ctx({ pathStream: false }),
    );
    expect(ir.messages).toEqual([
      { role: 'system', content: [{ type: 'text', text: 'sys' }] },
      { role: 'user', content: [{ type: 'text', text: 'hi' }] },
    ]);
    expect(ir.tools[0]!.parameters).toEqual({
      type: 'object',
      properties: { a: { type: ['string', 'null'] }, b: { type: 'array', items: { type: 'integer' } } },
    });
    expect(ir.toolChoice).toEqual({ name: 'f' });
    expect(ir.sampling).toEqual({ maxTokens: 100, stop: ['END'], seed: 7 });
    expect(ir.reasoning).toEqual({ enabled: false });
    expect(ir.stream).toBe(false);
    expect(ir.responseFormat).toEqual({ type: 'json_object' });
    expect(ir.warnings.map((w) => w.code).sort()).toEqual(['tool-dropped']);
  });
});

describe('encodeResponse', () => {
  test('parts: thought, text, one functionCall per call; finishReason and complete usageMetadata', () => {
    const body = gemini.encodeResponse(
      irResponse({
        reasoning: { text: 'plan' },
        content: [{ type: 'text', text: 'Running.' }],
        toolCalls: [
          { id: 'call_a', name: 'sh', arguments: '{"command":"ls"}' },
          { id: 'call_b', name: 'sh', arguments: 'not json' },
        ],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
      }),
      ctx(),
    );
    expect(body).toEqual({
      candidates: [
        {
          content: {
            role: 'model',
            parts: [
              { text: 'plan', thought: true },
              { text: 'Running.' },
              { functionCall: { id: 'call_a', name: 'sh', args: { command: 'ls' } } },
              { functionCall: { id: 'call_b', name: 'sh', args: { _raw: 'not json' } } },
            ],
          },
          finishReason: 'STOP',
          index: 0,
        },
      ],
      usageMetadata: { promptTokenCount: 100, candidatesTokenCount: 30, totalTokenCount: 140, thoughtsTokenCount: 10, cachedContentTokenCount: 32 },
      modelVersion: 'gemini-2.5-pro',
      responseId: 'resp-1',
    });
  });

  test('truncation is MAX_TOKENS and an empty answer has no empty text part', () => {
    const body = gemini.encodeResponse(irResponse({ content: [{ type: 'text', text: '' }], finishReason: { unified: 'length', raw: 'length' } }), ctx());
    expect(body.candidates[0]).toEqual({ content: { role: 'model', parts: [] }, finishReason: 'MAX_TOKENS', index: 0 });
  });

  test('decodeResponse inverts encodeResponse', () => {
    const response = irResponse({
      reasoning: { text: 'r' },
      content: [{ type: 'text', text: 't' }],
      toolCalls: [{ id: 'x1', name: 'sh', arguments: '{"a":1}' }],
      finishReason: { unified: 'tool-calls', raw: 'STOP' },
    });
    expect(gemini.decodeResponse(gemini.encodeResponse(response, ctx()), ctx({ now: () => response.createdAt }))).toEqual(response);
  });

  test('IR → wire request → IR is lossless for a tool loop', async () => {
    const original = gemini.decodeRequest((await fixture('gemini-cli-quiet-002-request.json')).body, ctx({ pathStream: true }));
    const again = gemini.decodeRequest(gemini.encodeRequest(original), ctx({ pathStream: true }));
    expect(again.messages).toEqual(original.messages);
    expect(again.tools).toEqual(original.tools);
    expect(again.sampling).toEqual(original.sampling);
    expect(again.reasoning).toEqual(original.reasoning);
  });
});

describe('stream encoder', () => {
  const full = () =>
    irResponse({
      reasoning: { text: 'plan ✓' },
      content: [{ type: 'text', text: 'Running both.' }],
      toolCalls: [
        { id: 'call_a', name: 'sh', arguments: '{"command":"ls"}' },
        { id: 'call_b', name: 'sh', arguments: '{"command":"pwd"}' },
      ],
      finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
    });
  const start = (r: IRResponse): IRStreamEvent => ({ type: 'start', id: r.id, model: r.model, createdAt: r.createdAt, inputTokens: 0 });

  test('data-only frames; parallel calls in separate parts; finishReason and usage on the last frame; reassembly equals the non-streaming body', () => {
    const response = full();
    const text = stream([start(response), { type: 'keep-alive' }, ...responseToStreamEvents(response)]);
    // No SSE comments at all: gemini-cli's bundled @google/genai cannot skip them (see encode-stream.ts).
    expect(text.startsWith('data: ')).toBe(true);
    expect(text.split('\n\n').filter(Boolean).every((frame) => frame.startsWith('data: '))).toBe(true);
    const frames = dataFrames(text);
    expect(frames.length).toBe(4);
    for (const frame of frames) {
      expect(frame).toMatchObject({ modelVersion: 'gemini-2.5-pro', responseId: 'resp-1' });
      for (const part of (frame.candidates as Candidate[])[0]!.content.parts) if ('text' in part) expect(part.text).not.toBe('');
    }
    expect(frames.slice(0, -1).every((f) => (f.candidates as Candidate[])[0]!.finishReason === undefined)).toBe(true);
    expect((frames[2]!.candidates as Candidate[])[0]!.content.parts).toEqual([{ functionCall: { id: 'call_a', name: 'sh', args: { command: 'ls' } } }]);
    expect(reassemble(frames)).toEqual(gemini.encodeResponse(response, ctx()) as unknown as Record<string, unknown>);
  });

  test('seeded random chunk splitting: the genai-style parser sees the same frames', () => {
    const response = full();
    const text = stream([start(response), ...responseToStreamEvents(response)]);
    const bytes = new TextEncoder().encode(text);
    for (const seed of [1, 7, 99, 2024]) {
      let state = seed;
      const decoder = new TextDecoder();
      let buffer = '';
      const frames: Record<string, unknown>[] = [];
      for (let offset = 0; offset < bytes.length; ) {
        state = (state * 1103515245 + 12345) & 0x7fffffff;
        const size = (state % 13) + 1;
        buffer += decoder.decode(bytes.slice(offset, offset + size), { stream: true });
        offset += size;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          frames.push(...dataFrames(buffer.slice(0, end + 2)));
          buffer = buffer.slice(end + 2);
        }
      }
      expect(buffer).toBe('');
      expect(frames).toEqual(dataFrames(text));
    }
  });

  test('an empty reply still ends with a finishReason frame; an error after the first byte is a Google error frame', () => {
    const empty = irResponse({ finishReason: { unified: 'length', raw: 'length' } });
    const frames = dataFrames(stream([start(empty), ...responseToStreamEvents(empty)]));
    expect(frames.length).toBe(1);
    expect((frames[0]!.candidates as Candidate[])[0]).toEqual({ content: { role: 'model', parts: [] }, finishReason: 'MAX_TOKENS', index: 0 });

    const failed = dataFrames(stream([start(empty), { type: 'text-delta', text: 'par' }, { type: 'error', error: new GatewayError('upstream', 'engine died') }]));
    expect(failed.length).toBe(2);
    expect(failed[1]).toEqual({ error: { code: 502, message: 'engine died', status: 'UNAVAILABLE' } });
  });
});

test('models list and countTokens shapes', () => {
  expect(encodeModelList([{ id: 'qwen3', inputTokenLimit: 40960 }])).toEqual({
    models: [
      expect.objectContaining({ name: 'models/qwen3', inputTokenLimit: 40960, supportedGenerationMethods: ['generateContent', 'streamGenerateContent', 'countTokens'] }),
    ],
  });
  const ir = decodeCountTokensRequest({ generateContentRequest: { model: 'models/qwen3', contents: [{ role: 'user', parts: [{ text: 'hi' }] }] } }, ctx({ pathModel: undefined }));
  expect(ir.model).toBe('qwen3');
  expect(ir.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'hi' }] }]);
  expect(encodeCountTokensResponse(12)).toEqual({ totalTokens: 12 });
  expect(gemini.encodeError(new GatewayError('overloaded', 'busy'))).toEqual({ status: 503, body: { error: { code: 503, message: 'busy', status: 'UNAVAILABLE' } } });
});
