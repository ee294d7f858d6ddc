/**
 * Token mode through the proxy against the real simulator, for each of the four client dialects: a three-turn tool
 * loop with reasoning, echoed the way each wire protocol echoes history. Every prompt must extend the previous prompt
 * + sampled ids byte for byte, the simulator's policy must re-score every record, and prefix_merging must build one
 * chain per session.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { fixedClock } from '../../src/core/clock.ts';
import { sequentialIds } from '../../src/core/ids.ts';
import type { CompletionRecord } from '../../src/core/records.ts';
import { createEngineClient, TokenModeEngine } from '../../src/engines/index.ts';
import { createProxyApp, type ProxyApp } from '../../src/proxy/app.ts';
import { adHocSessions } from '../../src/proxy/sessions.ts';
import { rescoreCompletion } from '../../src/sim/policy.ts';
import { SimServer } from '../../src/sim/server.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { buildTrajectory } from '../../src/trace/index.ts';
import { openaiChat } from '../../src/dialects/openai-chat/index.ts';
import { codecContext } from '../support/dialects.ts';

const TASK = 'task-token';
const script = {
  variants: {
    solve: {
      weight: 1,
      steps: [
        { think: 'I should look at the files first.', shell: 'ls -la' },
        { think: 'Now read the main file.', shell: 'cat main.py' },
        { say: 'The project has one file, main.py.' },
      ],
    },
  },
};
const schema = { type: 'object', properties: { command: { type: 'string', description: 'the command' } }, required: ['command'] };

let sim: SimServer;
let store: Store;
let app: ProxyApp;
let engine: TokenModeEngine;
let server: ReturnType<typeof Bun.serve>;
let base: string;
const logs: string[] = [];
/** Records as `onRecord` saw them, and whether their prompt ids were still the Int32Array (no JS array built yet). */
const hooked = new Map<string, { record: CompletionRecord; lazy: boolean }>();

beforeAll(async () => {
  sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0, scripts: { [TASK]: script } });
  store = openStore(':memory:');
  engine = createEngineClient({ kind: 'sim', url: sim.url, mode: 'token', timeoutMs: 10_000, now: fixedClock(), newId: sequentialIds(), goldenRate: 1, log: (m) => logs.push(m) }) as TokenModeEngine;
  await engine.probe();
  app = createProxyApp({
    engine, store, sessions: adHocSessions({ taskId: TASK }), clock: fixedClock(), newId: sequentialIds(),
    onRecord: (record) => hooked.set(record.completion_id, { record, lazy: Object.getOwnPropertyDescriptor(record, 'prompt_ids')!.get !== undefined }),
  });
  server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: app.fetch, idleTimeout: 0 });
  base = `http://127.0.0.1:${server.port}`;
});
afterAll(async () => {
  await server.stop(true);
  store.close();
  await sim.stop();
});

async function post(path: string, key: string, body: unknown): Promise<Record<string, any>> {
  const response = await fetch(base + path, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'x-api-key': key, 'x-goog-api-key': key }, body: JSON.stringify(body) });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`HTTP ${response.status}: ${text}`);
  return JSON.parse(text) as Record<string, any>;
}

