/**
 * The proxy through the official SDKs (@anthropic-ai/sdk, openai), streaming and not, against the fake engine in vLLM
 * and SGLang shape: text, one tool call, parallel tool calls, reasoning, truncation, and every error.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { describe, expect, test } from 'bun:test';
import { staticSessions } from '../../src/proxy/sessions.ts';
import { fakeIds, fakeLogprob, startEngineProxy, startFakeEngine, type FakeEngine, type FakeReply } from '../support/fake-engine.ts';
import { expectedResponseIds, sessionRecords, startTestProxy, useProxyPerShape, type TestProxy } from '../support/proxy-harness.ts';

const UNICODE = 'Voilà: héllo ✓ 日本語 🎉';

/** Scenario chosen by a marker in the last user message, so one fake engine serves the whole matrix. */
const scenarios: Record<string, FakeReply> = {
  text: { kind: 'text', text: UNICODE },
  tool: { kind: 'tool-calls', calls: [{ name: 'Bash', arguments: { command: 'ls' } }] },
  parallel: { kind: 'tool-calls', calls: [{ name: 'Bash', arguments: { command: 'ls' } }, { name: 'Bash', arguments: { command: 'cat README.txt' } }] },
  reasoning: { kind: 'text', text: 'The answer is 4.', reasoning: 'Two plus two is four.' },
  length: { kind: 'length', text: 'This reply was cut off by the tok' },
  fail500: { kind: 'error', status: 500, message: 'engine exploded' },
  hang: { kind: 'hang' },
  overflow: { kind: 'context-overflow' },
};

function scenarioOf(body: Record<string, unknown>): FakeReply {
  const text = JSON.stringify((body.messages as unknown[]).at(-1));
  const match = /scenario:(\w+)/.exec(text);
  return scenarios[match?.[1] ?? 'text'] ?? scenarios.text!;
}

const bashTool = { name: 'Bash', description: 'Run a shell command', input_schema: { type: 'object' as const, properties: { command: { type: 'string' } }, required: ['command'] } };
const bashFn = { type: 'function' as const, function: { name: 'Bash', description: 'Run a shell command', parameters: bashTool.input_schema } };

const { engines, proxies } = useProxyPerShape({ script: scenarioOf, timeoutMs: 400 });

function anthropic(proxy: TestProxy, key: string, fetchImpl?: typeof fetch) {
  return new Anthropic({ baseURL: proxy.url, apiKey: key, maxRetries: 0, ...(fetchImpl ? { fetch: fetchImpl } : {}) });
}
function openai(proxy: TestProxy, key: string, fetchImpl?: typeof fetch) {
  return new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: key, maxRetries: 0, ...(fetchImpl ? { fetch: fetchImpl } : {}) });
}

const okScenarios = ['text', 'tool', 'parallel', 'reasoning', 'length'] as const;

