/**
 * A 40-turn session in token mode against a fake SGLang `/generate` engine that records every `input_ids` it gets.
 * The harness drops earlier reasoning and re-serialises tool arguments with other spacing and key order (the prefix
 * breakers of chat mode): token mode must keep one chain, and the engine's prompt at every turn must start with the
 * previous prompt + the sampled ids, byte for byte.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { fixedClock } from '../../src/core/clock.ts';
import { sequentialIds } from '../../src/core/ids.ts';
import { createEngineClient, type TokenModeEngine } from '../../src/engines/index.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { staticSessions } from '../../src/proxy/sessions.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { loadTokenizer, type LoadedTokenizer } from '../../src/tokenization/index.ts';
import { buildTrajectory } from '../../src/trace/index.ts';

const TURNS = 40;
let tk: LoadedTokenizer;
let fake: ReturnType<typeof Bun.serve>;
let proxy: ReturnType<typeof Bun.serve>;
let store: Store;
let engine: TokenModeEngine;
const generateBodies: Record<string, any>[] = [];

/** What the fake model "samples" at turn i: reasoning, then a tool call with two arguments; the last turn answers. */
function sampledText(turn: number): string {
  if (turn === TURNS - 1) return '<think>\nAll steps done.\n</think>\n\nDone after 39 commands.';
  return `<think>\nStep ${turn}: run the next command.\n</think>\n\n<tool_call>\n{"name": "bash", "arguments": {"command": "echo ${turn}", "timeout": ${turn + 1}}}\n</tool_call>`;
}

beforeAll(async () => {
  tk = await loadTokenizer();
  const eot = tk.eosTokenIds[0]!;
  fake = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    routes: {
      '/v1/models': () => Response.json({ object: 'list', data: [{ id: 'fake-qwen3', object: 'model' }] }),
      '/generate': async (request) => {
        const body = (await request.json()) as Record<string, any>;
        if (body.rid?.startsWith('polar-probe')) {
          return Response.json({ text: '', output_ids: [eot], meta_info: { output_token_logprobs: [[-0.5, eot, null]], finish_reason: { type: 'stop', matched: eot }, prompt_tokens: body.input_ids.length, completion_tokens: 1 } });
        }
        const malformed = body.rid.startsWith('sess-bad:');
        const turn = generateBodies.length;
        if (!malformed) generateBodies.push(body);
        const ids = [...tk.encode(malformed ? 'Sure. STOP here\n<tool_call>\n{"name": "bash", "arguments": {"command": \n</tool_call>' : sampledText(turn)), eot];
        return Response.json({
          text: tk.decode(ids),
          output_ids: ids,
          meta_info: {
            output_token_logprobs: ids.map((id, k) => [-(k % 7) / 8, id, null]),
            finish_reason: { type: 'stop', matched: eot },
            prompt_tokens: body.input_ids.length,
            completion_tokens: ids.length,
            cached_tokens: 0,
            weight_version: 'w1',
          },
        });
      },
    },
    fetch: () => new Response('{"detail":"Not Found"}', { status: 404 }),
  });
  store = openStore(':memory:');
  engine = createEngineClient({ kind: 'sglang', url: `http://127.0.0.1:${fake.port}`, mode: 'token', timeoutMs: 5000, now: fixedClock(), newId: sequentialIds(), log: () => {} }) as TokenModeEngine;
  await engine.probe();
  const app = createProxyApp({ engine, store, sessions: staticSessions({ 'sess-40': { session_id: 'sess-40', task_id: 't' }, 'sess-bad': { session_id: 'sess-bad', task_id: 't' } }), clock: fixedClock(), newId: sequentialIds() });
  proxy = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: app.fetch });
});
afterAll(async () => {
  await proxy.stop(true);
  await fake.stop(true);
  store.close();
});