/** Every prompt extends the previous prompt + sampled ids; one chain; logprobs are the policy's. */
function expectOneChain(sessionId: string, turns: number): CompletionRecord[] {
  const records = store.completions.listBySession(sessionId);
  expect(records.length).toBe(turns);
  for (const [i, rec] of records.entries()) {
    expect(rec.mode).toBe('token');
    expect(rec.engine_id).toBe(`sim@${sim.url}`);
    expect(rec.capture_error).toBeNull();
    expect(rec.logprobs).toEqual(rescoreCompletion(rec.prompt_ids, rec.response_ids));
    if (i > 0) {
      const previous = records[i - 1]!;
      const head = [...previous.prompt_ids, ...previous.response_ids];
      expect(rec.prompt_ids.slice(0, head.length)).toEqual(head);
      expect(rec.prompt_ids.length).toBeGreaterThan(head.length);
    }
  }
  const trajectory = buildTrajectory(records, { strategy: 'prefix_merging', session_id: sessionId, task_id: TASK, harness: 'test', status: 'COMPLETED', eotIds: sim.tokenizer.eosTokenIds });
  expect(trajectory.metadata.reconstruction_stats.chains).toBe(1);
  expect(trajectory.traces.length).toBe(1);
  const trace = trajectory.traces[0]!;
  // The merged response is every sampled id (mask 1) plus interstitials (mask 0): the sampled ones are all there.
  expect(trace.loss_mask.filter((m) => m === 1).length).toBe(records.reduce((n, r) => n + r.response_ids.length, 0));
  return records;
}

