/**
 * Proxy faults found by trying public bug reports, each checked in every dialect, as JSON and as a stream:
 * 1. a stop-string hit is reported as one (Anthropic `stop_reason: "stop_sequence"` + the string), and on the record;
 * 2. images inside tool results reach the engine as image parts (not the text "[image]");
 * 3. Anthropic `message_start.usage.input_tokens` is the real prompt count on a true stream (chat and token mode);
 * 4. empty tool arguments from the engine ("") reach clients as {};
 * 5. lone UTF-16 surrogates are made well-formed before the engine, with a warning;
 * 6. whitespace-only text next to a tool call is dropped (no empty text block / message item / text part);
 * 7. an engine stream that ends cleanly before any chunk carried a finish reason is an error in the client's stream,
 *    never a finished (and recorded, trainable) answer;
 * 8. token mode, an answer cut off by max_tokens inside the think block it opened: streamed once, as reasoning, and
 *    recorded as reasoning (it was streamed as reasoning and then again as text).
 * Chat mode runs against the scripted fake engine (JSON answers: streams are replays) and, for the true stream, the
 * simulator; token mode against the simulator.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createEngineClient } from '../../src/engines/index.ts';
import type { CaptureMode } from '../../src/engines/types.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { staticSessions } from '../../src/proxy/sessions.ts';
import { SimServer } from '../../src/sim/server.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { startFakeEngine, type FakeEngine, type FakeReply } from '../support/fake-engine.ts';

type Dialect = 'anthropic' | 'chat' | 'responses' | 'gemini';
const DIALECTS: Dialect[] = ['anthropic', 'chat', 'responses', 'gemini'];

/** What a client of each dialect ends up with, from a JSON body or a stream. */
interface ClientView {
  status: number;
  text: string;
  /** Number of text blocks / message items / text parts (an empty one counts). */
  textBlocks: number;
  toolCalls: Array<{ name: string; args: unknown }>;
  finish: string | null;
  stopSequence: string | null;
  inputTokensAtStart: number | null;
  warnings: string;
}

const PATH: Record<Dialect, (stream: boolean) => string> = {
  anthropic: () => '/v1/messages',
  chat: () => '/v1/chat/completions',
  responses: () => '/v1/responses',
  gemini: (stream) => (stream ? '/v1beta/models/m:streamGenerateContent?alt=sse' : '/v1beta/models/m:generateContent'),
};
const AUTH: Record<Dialect, (key: string) => Record<string, string>> = {
  anthropic: (key) => ({ 'x-api-key': key }),
  chat: (key) => ({ authorization: `Bearer ${key}` }),
  responses: (key) => ({ authorization: `Bearer ${key}` }),
  gemini: (key) => ({ 'x-goog-api-key': key }),
};

/** A request in each dialect: a user turn, optionally a Bash tool call answered with `toolResult` parts, a stop string. */
function requestBody(dialect: Dialect, opts: { stream: boolean; user?: string; toolResult?: Array<{ text: string } | { image: string }>; stop?: string }): Record<string, unknown> {
  const user = opts.user ?? 'go';
  const png = (data: string) => data;
  const tool = opts.toolResult;
  switch (dialect) {
    case 'anthropic': {
      const messages: unknown[] = [{ role: 'user', content: user }];
      if (tool) {
        messages.push({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'ls' } }] });
        messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: tool.map((p) => ('text' in p ? { type: 'text', text: p.text } : { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png(p.image) } })) }] });
      }
      return { model: 'm', max_tokens: 300, stream: opts.stream, messages, tools: [{ name: 'Bash', input_schema: { type: 'object', properties: { command: { type: 'string' } } } }], ...(opts.stop ? { stop_sequences: [opts.stop] } : {}) };
    }
    case 'chat': {
      const messages: unknown[] = [{ role: 'user', content: user }];
      if (tool) {
        messages.push({ role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'Bash', arguments: '{"command":"ls"}' } }] });
        messages.push({ role: 'tool', tool_call_id: 'call_1', content: tool.map((p) => ('text' in p ? { type: 'text', text: p.text } : { type: 'image_url', image_url: { url: `data:image/png;base64,${p.image}` } })) });
      }
      return { model: 'm', stream: opts.stream, messages, tools: [{ type: 'function', function: { name: 'Bash', parameters: { type: 'object', properties: { command: { type: 'string' } } } } }], ...(opts.stop ? { stop: [opts.stop] } : {}) };
    }
    case 'responses': {
      const input: unknown[] = [{ role: 'user', content: user }];
      if (tool) {
        input.push({ type: 'function_call', call_id: 'call_1', name: 'Bash', arguments: '{"command":"ls"}' });
        input.push({ type: 'function_call_output', call_id: 'call_1', output: tool.map((p) => ('text' in p ? { type: 'input_text', text: p.text } : { type: 'input_image', image_url: `data:image/png;base64,${p.image}` })) });
      }
      return { model: 'm', stream: opts.stream, input, tools: [{ type: 'function', name: 'Bash', parameters: { type: 'object', properties: { command: { type: 'string' } } } }] };
    }
    case 'gemini': {
      const contents: unknown[] = [{ role: 'user', parts: [{ text: user }] }];
      if (tool) {
        contents.push({ role: 'model', parts: [{ functionCall: { name: 'Bash', args: { command: 'ls' } } }] });
        const text = tool.flatMap((p) => ('text' in p ? [p.text] : [])).join('\n');
        const images = tool.flatMap((p) => ('image' in p ? [{ inlineData: { mimeType: 'image/png', data: p.image } }] : []));
        contents.push({ role: 'user', parts: [{ functionResponse: { name: 'Bash', response: { output: text }, ...(images.length ? { parts: images } : {}) } }] });
      }
      return { contents, tools: [{ functionDeclarations: [{ name: 'Bash', parameters: { type: 'object', properties: { command: { type: 'string' } } } }] }], ...(opts.stop ? { generationConfig: { stopSequences: [opts.stop] } } : {}) };
    }
  }
}

