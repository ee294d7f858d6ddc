/**
 * Chat mode's reasoning-token count (src/engines/chat-capture.ts reasoningTokenCount, ChatModeEngine): the engine's
 * own count where it sends one (vLLM `usage.completion_tokens_details.reasoning_tokens`, SGLang `usage.reasoning_tokens`),
 * else the sampled tokens before the end-of-think id the probe asked the engine for; streamed and whole answers agree.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { reasoningTokenCount } from '../../src/engines/chat-capture.ts';
import { createEngineClient, type EngineCallContext } from '../../src/engines/index.ts';
import type { IRRequest, IRResponse } from '../../src/core/ir.ts';
import { startFakeEngine, type FakeEngine } from '../support/fake-engine.ts';

const THINK_CLOSE = 151668;
const request: IRRequest = {
  version: 1, model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'What is 2+2?' }] }], tools: [],
  sampling: { maxTokens: 64 }, stream: false, warnings: [],
};
const ctx: EngineCallContext = { sessionId: 's', requestId: 'r' };
const stops: (() => unknown)[] = [];
afterAll(async () => {
  for (const stop of stops) await stop();
});

/**
 * An SGLang-shaped chat server (sgl-project/sglang protocol.py `UsageInfo.reasoning_tokens`, top level): sampled ids
 * `<think>` a b c `</think>` d e `<|im_end|>`, reasoning "a b c", content "d e"; `reasoning_tokens` as given (0 is what
 * builds before sgl-project/sglang PR #15562 always send); `/tokenize` knows `</think>` when `tokenizes` is set.
 */
function sglangLike(reasoningTokens: number | undefined, tokenizes: boolean) {
  const ids = [151667, 1, 2, 3, THINK_CLOSE, 4, 5, 151645];
  const usage = { prompt_tokens: 3, completion_tokens: ids.length, total_tokens: 3 + ids.length, ...(reasoningTokens !== undefined ? { reasoning_tokens: reasoningTokens } : {}) };
  const meta = (from: number, to: number) => ({ output_token_logprobs: ids.slice(from, to).map((id) => [-0.5, id, null]) });
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      const path = new URL(req.url).pathname;
      if (path === '/v1/models') return Response.json({ data: [{ id: 'm' }] });
      if (path === '/tokenize') return tokenizes ? Response.json({ tokens: [THINK_CLOSE], count: 1 }) : Response.json({ detail: 'Not Found' }, { status: 404 });
      const body = (await req.json()) as { stream?: boolean };
      if (!body.stream) {
        return Response.json({
          id: 'x', object: 'chat.completion', model: 'm', usage,
          choices: [{ index: 0, message: { role: 'assistant', content: 'd e', reasoning_content: 'a b c' }, finish_reason: 'stop', prompt_token_ids: [7, 8, 9], token_ids: ids, meta_info: meta(0, ids.length) }],
        });
      }
      const parts: [Record<string, unknown>, number, number][] = [[{ reasoning_content: 'a b c' }, 0, 5], [{ content: 'd e' }, 5, ids.length]];
      let out = `data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, delta: { role: 'assistant' }, prompt_token_ids: [7, 8, 9] }] })}\n\n`;
      for (const [k, [delta, from, to]] of parts.entries()) {
        const last = k === parts.length - 1;
        out += `data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, delta, token_ids: ids.slice(from, to), meta_info: meta(from, to), finish_reason: last ? 'stop' : null }] })}\n\n`;
      }
      out += `data: ${JSON.stringify({ id: 'x', choices: [], usage })}\n\ndata: [DONE]\n\n`;
      return new Response(out, { headers: { 'content-type': 'text/event-stream' } });
    },
  });
  stops.push(() => server.stop(true));
  return `http://127.0.0.1:${server.port}`;
}