test('40 turns, reasoning dropped and arguments re-serialised: one chain, every prompt extends prompt + sampled ids', async () => {
  const tools = [{ type: 'function', function: { name: 'bash', description: 'Run a command', parameters: { type: 'object', properties: { command: { type: 'string' }, timeout: { type: 'integer' } } } } }];
  const messages: any[] = [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'Run forty commands.' }];
  for (let turn = 0; turn < TURNS; turn++) {
    const response = await fetch(`http://127.0.0.1:${proxy.port}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer sess-40', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'qwen', messages, tools, max_tokens: 256 }),
    });
    expect(response.status).toBe(200);
    const message = ((await response.json()) as any).choices[0].message;
    if (turn === TURNS - 1) {
      expect(message.content).toBe('Done after 39 commands.');
      break;
    }
    expect(message.reasoning_content ?? message.reasoning).toBe(`Step ${turn}: run the next command.`);
    const call = message.tool_calls[0];
    const args = JSON.parse(call.function.arguments);
    expect(args).toEqual({ command: `echo ${turn}`, timeout: turn + 1 });
    // The harness drops the reasoning and re-serialises the arguments: other spacing, other key order.
    const reserialised = `{ "timeout" : ${args.timeout},\n  "command" : ${JSON.stringify(args.command)} }`;
    messages.push({ role: 'assistant', content: message.content ?? '', tool_calls: [{ id: call.id, type: 'function', function: { name: 'bash', arguments: reserialised } }] });
    messages.push({ role: 'tool', tool_call_id: call.id, content: `${turn}\n` });
  }
  expect(generateBodies.length).toBe(TURNS);
  for (const body of generateBodies) {
    // Every sampling parameter explicit, stop on ids, never on strings.
    expect(body.sampling_params).toMatchObject({ max_new_tokens: 256, temperature: 1, top_p: 1, top_k: -1, min_p: 0, skip_special_tokens: false, no_stop_trim: true, stop_token_ids: tk.eosTokenIds });
    expect(body.sampling_params.stop).toBeUndefined();
    expect(body.return_logprob).toBe(true);
    expect(body.rid.startsWith('sess-40:')).toBe(true);
  }
  for (let i = 1; i < TURNS; i++) {
    const previous = generateBodies[i - 1]!;
    const head: number[] = [...previous.input_ids, ...tk.encode(sampledText(i - 1)), tk.eosTokenIds[0]!];
    const prompt: number[] = generateBodies[i]!.input_ids;
    expect(prompt.length).toBeGreaterThan(head.length);
    expect(prompt.slice(0, head.length)).toEqual(head);
    // The interstitial is exactly the canonical template glue: "\n", the tool turn, the generation prompt.
    expect(tk.decode(prompt.slice(head.length))).toBe(`\n<|im_start|>user\n<tool_response>\n${i - 1}\n\n</tool_response><|im_end|>\n<|im_start|>assistant\n`);
  }
  const records = store.completions.listBySession('sess-40');
  expect(records.length).toBe(TURNS);
  for (const [i, rec] of records.entries()) {
    expect(rec.mode).toBe('token');
    expect(rec.capture_error).toBeNull();
    expect(rec.prompt_ids).toEqual(generateBodies[i]!.input_ids);
    expect(rec.policy_version).toBe('w1');
  }
  const trajectory = buildTrajectory(records, { strategy: 'prefix_merging', session_id: 'sess-40', task_id: 't', harness: 'test', status: 'COMPLETED', eotIds: tk.eosTokenIds });
  expect(trajectory.metadata.reconstruction_stats.chains).toBe(1);
  expect(Object.values(trajectory.metadata.reconstruction_stats.breaks).every((n) => n === 0)).toBe(true);
  const trace = trajectory.traces[0]!;
  expect(trace.prompt_ids).toEqual(records[0]!.prompt_ids);
  expect([...trace.prompt_ids, ...trace.response_ids]).toEqual([...records[TURNS - 1]!.prompt_ids, ...records[TURNS - 1]!.response_ids]);
  const stats = engine.stats();
  expect(stats.token_buffer!.incremental).toBe(TURNS - 1);
  expect(stats.token_buffer!.full).toBe(1);
  // The fake engine has no /tokenize: the golden check reports itself unavailable instead of failing.
  expect(stats.golden.unavailable).toBeGreaterThanOrEqual(1);
  expect(stats.golden.mismatches).toBe(0);
});

test('a malformed tool call reaches the client as text, stays flagged on the record; stop strings cut the text only', async () => {
  const response = await fetch(`http://127.0.0.1:${proxy.port}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: 'Bearer sess-bad', 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'qwen', messages: [{ role: 'user', content: 'go' }], tools: [{ type: 'function', function: { name: 'bash', parameters: { type: 'object' } } }], stop: ['STOP'] }),
  });
  expect(response.status).toBe(200);
  expect(response.headers.get('x-polar-warnings')).toContain('parser-invalid-tool-call');
  expect(response.headers.get('x-polar-warnings')).toContain('stop-applied-after-sampling');
  const choice = ((await response.json()) as any).choices[0];
  expect(choice.message.tool_calls ?? []).toEqual([]);
  expect(choice.message.content).toBe('Sure. ');
  expect(choice.finish_reason).toBe('stop');
  const [record] = store.completions.listBySession('sess-bad');
  expect(record!.ir_response!.toolCalls).toEqual([{ id: expect.any(String), name: 'bash', arguments: '{"name": "bash", "arguments": {"command":', parserInvalid: true }]);
  // Every sampled id is kept, the stop string and the malformed call included.
  expect(tk.decode(record!.response_ids)).toContain('STOP here');
  const trajectory = buildTrajectory([record!], { strategy: 'prefix_merging', session_id: 'sess-bad', task_id: 't', harness: 'test', status: 'COMPLETED' });
  expect(trajectory.traces[0]!.metadata.parser_invalid_tool_calls).toBe(1);
});