function dataLines(sse: string): any[] {
  return sse.split('\n').filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]').map((l) => JSON.parse(l.slice(6)));
}

function view(dialect: Dialect, status: number, body: string, stream: boolean, warnings: string): ClientView {
  const v: ClientView = { status, text: '', textBlocks: 0, toolCalls: [], finish: null, stopSequence: null, inputTokensAtStart: null, warnings };
  if (status !== 200) return v;
  if (!stream) {
    const j = JSON.parse(body) as any;
    if (dialect === 'anthropic') {
      for (const block of j.content) {
        if (block.type === 'text') (v.textBlocks++, (v.text += block.text));
        if (block.type === 'tool_use') v.toolCalls.push({ name: block.name, args: block.input });
      }
      [v.finish, v.stopSequence] = [j.stop_reason, j.stop_sequence];
    } else if (dialect === 'chat') {
      const m = j.choices[0].message;
      if (typeof m.content === 'string') (v.textBlocks++, (v.text += m.content));
      for (const c of m.tool_calls ?? []) v.toolCalls.push({ name: c.function.name, args: JSON.parse(c.function.arguments) });
      v.finish = j.choices[0].finish_reason;
    } else if (dialect === 'responses') {
      for (const item of j.output) {
        if (item.type === 'message') for (const c of item.content) (v.textBlocks++, (v.text += c.text));
        if (item.type === 'function_call') v.toolCalls.push({ name: item.name, args: JSON.parse(item.arguments) });
      }
      v.finish = j.status;
    } else {
      for (const p of j.candidates[0].content.parts) {
        if (typeof p.text === 'string' && !p.thought) (v.textBlocks++, (v.text += p.text));
        if (p.functionCall) v.toolCalls.push({ name: p.functionCall.name, args: p.functionCall.args });
      }
      v.finish = j.candidates[0].finishReason;
    }
    return v;
  }
  const events = dataLines(body);
  if (dialect === 'anthropic') {
    const tools = new Map<number, { name: string; json: string }>();
    for (const e of events) {
      if (e.type === 'message_start') v.inputTokensAtStart = e.message.usage.input_tokens;
      if (e.type === 'content_block_start' && e.content_block.type === 'text') v.textBlocks++;
      if (e.type === 'content_block_start' && e.content_block.type === 'tool_use') tools.set(e.index, { name: e.content_block.name, json: '' });
      if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') v.text += e.delta.text;
      if (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta') tools.get(e.index)!.json += e.delta.partial_json;
      if (e.type === 'message_delta') [v.finish, v.stopSequence] = [e.delta.stop_reason, e.delta.stop_sequence];
    }
    for (const t of tools.values()) v.toolCalls.push({ name: t.name, args: JSON.parse(t.json || '{}') });
  } else if (dialect === 'chat') {
    const tools = new Map<number, { name: string; args: string }>();
    let sawContent = false;
    for (const e of events) {
      const c = e.choices?.[0];
      if (!c) continue;
      if (typeof c.delta?.content === 'string' && c.delta.content !== '') (sawContent = true, (v.text += c.delta.content));
      for (const t of c.delta?.tool_calls ?? []) {
        if (!tools.has(t.index)) tools.set(t.index, { name: t.function?.name ?? '', args: '' });
        tools.get(t.index)!.args += t.function?.arguments ?? '';
      }
      if (c.finish_reason) v.finish = c.finish_reason;
    }
    v.textBlocks = sawContent ? 1 : 0;
    for (const t of tools.values()) v.toolCalls.push({ name: t.name, args: JSON.parse(t.args) });
  } else if (dialect === 'responses') {
    const done = events.find((e) => e.type === 'response.completed');
    return view('responses', 200, JSON.stringify(done.response), false, warnings);
  } else {
    for (const e of events) {
      for (const p of e.candidates?.[0]?.content?.parts ?? []) {
        if (typeof p.text === 'string' && !p.thought) (v.textBlocks++, (v.text += p.text));
        if (p.functionCall) v.toolCalls.push({ name: p.functionCall.name, args: p.functionCall.args });
      }
      if (e.candidates?.[0]?.finishReason) v.finish = e.candidates[0].finishReason;
    }
  }
  return v;
}

interface Proxy { url: string; store: Store; metrics: () => Promise<string>; stop(): Promise<void> }

async function proxyFor(engineUrl: string, kind: 'vllm' | 'sim', mode: CaptureMode, sessions: string[]): Promise<Proxy> {
  const engine = createEngineClient({ kind, url: engineUrl, mode, timeoutMs: 30_000, log: () => {} });
  await engine.probe();
  const store = openStore(':memory:');
  const app = createProxyApp({ engine, store, sessions: staticSessions(Object.fromEntries(sessions.map((k) => [k, { session_id: k, task_id: 't' }]))) });
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: app.fetch, idleTimeout: 0 });
  return { url: `http://127.0.0.1:${server.port}`, store, metrics: () => app.metrics.text(), stop: async () => void (await server.stop(true)) };
}