describe.each(['vllm', 'sglang'] as const)('engine shape %s', (shape) => {
  for (const stream of [false, true]) {
    test(`anthropic SDK, ${stream ? 'streaming' : 'non-streaming'}: every scenario answers correctly and is recorded`, async () => {
      const proxy = proxies[shape];
      const session = `anth-${shape}-${stream}`;
      const client = anthropic(proxy, session);
      for (const name of okScenarios) {
        const params = {
          model: 'polar-test-model',
          max_tokens: 256,
          tools: [bashTool],
          messages: [{ role: 'user' as const, content: `scenario:${name}` }],
          ...(name === 'reasoning' ? { thinking: { type: 'enabled' as const, budget_tokens: 32000 } } : {}),
        };
        const message = stream ? await client.messages.stream(params).finalMessage() : await client.messages.create(params);
        expect(message.model).toBe('polar-test-model');
        const kinds = message.content.map((block) => block.type);
        switch (name) {
          case 'text':
            expect(message.content).toEqual([expect.objectContaining({ type: 'text', text: UNICODE })]);
            expect(message.stop_reason).toBe('end_turn');
            break;
          case 'tool':
          case 'parallel': {
            const uses = message.content.filter((block) => block.type === 'tool_use');
            expect(uses.map((u) => (u as { input: unknown }).input)).toEqual(name === 'tool' ? [{ command: 'ls' }] : [{ command: 'ls' }, { command: 'cat README.txt' }]);
            expect(new Set(uses.map((u) => (u as { id: string }).id)).size).toBe(uses.length);
            expect(message.stop_reason).toBe('tool_use');
            break;
          }
          case 'reasoning':
            expect(kinds).toEqual(['thinking', 'text']);
            expect((message.content[0] as { thinking: string }).thinking).toBe('Two plus two is four.');
            expect((message.content[0] as { signature: string }).signature.length).toBeGreaterThan(0);
            break;
          case 'length':
            expect(message.stop_reason).toBe('max_tokens');
            break;
        }
      }
      const recs = await sessionRecords(proxy, session);
      expect(recs.map((r) => r.seq)).toEqual([0, 1, 2, 3, 4]);
      for (const [i, rec] of recs.entries()) {
        expect(rec.dialect).toBe('anthropic-messages');
        expect(rec.capture_error).toBeNull();
        expect(rec.response_ids).toEqual(expectedResponseIds(scenarios[okScenarios[i]!]!));
        expect(rec.logprobs).toEqual(rec.response_ids.map((_, k) => fakeLogprob(k)));
        expect(rec.prompt_ids.length).toBeGreaterThan(0);
        expect(rec.engine_id).toBe(`${shape}@${engines[shape].url}`);
      }
      expect(recs[4]!.finish_reason.unified).toBe('length');
    });

    test(`openai SDK, ${stream ? 'streaming' : 'non-streaming'}: every scenario answers correctly and is recorded`, async () => {
      const proxy = proxies[shape];
      const session = `oai-${shape}-${stream}`;
      const client = openai(proxy, session);
      for (const name of okScenarios) {
        const params = { model: 'gpt-x', max_completion_tokens: 256, tools: [bashFn], messages: [{ role: 'developer' as const, content: 'be brief' }, { role: 'user' as const, content: `scenario:${name}` }] };
        const completion = stream
          ? await client.chat.completions.stream({ ...params, stream_options: { include_usage: true } }).finalChatCompletion()
          : await client.chat.completions.create(params);
        expect(completion.model).toBe('gpt-x');
        const choice = completion.choices[0]!;
        switch (name) {
          case 'text':
            expect(choice.message.content).toBe(UNICODE);
            expect(choice.finish_reason).toBe('stop');
            break;
          case 'tool':
          case 'parallel':
            expect(choice.message.tool_calls?.map((c) => JSON.parse((c as { function: { arguments: string } }).function.arguments))).toEqual(
              name === 'tool' ? [{ command: 'ls' }] : [{ command: 'ls' }, { command: 'cat README.txt' }],
            );
            expect(choice.finish_reason).toBe('tool_calls');
            break;
          case 'reasoning':
            expect(choice.message.content).toBe('The answer is 4.');
            expect((choice.message as unknown as { reasoning_content?: string }).reasoning_content).toBe('Two plus two is four.');
            break;
          case 'length':
            expect(choice.finish_reason).toBe('length');
            break;
        }
      }
      const recs = await sessionRecords(proxy, session);
      expect(recs.map((r) => r.seq)).toEqual([0, 1, 2, 3, 4]);
      for (const [i, rec] of recs.entries()) {
        expect(rec.dialect).toBe('openai-chat');
        expect(rec.response_ids).toEqual(expectedResponseIds(scenarios[okScenarios[i]!]!));
        expect(rec.capture_error).toBeNull();
      }
      // developer + system were merged into one leading system message for the engine
      const sent = engines[shape].chatRequests().at(-1)!.body.messages as Array<{ role: string; content: unknown }>;
      expect(sent[0]).toEqual({ role: 'system', content: 'be brief' });
      expect(sent.filter((m) => m.role === 'system').length).toBe(1);
    });
  }

  test('errors before the first byte: engine 5xx → 502, timeout → 504, overflow → 400 in the provider shape; nothing is recorded', async () => {
    const proxy = proxies[shape];
    const session = `err-${shape}`;
    const before = proxy.counters.engineErrors;
    const a = anthropic(proxy, session);
    const o = openai(proxy, session);
    const cases: Array<[string, number]> = [['fail500', 502], ['hang', 504], ['overflow', 400]];
    for (const [name, status] of cases) {
      const ea = await a.messages.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: `scenario:${name}` }] }).catch((e: unknown) => e);
      expect(ea).toBeInstanceOf(Anthropic.APIError);
      expect((ea as InstanceType<typeof Anthropic.APIError>).status).toBe(status);
      const eo = await o.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: `scenario:${name}` }] }).catch((e: unknown) => e);
      expect(eo).toBeInstanceOf(OpenAI.APIError);
      expect((eo as InstanceType<typeof OpenAI.APIError>).status).toBe(status);
      if (name === 'overflow') {
        expect((ea as InstanceType<typeof Anthropic.APIError>).message).toContain('prompt is too long');
        expect((eo as InstanceType<typeof OpenAI.APIError>).code).toBe('context_length_exceeded');
      }
      if (name === 'fail500') expect((ea as Error).message).toContain('engine exploded');
    }
    expect(proxy.counters.engineErrors - before).toBe(6);
    expect(await sessionRecords(proxy, session)).toEqual([]);
  });

  test('a stream whose engine fails at once gets a real status; one that fails after the first byte, the dialect in-band error event', async () => {
    const proxy = proxies[shape];
    const raw = await fetch(`${proxy.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'inband', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'm', max_tokens: 10, stream: true, messages: [{ role: 'user', content: 'scenario:fail500' }] }),
    });
    expect(raw.status).toBe(502);
    expect(await raw.json()).toMatchObject({ type: 'error', error: { message: expect.stringContaining('engine exploded') } });
    const sdkError = await anthropic(proxy, 'inband')
      .messages.stream({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'scenario:fail500' }] })
      .finalMessage()
      .catch((e: unknown) => e);
    expect(sdkError).toBeInstanceOf(Anthropic.APIError);
    expect((sdkError as InstanceType<typeof Anthropic.APIError>).status).toBe(502);
    // The engine hangs past the keep-alive interval (50 ms) until the timeout (400 ms): pings went out, then the error.
    const hung = await fetch(`${proxy.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'inband', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'm', max_tokens: 10, stream: true, messages: [{ role: 'user', content: 'scenario:hang' }] }),
    });
    expect(hung.status).toBe(200);
    const text = await hung.text();
    expect(text.startsWith('event: message_start')).toBe(true);
    expect(text).toContain('event: ping');
    expect(text).toContain('event: error');
    const chat = await fetch(`${proxy.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer inband' },
      body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'scenario:hang' }] }),
    });
    expect(chat.status).toBe(200);
    const chatText = await chat.text();
    expect(chatText).toContain('"error"');
    expect(chatText).toContain(': keep-alive'); // keep-alives flowed while the engine hung (interval 50 ms, timeout 400 ms)
  });
});

describe('client errors and sessions', () => {
  test('malformed JSON → 400 in the caller shape; the process keeps serving', async () => {
    const proxy = proxies.vllm;
    const bad = await fetch(`${proxy.url}/v1/messages?beta=true`, { method: 'POST', headers: { 'x-api-key': 'k', 'content-type': 'application/json' }, body: '{"model": ' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    const badChat = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer k' }, body: '[1,' });
    expect(badChat.status).toBe(400);
    expect(await badChat.json()).toMatchObject({ error: { type: 'invalid_request_error' } });
    const invalid = await fetch(`${proxy.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': 'k' }, body: JSON.stringify({ model: 'm', messages: 'nope' }) });
    expect(invalid.status).toBe(400);
    const ok = await anthropic(proxy, 'after-bad').messages.create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'scenario:text' }] });
    expect(ok.content.length).toBe(1);
  });

  test('request bytes: non-ASCII, a byte-order mark and invalid UTF-8 are all answered and recorded as decoded', async () => {
    const proxy = proxies.vllm;
    const session = 'utf8-bodies';
    const body = (content: string) => JSON.stringify({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: `scenario:text ${content}` }] });
    const utf8 = new TextEncoder();
    const valid = utf8.encode(body(UNICODE));
    const withBom = new Uint8Array([0xef, 0xbb, 0xbf, ...utf8.encode(body('bom'))]);
    // 0xff never occurs in UTF-8: it is decoded as U+FFFD, as Request.text() does.
    const invalid = new Uint8Array([...utf8.encode(body('bad ')).slice(0, -4), 0xff, ...utf8.encode('"}]}')]);
    const bomInvalid = new Uint8Array([0xef, 0xbb, 0xbf, ...invalid]);
    const headers: string[] = [];
    for (const bytes of [valid, withBom, invalid, bomInvalid]) {
      const response = await fetch(`${proxy.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': session, 'content-type': 'application/json' }, body: bytes });
      expect(response.status).toBe(200);
      headers.push(response.headers.get('x-polar-warnings') ?? '');
      await response.arrayBuffer();
    }
    const records = await sessionRecords(proxy, session);
    const texts = records.map((r) => ((r.request_body as { messages: { content: string }[] }).messages[0]!.content));
    expect(texts).toEqual([`scenario:text ${UNICODE}`, 'scenario:text bom', 'scenario:text bad \uFFFD', 'scenario:text bad \uFFFD']);
    // The replaced bytes are said, in the reply and on the record (a U+FFFD that was sent as such is not flagged).
    expect(headers.map((h) => h.includes('invalid-utf8-replaced'))).toEqual([false, false, true, true]);
    expect(records.map((r) => r.warnings.some((w) => w.startsWith('invalid-utf8-replaced')))).toEqual([false, false, true, true]);
  });

  test('gateway mode: an unknown session is 401 in the caller dialect; attribution order is path, header, key', async () => {
    const proxy = await startTestProxy({
      engineUrl: engines.vllm.url,
      kind: 'vllm',
      sessions: staticSessions({ 'sess-path': { session_id: 'sess-path' }, 'sess-header': { session_id: 'sess-header', task_id: 't1' }, 'sess-key': { session_id: 'sess-key' } }),
    });
    try {
      const unknown = await anthropic(proxy, 'stranger').messages.create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
      expect((unknown as InstanceType<typeof Anthropic.APIError>).status).toBe(401);
      expect((unknown as { error: unknown }).error).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
      const oaiUnknown = await openai(proxy, 'stranger').chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
      expect((oaiUnknown as InstanceType<typeof OpenAI.APIError>).status).toBe(401);
      const body = JSON.stringify({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] });
      const post = (path: string, headers: Record<string, string>) => fetch(`${proxy.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
      expect((await post('/s/sess-path/v1/messages', { 'x-polar-session': 'sess-header', 'x-api-key': 'sess-key' })).status).toBe(200);
      expect((await post('/v1/messages', { 'x-polar-session': 'sess-header', 'x-api-key': 'sess-key' })).status).toBe(200);
      expect((await post('/v1/messages?key=sess-key', {})).status).toBe(200);
      expect((await sessionRecords(proxy, 'sess-path')).length).toBe(1);
      expect((await sessionRecords(proxy, 'sess-header')).length).toBe(1);
      expect((await sessionRecords(proxy, 'sess-key')).length).toBe(1);
      expect(engines.vllm.chatRequests().at(-2)!.headers['x-polar-task']).toBe('t1');
    } finally {
      await proxy.stop();
    }
  });

  test('GET /v1/models in both list shapes, HEAD /, count_tokens with a real engine count', async () => {
    const proxy = proxies.vllm;
    const openaiList = await (await fetch(`${proxy.url}/v1/models`)).json();
    expect(openaiList).toEqual({ object: 'list', data: [{ id: 'qwen3-test', object: 'model', created: 0, owned_by: 'polar' }] });
    const anthropicList = (await (await fetch(`${proxy.url}/v1/models`, { headers: { 'anthropic-version': '2023-06-01' } })).json()) as { data: Array<{ type: string; id: string }> };
    expect(anthropicList.data[0]).toMatchObject({ type: 'model', id: 'qwen3-test' });
    expect((await fetch(`${proxy.url}/`, { method: 'HEAD' })).status).toBe(200);
    const counted = await anthropic(proxy, 'count').messages.countTokens({ model: 'm', messages: [{ role: 'user', content: 'count me' }] });
    const tokenize = engines.vllm.requests.filter((r) => r.path === '/tokenize').at(-1)!;
    expect(counted.input_tokens).toBe(fakeIds(JSON.stringify({ messages: tokenize.body.messages, tools: [] })).length);
  });
});