describe('token mode × dialects against the simulator', () => {
  test('openai-chat: tool loop with reasoning, arguments re-serialised by the client', async () => {
    const key = 'tok-chat';
    const tools = [{ type: 'function', function: { name: 'bash', description: 'Run a shell command', parameters: schema } }];
    const messages: unknown[] = [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'What is in this project?' }];
    for (let turn = 0; turn < 2; turn++) {
      const answer = await post('/v1/chat/completions', key, { model: 'm', messages, tools });
      const message = answer.choices[0].message;
      expect(answer.choices[0].finish_reason).toBe('tool_calls');
      expect(message.tool_calls.length).toBe(1);
      const args = JSON.parse(message.tool_calls[0].function.arguments);
      expect(args.command).toBe(turn === 0 ? 'ls -la' : 'cat main.py');
      // Drop reasoning and re-serialise the arguments with other spacing, as many harnesses do.
      messages.push({ role: 'assistant', content: null, tool_calls: [{ ...message.tool_calls[0], function: { name: 'bash', arguments: JSON.stringify(args, null, 2) } }] });
      messages.push({ role: 'tool', tool_call_id: message.tool_calls[0].id, content: turn === 0 ? 'main.py' : 'print("hi")' });
    }
    const last = await post('/v1/chat/completions', key, { model: 'm', messages, tools });
    expect(last.choices[0].message.content).toContain('The project has one file');
    const records = expectOneChain(key, 3);
    // The turns' prompts reached the engine, the store and onRecord without their JS array being built; read, the
    // record's ids are the stored ones.
    expect(records.map((r) => hooked.get(r.completion_id)?.lazy)).toEqual([true, true, true]);
    expect(records.map((r) => hooked.get(r.completion_id)!.record.prompt_ids)).toEqual(records.map((r) => r.prompt_ids));
  });

  test('anthropic-messages: thinking blocks echoed, tool_use / tool_result', async () => {
    const key = 'tok-anthropic';
    const tools = [{ name: 'bash', description: 'Run a shell command', input_schema: schema }];
    const messages: any[] = [{ role: 'user', content: 'What is in this project?' }];
    for (let turn = 0; turn < 2; turn++) {
      const answer = await post('/v1/messages', key, { model: 'm', max_tokens: 1024, system: 'You are a coding agent.', tools, messages });
      expect(answer.stop_reason).toBe('tool_use');
      const thinking = answer.content.find((b: any) => b.type === 'thinking');
      expect(thinking?.thinking).toContain(turn === 0 ? 'look at the files' : 'read the main file');
      const use = answer.content.find((b: any) => b.type === 'tool_use');
      messages.push({ role: 'assistant', content: answer.content });
      messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: turn === 0 ? 'main.py' : 'print("hi")' }] });
    }
    const last = await post('/v1/messages', key, { model: 'm', max_tokens: 1024, system: 'You are a coding agent.', tools, messages });
    expect(last.stop_reason).toBe('end_turn');
    expectOneChain(key, 3);
  });

  test('openai-responses: reasoning and function_call items echoed as input', async () => {
    const key = 'tok-responses';
    const tools = [{ type: 'function', name: 'bash', description: 'Run a shell command', parameters: schema }];
    const input: any[] = [{ role: 'user', content: 'What is in this project?' }];
    for (let turn = 0; turn < 2; turn++) {
      const answer = await post('/v1/responses', key, { model: 'm', instructions: 'You are a coding agent.', input, tools });
      const call = answer.output.find((item: any) => item.type === 'function_call');
      expect(JSON.parse(call.arguments).command).toBe(turn === 0 ? 'ls -la' : 'cat main.py');
      input.push(...answer.output);
      input.push({ type: 'function_call_output', call_id: call.call_id, output: turn === 0 ? 'main.py' : 'print("hi")' });
    }
    const last = await post('/v1/responses', key, { model: 'm', instructions: 'You are a coding agent.', input, tools });
    expect(JSON.stringify(last.output)).toContain('The project has one file');
    expectOneChain(key, 3);
  });

  test('gemini: functionCall / functionResponse parts (no call ids on the wire)', async () => {
    const key = 'tok-gemini';
    const tools = [{ functionDeclarations: [{ name: 'bash', description: 'Run a shell command', parameters: schema }] }];
    const contents: any[] = [{ role: 'user', parts: [{ text: 'What is in this project?' }] }];
    for (let turn = 0; turn < 2; turn++) {
      const answer = await post('/v1beta/models/m:generateContent', key, { systemInstruction: { parts: [{ text: 'You are a coding agent.' }] }, contents, tools });
      const content = answer.candidates[0].content;
      const call = content.parts.find((p: any) => p.functionCall)?.functionCall;
      expect(call.args.command).toBe(turn === 0 ? 'ls -la' : 'cat main.py');
      contents.push(content);
      contents.push({ role: 'user', parts: [{ functionResponse: { name: 'bash', response: { output: turn === 0 ? 'main.py' : 'print("hi")' } } }] });
    }
    const last = await post('/v1beta/models/m:generateContent', key, { systemInstruction: { parts: [{ text: 'You are a coding agent.' }] }, contents, tools });
    expect(JSON.stringify(last.candidates[0].content)).toContain('The project has one file');
    expectOneChain(key, 3);
  });

  test('edited history starts a new buffer (a new chain), counted and warned', async () => {
    const key = 'tok-edit';
    const tools = [{ type: 'function', function: { name: 'bash', parameters: schema } }];
    const messages: any[] = [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'What is in this project?' }];
    const first = await post('/v1/chat/completions', key, { model: 'm', messages, tools });
    const call = first.choices[0].message.tool_calls[0];
    const before = engine.stats().token_buffer!.fullByReason['history-changed'];
    // Compaction: the harness replaces the first user message with a summary.
    const edited = [messages[0], { role: 'user', content: 'Summary: the user asked about the project.' }, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: 'main.py' }];
    const response = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: edited, tools }) });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-polar-warnings')).toContain('token-buffer-reset');
    expect(engine.stats().token_buffer!.fullByReason['history-changed']).toBe(before + 1);
    const records = store.completions.listBySession(key);
    const trajectory = buildTrajectory(records, { strategy: 'prefix_merging', session_id: key, task_id: TASK, harness: 'test', status: 'COMPLETED' });
    expect(trajectory.metadata.reconstruction_stats.chains).toBe(2);
  });

  test('a tool_choice other than auto is not enforced in token mode, and says so; auto and none without tools do not warn', async () => {
    const tools = [{ type: 'function', function: { name: 'bash', description: 'Run a shell command', parameters: schema } }];
    const warningsOf = async (key: string, extra: Record<string, unknown>) => {
      const response = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'What is in this project?' }], ...extra }) });
      expect(response.status).toBe(200);
      await response.text();
      return response.headers.get('x-polar-warnings') ?? '';
    };
    for (const [i, choice] of (['none', 'required', { type: 'function', function: { name: 'bash' } }] as const).entries()) {
      expect(await warningsOf(`tok-choice-${i}`, { tools, tool_choice: choice })).toContain('tool-choice-not-enforced');
    }
    expect(await warningsOf('tok-choice-auto', { tools, tool_choice: 'auto' })).not.toContain('tool-choice-not-enforced');
    expect(await warningsOf('tok-choice-none-no-tools', { tool_choice: 'none' })).not.toContain('tool-choice-not-enforced');
  });

  test('an image in the conversation is left out of the prompt with a warning on every call that carries it, and only then', async () => {
    const warningsOf = async (key: string, messages: unknown[]) => {
      const response = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages }) });
      expect(response.status).toBe(200);
      const body = (await response.json()) as { choices: { message: Record<string, unknown> }[] };
      return { warnings: response.headers.get('x-polar-warnings') ?? '', answer: body.choices[0]!.message };
    };
    const image = { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } };
    const plain: unknown[] = [{ role: 'user', content: 'What is in this project?' }];
    const first = await warningsOf('tok-text', plain);
    expect(first.warnings).not.toContain('token-mode-image-dropped');
    const second = await warningsOf('tok-text', [...plain, { role: 'assistant', content: first.answer.content ?? '' }, { role: 'user', content: 'And now?' }]);
    expect(second.warnings).not.toContain('token-mode-image-dropped');
    const withImage: unknown[] = [{ role: 'user', content: [{ type: 'text', text: 'What is in this picture?' }, image] }];
    const third = await warningsOf('tok-image', withImage);
    expect(third.warnings).toContain('token-mode-image-dropped');
    // The next call extends the last one: the image is still in its history, so still left out and still warned.
    const fourth = await warningsOf('tok-image', [...withImage, { role: 'assistant', content: third.answer.content ?? '' }, { role: 'user', content: 'And now?' }]);
    expect(fourth.warnings).toContain('token-mode-image-dropped');
  });

  test('golden check: our rendering equals the simulator template (start-up and sampled turns), exposed on GET /', async () => {
    await engine.settled();
    const stats = engine.stats();
    expect(stats.golden.checks).toBeGreaterThan(5); // start-up + goldenRate 1 on every turn above
    expect(stats.golden.mismatches).toBe(0);
    expect(logs.filter((l) => l.includes('MISMATCH'))).toEqual([]);
    const health = (await (await fetch(`${base}/`)).json()) as { engine_stats?: { golden: { checks: number }; token_buffer: { incremental: number } } };
    expect(health.engine_stats?.golden.checks).toBe(stats.golden.checks);
    expect(health.engine_stats?.token_buffer.incremental).toBeGreaterThanOrEqual(8);
  });

  test('a sampled golden check starts only after the turn was answered, and settled() waits for it', async () => {
    const order: string[] = [];
    const golden = (engine as unknown as { golden: { check: (...args: unknown[]) => Promise<void> } }).golden;
    const check = golden.check.bind(golden);
    golden.check = (...args: unknown[]) => {
      order.push('check started');
      return check(...args);
    };
    try {
      const request = openaiChat.decodeRequest({ model: 'm', messages: [{ role: 'user', content: 'golden after reply' }] }, codecContext({}));
      await engine.complete(request, { sessionId: 'golden-after-reply', requestId: 'r1' });
      order.push('answered');
      await engine.settled();
      expect(order).toEqual(['answered', 'check started']);
    } finally {
      golden.check = check;
    }
  });
});