async function call(proxy: Proxy, dialect: Dialect, key: string, body: Record<string, unknown>, stream: boolean): Promise<ClientView> {
  const res = await fetch(proxy.url + PATH[dialect](stream), { method: 'POST', headers: { 'content-type': 'application/json', ...AUTH[dialect](key) }, body: JSON.stringify(body) });
  return view(dialect, res.status, await res.text(), stream, res.headers.get('x-polar-warnings') ?? '');
}

const cases = DIALECTS.flatMap((dialect) => [false, true].map((stream) => ({ dialect, stream, name: `${dialect} ${stream ? 'stream' : 'JSON'}` })));

describe('chat mode against a scripted engine', () => {
  let engine: FakeEngine;
  let proxy: Proxy;
  let next: FakeReply = { kind: 'text', text: 'ok' };
  let n = 0;
  const key = () => `k${n++}`;
  beforeAll(async () => {
    engine = await startFakeEngine({ shape: 'vllm', script: () => next });
    proxy = await proxyFor(engine.url, 'vllm', 'chat', Array.from({ length: 200 }, (_, i) => `k${i}`));
  });
  afterAll(async () => {
    await proxy.stop();
    await engine.stop();
  });

  for (const c of cases) {
    test(`1 stop string, ${c.name}: reported as the stop sequence, recorded with the matched string`, async () => {
      next = { kind: 'text', text: 'the answer is 42', stopString: '</answer>' };
      const k = key();
      const v = await call(proxy, c.dialect, k, requestBody(c.dialect, { stream: c.stream, stop: '</answer>' }), c.stream);
      expect(v.text).toBe('the answer is 42');
      expect(v.finish).toBe({ anthropic: 'stop_sequence', chat: 'stop', responses: 'completed', gemini: 'STOP' }[c.dialect]);
      if (c.dialect === 'anthropic') expect(v.stopSequence).toBe('</answer>');
      expect(proxy.store.completions.listBySession(k)[0]!.finish_reason).toMatchObject({ unified: 'stop', raw: 'stop', stopSequence: '</answer>' });
    });

    test(`2 image in a tool result, ${c.name}: the engine gets it as an image part`, async () => {
      next = { kind: 'text', text: 'a red square' };
      const before = engine.chatRequests().length;
      await call(proxy, c.dialect, key(), requestBody(c.dialect, { stream: c.stream, toolResult: [{ text: 'screenshot:' }, { image: 'iVBORw0KGgo=' }] }), c.stream);
      const sent = engine.chatRequests()[before]!.body.messages as Array<{ role: string; content: unknown }>;
      const toolMessage = sent.find((m) => m.role === 'tool')!;
      expect(JSON.stringify(toolMessage.content)).toContain('"image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}');
      expect(JSON.stringify(toolMessage.content)).not.toContain('[image]');
    });

    test(`4 empty tool arguments, ${c.name}: the client gets {}`, async () => {
      next = { kind: 'tool-calls', calls: [{ name: 'Bash', arguments: '' }] };
      const v = await call(proxy, c.dialect, key(), requestBody(c.dialect, { stream: c.stream }), c.stream);
      expect(v.toolCalls).toEqual([{ name: 'Bash', args: {} }]);
    });

    test(`5 lone surrogates, ${c.name}: well-formed before the engine, with a warning`, async () => {
      next = { kind: 'text', text: 'fine' };
      const before = engine.chatRequests().length;
      const v = await call(proxy, c.dialect, key(), requestBody(c.dialect, { stream: c.stream, user: 'cut \ud83d here', toolResult: [{ text: 'bytes \udc00 end' }] }), c.stream);
      expect(v.status).toBe(200);
      expect(v.warnings).toContain('lone-surrogate-replaced');
      const sent = JSON.stringify(engine.chatRequests()[before]!.body.messages);
      expect(sent).toContain('cut \ufffd here');
      expect(sent).toContain('bytes \ufffd end');
      expect(sent.isWellFormed()).toBe(true);
    });

    test(`6 whitespace-only text next to a tool call, ${c.name}: no text block`, async () => {
      next = { kind: 'tool-calls', text: '\n\n', calls: [{ name: 'Bash', arguments: { command: 'ls' } }] };
      const v = await call(proxy, c.dialect, key(), requestBody(c.dialect, { stream: c.stream }), c.stream);
      expect(v.toolCalls).toEqual([{ name: 'Bash', args: { command: 'ls' } }]);
      expect(v.textBlocks).toBe(0);
    });
  }
});