/** A pass-through in front of a fake engine that holds chat completions until `release()` (probe calls pass). */
async function startGatedEngine(engine: FakeEngine) {
  let release: () => void = () => undefined;
  let gate = new Promise<void>((resolve) => (release = resolve));
  const server = startEngineProxy(engine.url, async (pathname, body) => {
    if (pathname === '/v1/chat/completions' && !body!.includes('"max_tokens":1,')) await gate;
  });
  return {
    url: server.url,
    release: () => release(),
    rearm: () => (gate = new Promise<void>((resolve) => (release = resolve))),
    stop: () => server.stop(),
  };
}

describe('admin: pause, resume, policy version', () => {
  test('pause drains in-flight calls and holds new ones; records carry the version in force and straddlers are flagged', async () => {
    const engine = await startFakeEngine({ shape: 'vllm', script: [{ kind: 'text', text: 'ok' }] });
    const gated = await startGatedEngine(engine);
    const proxy = await startTestProxy({ engineUrl: gated.url, kind: 'vllm' });
    try {
      const admin = async (path: string, body?: unknown) =>
        (await fetch(`${proxy.url}/admin/${path}`, { method: 'POST', body: body === undefined ? undefined : JSON.stringify(body) })).json();
      expect(await admin('policy_version', { policy_version: 'v1' })).toMatchObject({ policy_version: 'v1' });
      const client = anthropic(proxy, 'pv');
      const ask = (text: string) => client.messages.create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: text }] });
      const inFlight = ask('first');
      await Bun.sleep(50);
      let pauseDone = false;
      const paused = admin('inference/pause').then((r) => ((pauseDone = true), r));
      const held = ask('second');
      await Bun.sleep(50);
      expect(pauseDone).toBe(false); // still draining the first call
      expect(engine.chatRequests().length).toBe(0);
      gated.release();
      expect(await paused).toMatchObject({ paused: true, drained_in_flight: 1 });
      await inFlight;
      await Bun.sleep(50);
      expect(engine.chatRequests().length).toBe(1); // the second call is held while paused
      await admin('policy_version', { policy_version: 'v2' });
      await admin('inference/resume');
      await held;
      const recs = await sessionRecords(proxy, 'pv');
      expect(recs.map((r) => r.policy_version)).toEqual(['v1', 'v2']);
      expect(recs[0]!.warnings.some((w) => w.startsWith('straddled-policy-change'))).toBe(true);
      expect(recs[1]!.warnings.some((w) => w.startsWith('straddled-policy-change'))).toBe(false);
      expect(proxy.counters.straddled).toBe(1);
      const bad = await fetch(`${proxy.url}/admin/policy_version`, { method: 'POST', body: '{}' });
      expect(bad.status).toBe(400);
    } finally {
      await proxy.stop();
      await gated.stop();
      await engine.stop();
    }
  });

  test('a completion in flight across a version change is flagged in x-polar-warnings', async () => {
    const engine = await startFakeEngine({ shape: 'vllm', script: [{ kind: 'text', text: 'slow' }] });
    const gated = await startGatedEngine(engine);
    const proxy = await startTestProxy({ engineUrl: gated.url, kind: 'vllm', options: { initialPolicyVersion: 'v1' } });
    try {
      const pending = anthropic(proxy, 'straddle').messages.create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).withResponse();
      await Bun.sleep(50);
      await fetch(`${proxy.url}/admin/policy_version`, { method: 'POST', body: JSON.stringify({ policy_version: 7 }) });
      gated.release();
      const { response } = await pending;
      expect(response.headers.get('x-polar-warnings')).toContain('straddled-policy-change');
      const [rec] = await sessionRecords(proxy, 'straddle');
      expect(rec!.policy_version).toBe('v1');
      expect(proxy.app.gate.policyVersion).toBe('7');
    } finally {
      await proxy.stop();
      await gated.stop();
      await engine.stop();
    }
  });
});

describe('capture errors are records', () => {
  test('a length mismatch is stored on the record and counted; the client still gets its reply', async () => {
    const engine = await startFakeEngine({ shape: 'sglang', dropLastLogprob: true, script: [{ kind: 'text', text: 'hello' }] });
    const proxy = await startTestProxy({ engineUrl: engine.url, kind: 'sglang' });
    try {
      const message = await anthropic(proxy, 'mismatch').messages.create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] });
      expect(message.content[0]).toMatchObject({ type: 'text', text: 'hello' });
      const [rec] = await sessionRecords(proxy, 'mismatch');
      expect(rec!.capture_error).toContain('logprobs for');
      expect(proxy.counters.captureErrors).toBe(1);
    } finally {
      await proxy.stop();
      await engine.stop();
    }
  });
});