describe('token mode × engine token endpoints against the simulator', () => {
  for (const kind of ['vllm', 'sglang', 'llamacpp'] as const) {
    test(`${kind}: two-turn tool loop, one chain, policy logprobs`, async () => {
      const kindStore = openStore(':memory:');
      const kindEngine = createEngineClient({ kind, url: sim.url, mode: 'token', timeoutMs: 10_000, now: fixedClock(), newId: sequentialIds(), log: () => {} }) as TokenModeEngine;
      await kindEngine.probe();
      expect(kindEngine.probeReport()?.captureError).toBeNull();
      const kindApp = createProxyApp({ engine: kindEngine, store: kindStore, sessions: adHocSessions({ taskId: TASK }), clock: fixedClock(), newId: sequentialIds() });
      const key = `tok-${kind}`;
      const tools = [{ type: 'function', function: { name: 'bash', parameters: schema } }];
      const messages: any[] = [{ role: 'user', content: 'What is in this project?' }];
      const call = async () => {
        const response = await kindApp.request('/v1/chat/completions', { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages, tools }) });
        expect(response.status).toBe(200);
        return ((await response.json()) as any).choices[0];
      };
      const first = await call();
      expect(first.finish_reason).toBe('tool_calls');
      messages.push({ role: 'assistant', content: '', tool_calls: first.message.tool_calls });
      messages.push({ role: 'tool', tool_call_id: first.message.tool_calls[0].id, content: 'main.py' });
      const second = await call();
      expect(second.message.tool_calls[0].function.arguments).toContain('cat main.py');
      const records = kindStore.completions.listBySession(key);
      expect(records.length).toBe(2);
      for (const rec of records) {
        expect(rec.engine_id).toBe(`${kind}@${sim.url}`);
        expect(rec.capture_error).toBeNull();
        expect(rec.logprobs).toEqual(rescoreCompletion(rec.prompt_ids, rec.response_ids));
      }
      const head = [...records[0]!.prompt_ids, ...records[0]!.response_ids];
      expect(records[1]!.prompt_ids.slice(0, head.length)).toEqual(head);
      const trajectory = buildTrajectory(records, { strategy: 'prefix_merging', session_id: key, task_id: TASK, harness: 'test', status: 'COMPLETED' });
      expect(trajectory.metadata.reconstruction_stats.chains).toBe(1);
      kindStore.close();
    });
  }
});

