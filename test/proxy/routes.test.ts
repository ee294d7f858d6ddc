/**
 * What the proxy's router answers by itself: unknown routes (404), known paths with the wrong method (405 + Allow),
 * bodies over the limit (413), each in the error shape of the dialect that owns the path prefix; Gemini's
 * `:streamGenerateContent` without `alt=sse` as one JSON array; an unknown Anthropic block type named in the 400.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startFakeEngine, type FakeEngine } from '../support/fake-engine.ts';
import { startTestProxy, type TestProxy } from '../support/proxy-harness.ts';

const MAX_BODY = 4096;
let engine: FakeEngine;
let proxy: TestProxy;

beforeAll(async () => {
  engine = await startFakeEngine({ shape: 'vllm', servedModel: 'qwen3-test', script: [{ kind: 'text', text: 'routed' }] });
  proxy = await startTestProxy({ engineUrl: engine.url, kind: 'vllm', options: { keepaliveIntervalMs: 50, maxBodyBytes: MAX_BODY } });
});
afterAll(async () => {
  await proxy.stop();
  await engine.stop();
});

type Shape = 'anthropic' | 'openai' | 'gemini';

/** Asserts the provider error shape and returns the message. */
function expectShape(shape: Shape, body: any, status: number): string {
  switch (shape) {
    case 'anthropic':
      expect(body.type).toBe('error');
      expect(typeof body.error.type).toBe('string');
      return body.error.message;
    case 'openai':
      expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
      expect(body.error.code).not.toBe('model_not_found');
      return body.error.message;
    case 'gemini':
      expect(body.error.code).toBe(status);
      expect(typeof body.error.status).toBe('string');
      return body.error.message;
  }
}

async function call(method: string, path: string, init: RequestInit = {}) {
  const response = await fetch(`${proxy.url}${path}`, { method, ...init });
  const text = await response.text();
  return { response, body: text === '' ? null : (JSON.parse(text) as any) };
}

const jsonHeaders = { 'content-type': 'application/json', 'x-api-key': 'routes-session' };

describe('unknown routes and wrong methods', () => {
  const notFound: Array<[string, string, Shape]> = [
    ['POST', '/v1/messages/nope', 'anthropic'],
    ['POST', '/v1beta/models/x:foo', 'gemini'],
    ['GET', '/v1beta/models/x:foo', 'gemini'],
    ['POST', '/v1/responses/abc/cancel', 'openai'],
    ['GET', '/v1/nope', 'openai'],
    ['POST', '/s/sess-1/v1/messages/nope', 'anthropic'],
    ['POST', '/s/sess-1/v1beta/models/x:foo', 'gemini'],
  ];
  for (const [method, path, shape] of notFound) {
    test(`${method} ${path} → 404 in the ${shape} shape`, async () => {
      const { response, body } = await call(method, path, { headers: jsonHeaders, ...(method === 'POST' ? { body: '{}' } : {}) });
      expect(response.status).toBe(404);
      expect(expectShape(shape, body, 404)).toContain(path);
      if (shape === 'anthropic') expect(body.error.type).toBe('not_found_error');
      if (shape === 'gemini') expect(body.error.status).toBe('NOT_FOUND');
      if (shape === 'openai') expect(body.error.code).toBeNull();
    });
  }

  const wrongMethod: Array<[string, string, Shape, string]> = [
    ['GET', '/v1/messages', 'anthropic', 'POST'],
    ['PUT', '/v1/messages/count_tokens', 'anthropic', 'POST'],
    ['GET', '/s/sess-1/v1/messages', 'anthropic', 'POST'],
    ['GET', '/v1/chat/completions', 'openai', 'POST'],
    ['DELETE', '/v1/responses', 'openai', 'POST'],
    ['GET', '/v1beta/models/x:generateContent', 'gemini', 'POST'],
    ['GET', '/v1beta/models/x:streamGenerateContent', 'gemini', 'POST'],
    ['POST', '/v1beta/models', 'gemini', 'GET, HEAD'],
    ['DELETE', '/v1/models', 'openai', 'GET, HEAD'],
    ['GET', '/admin/inference/pause', 'openai', 'POST'],
  ];
  for (const [method, path, shape, allowed] of wrongMethod) {
    test(`${method} ${path} → 405 with Allow: ${allowed} in the ${shape} shape`, async () => {
      const { response, body } = await call(method, path, { headers: jsonHeaders, ...(method === 'GET' || method === 'DELETE' ? {} : { body: '{}' }) });
      expect(response.status).toBe(405);
      expect(response.headers.get('allow')).toBe(allowed);
      expect(expectShape(shape, body, 405)).toContain(`method ${method} is not allowed`);
    });
  }

  test('the routes themselves still answer: model info, model lists, HEAD /', async () => {
    const one = await call('GET', '/v1beta/models/qwen3-test');
    expect(one.response.status).toBe(200);
    expect(one.body.name).toBe('models/qwen3-test');
    const list = await call('GET', '/v1beta/models');
    expect(list.body.models[0].name).toBe('models/qwen3-test');
    expect((await call('HEAD', '/v1/models')).response.status).toBe(200);
    expect((await call('HEAD', '/')).response.status).toBe(200);
  });
});