describe('an SGLang-shaped engine, whole and streamed answers', () => {
  const both = async (url: string) => {
    const engine = createEngineClient({ kind: 'sglang', url, mode: 'chat', timeoutMs: 5000, stream: 'always' });
    const whole = await engine.complete(request, ctx);
    const streamed = await engine.stream!({ ...request, stream: true }, ctx, () => {});
    expect(whole.capture?.captureError).toBeNull();
    expect(streamed.capture?.captureError).toBeNull();
    expect(streamed.capture?.responseIds).toEqual(whole.capture!.responseIds);
    expect(streamed.response.usage).toEqual(whole.response.usage);
    return { engine, count: whole.response.usage.reasoningTokens };
  };

  test('the engine\'s own count at usage.reasoning_tokens wins', async () => {
    expect((await both(sglangLike(3, true))).count).toBe(3);
  });

  test('a 0 next to reasoning text (a build before the count) gives way to the tokens before </think>', async () => {
    const { engine, count } = await both(sglangLike(0, true));
    expect(engine.probeReport!()?.thinkCloseId).toBe(THINK_CLOSE);
    expect(count).toBe(4);
  });

  test('no count and no /tokenize: unknown, 0, when content follows the reasoning', async () => {
    const { engine, count } = await both(sglangLike(undefined, false));
    expect(engine.probeReport!()?.thinkCloseId).toBeNull();
    expect(count).toBe(0);
  });
});

describe('the fake engines (ids of UTF-8 bytes: no single </think> id)', () => {
  const reply = { kind: 'text' as const, text: 'The answer is 4.', reasoning: 'Two plus two is four.' };
  const start = async (opts: Parameters<typeof startFakeEngine>[0]): Promise<FakeEngine> => {
    const fake = await startFakeEngine({ servedModel: 'm', ...opts });
    stops.push(() => fake.stop());
    return fake;
  };

  test.each(['vllm', 'sglang'] as const)('%s: the engine count is answered', async (shape) => {
    const fake = await start({ shape, reasoningTokens: 9, script: [reply] });
    const engine = createEngineClient({ kind: shape, url: fake.url, mode: 'chat', timeoutMs: 5000 });
    expect((await engine.complete(request, ctx)).response.usage.reasoningTokens).toBe(9);
  });

  test('a sample that is all reasoning (cut inside its think block) counts whole', async () => {
    const fake = await start({ shape: 'sglang', reasoningTokens: 0, script: [{ kind: 'text', text: '', reasoning: 'Still thinking about' }] });
    const engine = createEngineClient({ kind: 'sglang', url: fake.url, mode: 'chat', timeoutMs: 5000 });
    const done = await engine.complete(request, ctx);
    expect(done.response.usage.reasoningTokens).toBe(done.capture!.responseIds.length);
  });
});

describe('reasoningTokenCount', () => {
  const response = (over: Partial<IRResponse>): IRResponse => ({
    id: 'r', model: 'm', content: [{ type: 'text', text: 'd e' }], reasoning: { text: 'a b c' }, toolCalls: [], finishReason: { unified: 'stop' },
    usage: { inputTokens: 3, outputTokens: 8, cachedInputTokens: 0, reasoningTokens: 0 }, warnings: [], createdAt: 0, ...over,
  });
  const ids = [151667, 1, 2, 3, THINK_CLOSE, 4, 5, 151645];

  test('no reasoning: the engine count, else 0', () => {
    const plain = response({ reasoning: undefined });
    expect(reasoningTokenCount(plain, undefined, ids, THINK_CLOSE)).toBe(0);
    expect(reasoningTokenCount(plain, 0, ids, THINK_CLOSE)).toBe(0);
    expect(reasoningTokenCount(plain, 2, ids, THINK_CLOSE)).toBe(2);
  });

  test('reasoning: a positive engine count, else the ids before </think>', () => {
    expect(reasoningTokenCount(response({}), 3, ids, THINK_CLOSE)).toBe(3);
    expect(reasoningTokenCount(response({}), 0, ids, THINK_CLOSE)).toBe(4);
    expect(reasoningTokenCount(response({}), undefined, ids, THINK_CLOSE)).toBe(4);
  });

  test('no </think> among the ids: the whole sample if it is all reasoning, else 0', () => {
    const cut = ids.slice(0, 4);
    expect(reasoningTokenCount(response({ content: [], usage: { inputTokens: 3, outputTokens: 4, cachedInputTokens: 0, reasoningTokens: 0 } }), undefined, cut, THINK_CLOSE)).toBe(4);
    expect(reasoningTokenCount(response({}), undefined, ids, undefined)).toBe(0);
    expect(reasoningTokenCount(response({ toolCalls: [{ id: 'c', name: 'f', arguments: '{}' }], content: [] }), undefined, cut, THINK_CLOSE)).toBe(0);
  });
});