test('a new user turn after reasoning breaks the chain in chat mode (the template drops earlier reasoning) and not in token mode', async () => {
  const chains: Record<string, number> = {};
  for (const mode of ['chat', 'token'] as const) {
    const modeStore = openStore(':memory:');
    const modeEngine = createEngineClient({ kind: 'sim', url: sim.url, mode, timeoutMs: 10_000, now: fixedClock(), newId: sequentialIds(), log: () => {} });
    const modeApp = createProxyApp({ engine: modeEngine, store: modeStore, sessions: adHocSessions({ taskId: TASK }), clock: fixedClock(), newId: sequentialIds() });
    const key = `newuser-${mode}`;
    const tools = [{ type: 'function', function: { name: 'bash', parameters: schema } }];
    const messages: any[] = [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'What is in this project?' }];
    for (let turn = 0; turn < 3; turn++) {
      const response = await modeApp.request('/v1/chat/completions', { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages, tools }) });
      const message = ((await response.json()) as any).choices[0].message;
      if (turn === 2) break;
      // The client echoes reasoning, as pi and Claude Code do; after the second tool result the user adds a message.
      messages.push({ role: 'assistant', content: message.content ?? '', reasoning_content: message.reasoning_content ?? message.reasoning, tool_calls: message.tool_calls });
      messages.push({ role: 'tool', tool_call_id: message.tool_calls[0].id, content: 'main.py' });
      if (turn === 1) messages.push({ role: 'user', content: 'Also: keep it short.' });
    }
    const records = modeStore.completions.listBySession(key);
    expect(records.length).toBe(3);
    chains[mode] = buildTrajectory(records, { strategy: 'prefix_merging', session_id: key, task_id: TASK, harness: 'test', status: 'COMPLETED' }).metadata.reconstruction_stats.chains;
    modeStore.close();
  }
  expect(chains).toEqual({ chat: 2, token: 1 });
});