describe('body size limit', () => {
  const big = JSON.stringify({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x'.repeat(MAX_BODY) }] });
  const cases: Array<[string, Shape]> = [
    ['/v1/messages', 'anthropic'],
    ['/v1/chat/completions', 'openai'],
    ['/v1/responses', 'openai'],
    ['/v1beta/models/m:generateContent', 'gemini'],
    ['/s/sess-1/v1beta/models/m:streamGenerateContent?alt=sse', 'gemini'],
  ];
  for (const [path, shape] of cases) {
    test(`a body over maxBodyBytes on ${path} → 413 in the ${shape} shape, nothing sent to the engine`, async () => {
      const before = engine.chatRequests().length;
      const { response, body } = await call('POST', path, { headers: jsonHeaders, body: big });
      expect(response.status).toBe(413);
      expect(expectShape(shape, body, 413)).toContain(`limit of ${MAX_BODY} bytes`);
      if (shape === 'anthropic') expect(body.error.type).toBe('request_too_large');
      expect(engine.chatRequests().length).toBe(before);
    });
  }

  test('a chunked body without Content-Length is counted too', async () => {
    const bytes = new TextEncoder().encode(big);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < bytes.length; i += 1000) controller.enqueue(bytes.slice(i, i + 1000));
        controller.close();
      },
    });
    const { response, body } = await call('POST', '/v1/messages', { headers: jsonHeaders, body: stream });
    expect(response.status).toBe(413);
    expect(body.error.type).toBe('request_too_large');
  });

  test('a body under the limit passes, chunked or not', async () => {
    const small = JSON.stringify({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'hello' }] });
    const plain = await call('POST', '/v1/messages', { headers: jsonHeaders, body: small });
    expect(plain.response.status).toBe(200);
    expect(plain.body.content[0].text).toBe('routed');
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(small));
        controller.close();
      },
    });
    const chunked = await call('POST', '/v1/messages', { headers: jsonHeaders, body: stream });
    expect(chunked.response.status).toBe(200);
    expect(chunked.body.content[0].text).toBe('routed');
  });
});

describe('Gemini stream framing', () => {
  const body = JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hello' }] }] });
  const headers = { 'content-type': 'application/json', 'x-goog-api-key': 'gemini-framing' };

  test(':streamGenerateContent without alt=sse → one JSON array of chunks (application/json), recorded', async () => {
    const before = proxy.store.completions.listBySession('gemini-framing').length;
    const response = await fetch(`${proxy.url}/v1beta/models/qwen3-test:streamGenerateContent`, { method: 'POST', headers, body });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toStartWith('application/json');
    const chunks = (await response.json()) as any[];
    expect(Array.isArray(chunks)).toBe(true);
    expect(chunks.length).toBeGreaterThan(0);
    expect(chunks.map((c) => c.candidates[0].content.parts.map((p: any) => p.text).join('')).join('')).toBe('routed');
    expect(chunks.at(-1).candidates[0].finishReason).toBe('STOP');
    const records = proxy.store.completions.listBySession('gemini-framing');
    expect(records.length).toBe(before + 1);
    expect(records.at(-1)!.ir_request.stream).toBe(true);
    expect(chunks[0].responseId).toBe(records.at(-1)!.completion_id);
  });

  test(':streamGenerateContent?alt=sse stays SSE; :generateContent stays one object', async () => {
    const sse = await fetch(`${proxy.url}/v1beta/models/qwen3-test:streamGenerateContent?alt=sse`, { method: 'POST', headers, body });
    expect(sse.headers.get('content-type')).toStartWith('text/event-stream');
    expect(await sse.text()).toStartWith('data: {');
    const plain = await fetch(`${proxy.url}/v1beta/models/qwen3-test:generateContent`, { method: 'POST', headers, body });
    const json = (await plain.json()) as any;
    expect(Array.isArray(json)).toBe(false);
    expect(json.candidates[0].content.parts[0].text).toBe('routed');
  });

  test('an engine error without alt=sse is an HTTP status in the Gemini shape', async () => {
    engine.setScript([{ kind: 'error', status: 500, message: 'engine exploded' }]);
    try {
      const response = await fetch(`${proxy.url}/v1beta/models/qwen3-test:streamGenerateContent`, { method: 'POST', headers, body });
      expect(response.status).toBe(502);
      const error = (await response.json()) as any;
      expect(error.error.status).toBe('UNAVAILABLE');
    } finally {
      engine.setScript([{ kind: 'text', text: 'routed' }]);
    }
  });
});

test('an Anthropic block of unknown type is a 400 naming the block, and never reaches the engine', async () => {
  const before = engine.chatRequests().length;
  const body = JSON.stringify({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'weird' }] }] });
  const { response, body: error } = await call('POST', '/v1/messages', { headers: jsonHeaders, body });
  expect(response.status).toBe(400);
  expect(error.error.type).toBe('invalid_request_error');
  expect(error.error.message).toBe('messages[0].content[0].type: unknown block type "weird"');
  const onlyDropped = JSON.stringify({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'document', source: {} }] }] });
  const dropped = await call('POST', '/v1/messages', { headers: jsonHeaders, body: onlyDropped });
  expect(dropped.response.status).toBe(400);
  expect(dropped.body.error.message).toContain('messages: nothing left to send after dropping unsupported content');
  expect(dropped.body.error.message).toContain('messages[0].content[0] of type document');
  expect(engine.chatRequests().length).toBe(before);
});
