/**
 * True streaming through the proxy, in all four dialects, chat mode and token mode, in front of the real simulator:
 * the client receives the first words while the engine is still generating (a gate between the proxy and the
 * simulator holds the engine's stream after its first words until the test has seen them), the record is assembled
 * from the chunks with a sound capture, and the streamed text is the recorded text. Plus: status before bytes (Chat
 * and Gemini get the engine's 429 as a real status with its Retry-After; Anthropic and Responses too when it comes
 * within one keep-alive interval, else headers, keep-alives and an in-band error), the
 * capture cross-check of a streamed answer, and `engine.stream: never`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { textOf } from '../../src/core/ir.ts';
import { createEngineClient } from '../../src/engines/index.ts';
import type { CaptureMode, EngineClient, EngineKind } from '../../src/engines/types.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { staticSessions } from '../../src/proxy/sessions.ts';
import { SimServer } from '../../src/sim/server.ts';
import { openStore, type Store } from '../../src/store/index.ts';

const ANSWER = 'alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa';
let sim: SimServer;

beforeAll(async () => {
  sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 400, scripts: { t: { variants: { a: { weight: 1, steps: [{ say: ANSWER }] } } } } });
});
afterAll(async () => {
  await sim.stop();
});

/**
 * A pass-through in front of the simulator that holds a streamed answer a few chunks after the first word ("alpha"),
 * until `release()`: whatever the client has by then was sent while the engine was still generating. (Not right after
 * the first word: Gemini's encoder holds one frame back so that the finish reason rides on the last content frame.)
 */
function gate(target: string) {
  let open!: () => void;
  let opened = new Promise<void>((resolve) => (open = resolve));
  let held = false;
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    idleTimeout: 0,
    async fetch(request) {
      const url = new URL(request.url);
      const body = request.method === 'POST' ? await request.text() : undefined;
      const upstream = await fetch(target + url.pathname + url.search, { method: request.method, headers: request.headers, body });
      const streamed = body !== undefined && (JSON.parse(body) as { stream?: boolean }).stream === true && !body.includes('"max_tokens":1') && !body.includes('"max_new_tokens":1') && !body.includes('"n_predict":1');
      if (!streamed || !upstream.body) return upstream;
      const reader = upstream.body.getReader();
      const decoder = new TextDecoder();
      let seen = '';
      return new Response(
        new ReadableStream<Uint8Array>({
          async pull(controller) {
            const { done, value } = await reader.read();
            if (done) return controller.close();
            controller.enqueue(value);
            seen += decoder.decode(value, { stream: true });
            const at = seen.indexOf('alpha');
            if (!held && at >= 0 && seen.slice(at).split('\n\n').length > 5) {
              held = true;
              await opened;
            }
          },
        }),
        { status: upstream.status, headers: upstream.headers },
      );
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}`,
    get held() {
      return held;
    },
    release: () => open(),
    reset() {
      held = false;
      opened = new Promise<void>((resolve) => (open = resolve));
    },
    stop: () => server.stop(true),
  };
}

interface Stack { url: string; store: Store; engine: EngineClient; stop(): Promise<void> }

async function stack(engineUrl: string, mode: CaptureMode, stream: 'auto' | 'never' = 'auto', kind: EngineKind = 'sim'): Promise<Stack> {
  const engine = createEngineClient({ kind, url: engineUrl, mode, timeoutMs: 30_000, stream, log: () => {} });
  await engine.probe();
  const store = openStore(':memory:');
  const sessions = staticSessions(Object.fromEntries(['a', 'c', 'r', 'g', 'x'].map((k) => [k, { session_id: `s-${k}`, task_id: 't' }])));
  const app = createProxyApp({ engine, store, sessions, options: { keepaliveIntervalMs: 60_000 } });
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: app.fetch, idleTimeout: 0 });
  return { url: `http://127.0.0.1:${server.port}`, store, engine, stop: async () => void (await server.stop(true)) };
}

const DIALECTS = [
  { name: 'anthropic', key: 'a', path: '/v1/messages', headers: { 'x-api-key': 'a' }, body: { model: 'm', max_tokens: 400, stream: true, messages: [{ role: 'user', content: 'go' }] } },
  { name: 'openai-chat', key: 'c', path: '/v1/chat/completions', headers: { authorization: 'Bearer c' }, body: { model: 'm', stream: true, messages: [{ role: 'user', content: 'go' }] } },
  { name: 'openai-responses', key: 'r', path: '/v1/responses', headers: { authorization: 'Bearer r' }, body: { model: 'm', stream: true, input: 'go' } },
  { name: 'gemini', key: 'g', path: '/v1beta/models/m:streamGenerateContent?alt=sse', headers: { 'x-goog-api-key': 'g' }, body: { contents: [{ role: 'user', parts: [{ text: 'go' }] }] } },
] as const;