describe('true streams from the simulator', () => {
  let sim: SimServer;
  const proxies: Record<CaptureMode, Proxy | null> = { chat: null, token: null };
  let n = 0;
  const key = () => `s${n++}`;
  beforeAll(async () => {
    sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0, scripts: { t: { variants: { a: { weight: 1, steps: [{ say: 'alpha bravo STOP charlie delta' }] } } } } });
    for (const mode of ['chat', 'token'] as const) proxies[mode] = await proxyFor(sim.url, 'sim', mode, Array.from({ length: 100 }, (_, i) => `s${i}`));
  });
  afterAll(async () => {
    for (const proxy of Object.values(proxies)) await proxy?.stop();
    await sim.stop();
  });

  for (const mode of ['chat', 'token'] as const) {
    for (const c of cases.filter((x) => x.dialect !== 'responses')) {
      // The Responses API has no stop strings to send.
      test(`1 stop string, ${mode} mode, ${c.name}: cut at the string and reported as the stop sequence`, async () => {
        const k = key();
        const v = await call(proxies[mode]!, c.dialect, k, requestBody(c.dialect, { stream: c.stream, stop: 'STOP' }), c.stream);
        expect(v.text.trim()).toBe('alpha bravo');
        expect(v.finish).toBe({ anthropic: 'stop_sequence', chat: 'stop', responses: 'completed', gemini: 'STOP' }[c.dialect]);
        if (c.dialect === 'anthropic') expect(v.stopSequence).toBe('STOP');
        expect(proxies[mode]!.store.completions.listBySession(k)[0]!.finish_reason).toMatchObject({ unified: 'stop', stopSequence: 'STOP' });
      });
    }

    test(`3 Anthropic message_start carries the real input_tokens, ${mode} mode`, async () => {
      const k = key();
      const v = await call(proxies[mode]!, 'anthropic', k, requestBody('anthropic', { stream: true }), true);
      const record = proxies[mode]!.store.completions.listBySession(k)[0]!;
      expect(record.prompt_ids.length).toBeGreaterThan(20);
      expect(v.inputTokensAtStart).toBe(record.prompt_ids.length);
    });
  }
});