/** The words of the answer as the client's stream carries them (text deltas in each dialect's own fields). */
function streamedText(sse: string): string {
  let out = '';
  for (const line of sse.split('\n')) {
    if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
    const data = JSON.parse(line.slice(6)) as any;
    if (data.type === 'content_block_delta' && data.delta.type === 'text_delta') out += data.delta.text;
    else if (data.object === 'chat.completion.chunk') out += data.choices[0]?.delta?.content ?? '';
    else if (data.type === 'response.output_text.delta') out += data.delta;
    else if (data.candidates) for (const part of data.candidates[0].content.parts) if (part.text && !part.thought) out += part.text;
  }
  return out;
}

// The simulator serves each engine's contract: vLLM chat (chat mode), vLLM /v1/completions, SGLang /generate and
// llama.cpp /completion (token mode), each streamed at its decode rate.
const ENGINES: Array<[CaptureMode, EngineKind, string]> = [
  ['chat', 'sim', 'vLLM chat'],
  ['token', 'sim', 'vLLM /v1/completions'],
  ['token', 'sglang', 'SGLang /generate'],
  ['token', 'llamacpp', 'llama.cpp /completion'],
];

for (const [mode, kind, contract] of ENGINES) {
  describe(`${mode} mode, ${contract} stream`, () => {
    let front: ReturnType<typeof gate>;
    let proxy: Stack;
    beforeAll(async () => {
      front = gate(sim.url);
      proxy = await stack(front.url, mode, 'auto', kind);
    });
    afterAll(async () => {
      await proxy.stop();
      front.stop();
    });

    test('the engine is probed as streaming with a sound capture', () => {
      expect(proxy.engine.streams?.()).toBe(true);
    });

    for (const dialect of DIALECTS) {
      test(`${dialect.name}: the first words reach the client while the engine is still generating; the record is the stream's`, async () => {
        front.reset();
        const res = await fetch(proxy.url + dialect.path, { method: 'POST', headers: { 'content-type': 'application/json', ...dialect.headers }, body: JSON.stringify(dialect.body) });
        expect(res.status).toBe(200);
        const reader = res.body!.getReader();
        const decoder = new TextDecoder();
        let sse = '';
        while (!streamedText(completeLines(sse)).includes('alpha')) {
          const { done, value } = await reader.read();
          expect(done).toBe(false);
          sse += decoder.decode(value, { stream: true });
        }
        // The gate lets the engine's stream end only after release(): the client got its first words mid-generation.
        expect(proxy.store.completions.listBySession(`s-${dialect.key}`)).toHaveLength(0);
        front.release();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          sse += decoder.decode(value, { stream: true });
        }
        expect(front.held).toBe(true);
        const [record] = proxy.store.completions.listBySession(`s-${dialect.key}`);
        expect(record!.capture_error).toBeNull();
        expect(record!.response_ids.length).toBeGreaterThan(10);
        expect(record!.logprobs).toHaveLength(record!.response_ids.length);
        expect(record!.warnings.filter((w) => w.startsWith('stream-diverged'))).toEqual([]);
        expect(streamedText(sse)).toBe(textOf(record!.ir_response!.content));
        expect(streamedText(sse)).toBe(ANSWER);
      });
    }
  });
}

/** The SSE text up to its last complete line (a read may end mid-line). */
function completeLines(sse: string): string {
  return sse.slice(0, sse.lastIndexOf('\n') + 1);
}

describe('engine.stream: never', () => {
  test('streaming clients get the synthetic replay; no streamed engine call is made', async () => {
    const proxy = await stack(sim.url, 'chat', 'never');
    try {
      expect(proxy.engine.streams?.()).toBe(false);
      expect(proxy.engine.probeReport?.()?.streamCapture).toBeNull();
      const res = await fetch(`${proxy.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': 'x' }, body: JSON.stringify(DIALECTS[0].body) });
      const sse = await res.text();
      expect(streamedText(sse)).toBe(ANSWER);
      // The synthetic replay sends message_start before the engine answered, with input_tokens unknown (0).
      expect(sse).toContain('"input_tokens":0,"output_tokens":0');
    } finally {
      await proxy.stop();
    }
  });
});

/** A scripted engine: `/v1/models`, a non-streaming probe answer, and for streamed calls what `streamed` says. */
function scriptedEngine(streamed: (body: Record<string, unknown>) => Response) {
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      const url = new URL(request.url);
      if (url.pathname === '/v1/models') return Response.json({ object: 'list', data: [{ id: 'm', object: 'model' }] });
      if (request.method !== 'POST') return Response.json({ detail: 'Not Found' }, { status: 404 });
      const body = (await request.json()) as Record<string, unknown>;
      if (body.stream === true) return streamed(body);
      return Response.json({ id: 'p', choices: [{ index: 0, message: { role: 'assistant', content: 'x' }, finish_reason: 'stop' }] });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) };
}

async function proxyFor(engineUrl: string, options: { keepaliveIntervalMs?: number } = {}) {
  const engine = createEngineClient({ kind: 'vllm', url: engineUrl, mode: 'chat', timeoutMs: 10_000, stream: 'always' });
  await engine.probe();
  const store = openStore(':memory:');
  const app = createProxyApp({ engine, store, options, sessions: staticSessions(Object.fromEntries(['a', 'c', 'r', 'g'].map((k) => [k, { session_id: `s-${k}` }]))) });
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: app.fetch, idleTimeout: 0 });
  return { url: `http://127.0.0.1:${server.port}`, store, stop: () => server.stop(true) };
}

describe('status before bytes', () => {
  const engine = scriptedEngine(() => Response.json({ error: { message: 'too many requests', type: 'RateLimitError', code: 429 } }, { status: 429, headers: { 'retry-after': '7' } }));
  let proxy: Awaited<ReturnType<typeof proxyFor>>;
  beforeAll(async () => {
    proxy = await proxyFor(engine.url);
  });
  afterAll(() => {
    proxy.stop();
    engine.stop();
  });

  test('Chat and Gemini streams get the engine\'s 429 as a real status with Retry-After, in their own shape', async () => {
    const chat = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer c' }, body: JSON.stringify(DIALECTS[1].body) });
    expect(chat.status).toBe(429);
    expect(chat.headers.get('retry-after')).toBe('7');
    expect(((await chat.json()) as any).error.message).toContain('too many requests');
    const gemini = await fetch(proxy.url + DIALECTS[3].path, { method: 'POST', headers: { 'x-goog-api-key': 'g' }, body: JSON.stringify(DIALECTS[3].body) });
    expect(gemini.status).toBe(429);
    expect(gemini.headers.get('retry-after')).toBe('7');
    expect(((await gemini.json()) as any).error).toMatchObject({ code: 429, status: 'RESOURCE_EXHAUSTED' });
  });

  test('Anthropic and Responses streams get an engine 429 that comes within one keep-alive interval as a real status too', async () => {
    const anthropic = await fetch(`${proxy.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': 'a' }, body: JSON.stringify(DIALECTS[0].body) });
    expect(anthropic.status).toBe(429);
    expect(anthropic.headers.get('retry-after')).toBe('7');
    expect(await anthropic.json()).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
    const responses = await fetch(`${proxy.url}/v1/responses`, { method: 'POST', headers: { authorization: 'Bearer r' }, body: JSON.stringify(DIALECTS[2].body) });
    expect(responses.status).toBe(429);
    expect(responses.headers.get('retry-after')).toBe('7');
    expect(((await responses.json()) as any).error.message).toContain('too many requests');
  });

  test('an engine that fails after the keep-alive interval: Anthropic and Responses have sent headers and keep-alives, the error is in-band', async () => {
    const slow = scriptedEngine(() => new Response(null, { status: 204 }));
    const late = Bun.serve({
      port: 0, hostname: '127.0.0.1',
      async fetch(request) {
        const body = await request.text();
        if (request.method === 'POST' && body.includes('"stream":true')) {
          await Bun.sleep(400);
          return Response.json({ error: { message: 'too many requests', type: 'RateLimitError', code: 429 } }, { status: 429 });
        }
        return fetch(slow.url + new URL(request.url).pathname, { method: request.method, headers: request.headers, body: request.method === 'POST' ? body : undefined });
      },
    });
    const held = await proxyFor(`http://127.0.0.1:${late.port}`, { keepaliveIntervalMs: 100 });
    try {
      const anthropic = await fetch(`${held.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': 'a' }, body: JSON.stringify(DIALECTS[0].body) });
      expect(anthropic.status).toBe(200);
      const text = await anthropic.text();
      expect(text).toContain('event: ping');
      expect(text).toContain('event: error');
      expect(text).toContain('rate_limit_error');
      const responses = await fetch(`${held.url}/v1/responses`, { method: 'POST', headers: { authorization: 'Bearer r' }, body: JSON.stringify(DIALECTS[2].body) });
      expect(responses.status).toBe(200);
      expect(await responses.text()).toContain('too many requests');
    } finally {
      held.stop();
      late.stop(true);
      slow.stop();
    }
  });
});

describe('capture cross-check of a streamed answer', () => {
  const chunk = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;
  const engine = scriptedEngine(() => new Response(
    chunk({ id: 'c1', object: 'chat.completion.chunk', prompt_token_ids: [1, 2, 3], choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }) +
      chunk({ id: 'c1', choices: [{ index: 0, delta: { content: 'hi' }, token_ids: [10], logprobs: { content: [{ token: 'hi', logprob: -0.5 }] }, finish_reason: null }] }) +
      chunk({ id: 'c1', choices: [{ index: 0, delta: { content: '!' }, token_ids: [11, 12], logprobs: { content: [{ token: '!', logprob: -0.25 }, { token: '', logprob: -0.125 }] }, finish_reason: 'stop' }] }) +
      // The usage disagrees with the ids the chunks carried (3): the record gets a capture error, as a JSON answer would.
      chunk({ id: 'c1', choices: [], usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } }) +
      'data: [DONE]\n\n',
    { headers: { 'content-type': 'text/event-stream' } },
  ));
  let proxy: Awaited<ReturnType<typeof proxyFor>>;
  beforeAll(async () => {
    proxy = await proxyFor(engine.url);
  });
  afterAll(() => {
    proxy.stop();
    engine.stop();
  });

  test('the chunks\' ids and logprobs are concatenated and checked against usage', async () => {
    const res = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer c' }, body: JSON.stringify(DIALECTS[1].body) });
    expect(streamedText(await res.text())).toBe('hi!');
    const [record] = proxy.store.completions.listBySession('s-c');
    expect(record!.prompt_ids).toEqual([1, 2, 3]);
    expect(record!.response_ids).toEqual([10, 11, 12]);
    expect(record!.logprobs).toEqual([-0.5, -0.25, -0.125]);
    expect(record!.capture_error).toContain('usage.completion_tokens is 4 but 3 sampled ids came back');
  });
});

describe('SGLang-shaped chat stream (token data in meta_info)', () => {
  const chunk = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;
  for (const cumulative of [false, true]) {
    test(`${cumulative ? 'cumulative' : 'incremental'} meta_info.output_token_logprobs are read into one capture`, async () => {
      const entries = [[-0.5, 10, null], [-0.25, 11, null], [-0.125, 12, null]];
      const logprobsAt = (k: number) => (cumulative ? entries.slice(0, k + 1) : [entries[k]]);
      const engine = scriptedEngine(() => new Response(
        chunk({ id: 's1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, prompt_token_ids: [1, 2], finish_reason: null }] }) +
          ['a', 'b', 'c'].map((text, k) => chunk({ id: 's1', choices: [{ index: 0, delta: { content: text }, finish_reason: k === 2 ? 'stop' : null, meta_info: { output_token_logprobs: logprobsAt(k), weight_version: '7' } }] })).join('') +
          chunk({ id: 's1', choices: [], usage: { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 } }) +
          'data: [DONE]\n\n',
        { headers: { 'content-type': 'text/event-stream' } },
      ));
      const proxy = await proxyFor(engine.url);
      try {
        const res = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer c' }, body: JSON.stringify(DIALECTS[1].body) });
        expect(streamedText(await res.text())).toBe('abc');
        const [record] = proxy.store.completions.listBySession('s-c');
        expect(record!.capture_error).toBeNull();
        expect(record!.prompt_ids).toEqual([1, 2]);
        expect(record!.response_ids).toEqual([10, 11, 12]);
        expect(record!.logprobs).toEqual([-0.5, -0.25, -0.125]);
        expect(record!.policy_version).toBe('7');
      } finally {
        proxy.stop();
        engine.stop();
      }
    });
  }
});