describe('7 an engine stream that ends early', () => {
  let sim: SimServer;
  let cutter: ReturnType<typeof Bun.serve>;
  const proxies: Record<CaptureMode, Proxy | null> = { chat: null, token: null };
  let n = 0;
  const key = () => `e${n++}`;
  beforeAll(async () => {
    sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0, scripts: { t: { variants: { a: { weight: 1, steps: [{ say: 'one two three four five six seven eight nine ten eleven twelve' }] } } } } });
    // In front of the simulator: a streamed answer passes its events up to the one with the finish reason (or usage,
    // or [DONE]), then the body ends cleanly, as an engine that dies between chunks behind a buffering proxy would.
    cutter = Bun.serve({
      port: 0, hostname: '127.0.0.1', idleTimeout: 0,
      async fetch(req) {
        const url = new URL(req.url);
        const body = req.method === 'POST' ? await req.text() : undefined;
        const upstream = await fetch(sim.url + url.pathname + url.search, { method: req.method, headers: req.headers, body });
        if (!(upstream.headers.get('content-type') ?? '').includes('text/event-stream')) return upstream;
        const events = (await upstream.text()).split('\n\n').filter((e) => e.trim() !== '');
        // The engine client's start-up probe (session polar-probe) gets the whole stream.
        if (!/^e\d+$/.test(req.headers.get('x-polar-session') ?? '')) return new Response(`${events.join('\n\n')}\n\n`, { headers: { 'content-type': 'text/event-stream' } });
        const end = events.findIndex((e) => /"finish_reason":\s*[^\sn]|"usage":\s*\{|\[DONE\]/.test(e));
        return new Response(`${events.slice(0, end).join('\n\n')}\n\n`, { headers: { 'content-type': 'text/event-stream' } });
      },
    });
    for (const mode of ['chat', 'token'] as const) proxies[mode] = await proxyFor(`http://127.0.0.1:${cutter.port}`, 'sim', mode, Array.from({ length: 100 }, (_, i) => `e${i}`));
  });
  afterAll(async () => {
    for (const proxy of Object.values(proxies)) await proxy?.stop();
    await cutter.stop(true);
    await sim.stop();
  });

  for (const mode of ['chat', 'token'] as const) {
    for (const dialect of DIALECTS) {
      test(`${mode} mode, ${dialect} stream: the client's stream ends in an error, and nothing is recorded as finished`, async () => {
        const k = key();
        const res = await fetch(proxies[mode]!.url + PATH[dialect](true), { method: 'POST', headers: { 'content-type': 'application/json', ...AUTH[dialect](k) }, body: JSON.stringify(requestBody(dialect, { stream: true })) });
        const text = await res.text();
        expect(text).toContain('no finish_reason');
        expect(text).not.toMatch(/"(stop_reason|finish_reason|finishReason)":\s*"(end_turn|stop|STOP|OTHER)"|response\.completed/);
        expect(proxies[mode]!.store.completions.listBySession(k)).toEqual([]);
        // Answered 200, so the request counter says 200: the stream error counter says what happened.
        const name = { anthropic: 'anthropic-messages', chat: 'openai-chat', responses: 'openai-responses', gemini: 'gemini' }[dialect];
        expect(await proxies[mode]!.metrics()).toContain(`polar_proxy_stream_errors_total{dialect="${name}",engine="sim",kind="upstream"} 1`);
      });
    }
  }
});

describe('8 token mode: cut off while thinking', () => {
  let sim: SimServer;
  let proxy: Proxy;
  beforeAll(async () => {
    sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0, scripts: { t: { variants: { a: { weight: 1, steps: [{ think: 'I should look at the files first and then decide', say: 'done' }] } } } } });
    proxy = await proxyFor(sim.url, 'sim', 'token', ['c0', 'c1']);
  });
  afterAll(async () => {
    await proxy.stop();
    await sim.stop();
  });

  for (const [dialect, key] of [['anthropic', 'c0'], ['chat', 'c1']] as const) {
    test(`${dialect} stream: the thinking text is sent once, as reasoning, and recorded as reasoning`, async () => {
      const body = { ...requestBody(dialect, { stream: true }), max_tokens: 6 };
      const res = await fetch(proxy.url + PATH[dialect](true), { method: 'POST', headers: { 'content-type': 'application/json', ...AUTH[dialect](key) }, body: JSON.stringify(body) });
      const events = (await res.text()).split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
      const record = proxy.store.completions.listBySession(key)[0]!;
      expect(record.finish_reason.unified).toBe('length');
      const reasoning = record.ir_response!.reasoning?.text ?? '';
      expect(reasoning.length).toBeGreaterThan(0);
      expect(record.ir_response!.content).toEqual([]);
      expect(record.warnings.join(' ')).not.toContain('stream-diverged');
      const streamed = dialect === 'anthropic'
        ? { thinking: events.map((e) => e.delta?.thinking ?? '').join(''), text: events.map((e) => e.delta?.text ?? '').join('') }
        : { thinking: events.map((e) => e.choices?.[0]?.delta?.reasoning_content ?? '').join(''), text: events.map((e) => e.choices?.[0]?.delta?.content ?? '').join('') };
      expect(streamed).toEqual({ thinking: reasoning, text: '' });
    });
  }
});
