/**
 * A task's own sampling (agent.settings.sampling_params, slime's names, or model_kwargs, the Python Polar's): read
 * strictly at submit (unknown or unsupported keys name their path), kept away from the harness, and laid over every
 * model call of the task's sessions at the proxy: temperature / top_p / top_k / min_p / seed replace the harness's, max tokens
 * is the smaller cap, stop strings add up. What the engine got is what the record says.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { harnessSettings, runnableProblems, taskSamplingOf } from '../../src/core/contracts/index.ts';
import { staticSessions } from '../../src/proxy/sessions.ts';
import { SimServer } from '../../src/sim/server.ts';
import { startFakeEngine, type FakeEngine } from '../support/fake-engine.ts';
import { startTestProxy, type TestProxy } from '../support/proxy-harness.ts';
import { taskRequest } from '../support/tasks.ts';

test('both spellings read into one shape; text-only keys accepted; the rest is an error naming its path', () => {
  expect(taskSamplingOf({ sampling_params: { temperature: 0.7, top_p: 0.9, top_k: 20, max_new_tokens: 512, stop: '</answer>', skip_special_tokens: false, no_stop_trim: true, stop_token_ids: null } }))
    .toEqual({ temperature: 0.7, topP: 0.9, topK: 20, maxTokens: 512, stop: ['</answer>'] });
  expect(taskSamplingOf({ model_kwargs: { temperature: 1, max_tokens: 64, extra_body: { top_k: -1, min_p: 0.05 } } })).toEqual({ temperature: 1, topK: -1, minP: 0.05, maxTokens: 64 });
  // What verl's agent loop hands over: neutral repetition_penalty and logprobs are accepted.
  expect(taskSamplingOf({ sampling_params: { temperature: 1, top_p: 1, repetition_penalty: 1, logprobs: true, max_tokens: 100 } })).toEqual({ temperature: 1, topP: 1, maxTokens: 100 });
  expect(() => taskSamplingOf({ sampling_params: { repetition_penalty: 1.2 } })).toThrow('agent.settings.sampling_params.repetition_penalty: only 1');
  expect(taskSamplingOf({ api: 'openai-completions' })).toBeNull();
  expect(taskSamplingOf(undefined)).toBeNull();
  expect(() => taskSamplingOf({ sampling_params: { temperature: 0.7, presence_penalty: 0.5 } })).toThrow('agent.settings.sampling_params.presence_penalty: unknown key');
  expect(() => taskSamplingOf({ sampling_params: { stop_token_ids: [151645] } })).toThrow(/agent\.settings\.sampling_params\.stop_token_ids: .*not supported/);
  expect(() => taskSamplingOf({ model_kwargs: { extra_body: { min_tokens: 3 } } })).toThrow('agent.settings.model_kwargs.extra_body.min_tokens: unknown key');
  expect(() => taskSamplingOf({ model_kwargs: { top_p: 0 } })).toThrow('agent.settings.model_kwargs.top_p');
  expect(() => taskSamplingOf({ model_kwargs: {}, sampling_params: {} })).toThrow('conflicts');
  expect(harnessSettings({ api: 'x', sampling_params: { temperature: 1 }, model_kwargs: null })).toEqual({ api: 'x' });
});

test("a seed in any of its three names (the Python Polar's sampling_seed, SGLang's, model_kwargs.seed) is the task's seed", () => {
  expect(taskSamplingOf({ sampling_seed: 42 })).toEqual({ seed: 42 });
  expect(taskSamplingOf({ sampling_seed: 0, model_kwargs: { temperature: 1 } })).toEqual({ temperature: 1, seed: 0 });
  expect(taskSamplingOf({ sampling_params: { sampling_seed: 5 } })).toEqual({ seed: 5 });
  expect(taskSamplingOf({ model_kwargs: { seed: 6 } })).toEqual({ seed: 6 });
  expect(taskSamplingOf({ sampling_seed: 6, model_kwargs: { seed: 6 } })).toEqual({ seed: 6 });
  expect(taskSamplingOf({ sampling_seed: null })).toBeNull();
  expect(() => taskSamplingOf({ sampling_seed: 1, model_kwargs: { seed: 2 } })).toThrow('agent.settings.sampling_seed: conflicts with agent.settings.model_kwargs.seed; give one');
  expect(() => taskSamplingOf({ sampling_seed: 1.5 })).toThrow('agent.settings.sampling_seed:');
  expect(() => taskSamplingOf({ sampling_seed: '7' })).toThrow('agent.settings.sampling_seed:');
  expect(harnessSettings({ sampling_seed: 3, thinking: 'low' })).toEqual({ thinking: 'low' });
});

test('a TaskRequest with bad sampling is refused at submit (runnableProblems), naming the path', () => {
  const task = taskRequest('t', { agent: { harness: 'custom', command: 'true', model_name: 'm', settings: { sampling_params: { temprature: 0.5 } } } });
  expect(runnableProblems(task)).toEqual([{ path: 'agent.settings.sampling_params.temprature', message: 'unknown key' }]);
  expect(runnableProblems(taskRequest('t', { agent: { harness: 'custom', command: 'true', model_name: 'm', settings: { sampling_params: { temperature: 0.5 } } } }))).toEqual([]);
});

let engine: FakeEngine;
let proxy: TestProxy;
beforeAll(async () => {
  engine = await startFakeEngine({ shape: 'vllm', script: [{ kind: 'text', text: 'ok' }] });
  proxy = await startTestProxy({
    engineUrl: engine.url, kind: 'vllm',
    sessions: staticSessions({
      trained: { session_id: 'trained', task_id: 't', sampling: { temperature: 0.6, topP: 0.95, topK: 20, maxTokens: 256, stop: ['</answer>'], seed: 1234 } },
      plain: { session_id: 'plain', task_id: 't' },
    }),
  });
});
afterAll(async () => {
  await proxy.stop();
  await engine.stop();
});

test("the task's sampling replaces the harness's at the engine; max tokens is the smaller cap; the record keeps it", async () => {
  const call = (key: string, max_tokens: number) =>
    new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: key, maxRetries: 0 }).chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi there' }], temperature: 0.2, top_p: 0.5, max_tokens, stop: ['STOP'], seed: 9 });
  await call('trained', 4096);
  await call('trained', 16); // a harness's own smaller cap (a title request) stays
  await call('plain', 4096);
  const [big, small, plain] = engine.chatRequests().slice(-3).map((r) => r.body);
  expect(big).toMatchObject({ temperature: 0.6, top_p: 0.95, top_k: 20, max_tokens: 256, seed: 1234 });
  expect(big!.stop).toEqual(['STOP', '</answer>']);
  expect(small).toMatchObject({ temperature: 0.6, max_tokens: 16 });
  expect(plain).toMatchObject({ temperature: 0.2, top_p: 0.5, max_tokens: 4096, stop: ['STOP'], seed: 9 });
  const [record] = proxy.store.completions.listBySession('trained');
  expect(record!.ir_request.sampling).toMatchObject({ temperature: 0.6, topP: 0.95, topK: 20, maxTokens: 256, stop: ['STOP', '</answer>'], seed: 1234 });
});

test('an instruction too long for one command-line argument is refused at submit, not as E2BIG in every session', () => {
  const long = taskRequest('t', { instruction: 'x'.repeat(130_000) });
  expect(runnableProblems(long)).toEqual([expect.objectContaining({ path: 'instruction', message: expect.stringContaining('130000 bytes') })]);
  expect(runnableProblems(taskRequest('t', { instruction: 'é'.repeat(60_000) }))).toEqual([]);
});

test("token mode: a task's max tokens beyond the context's room is clamped to the room, not refused by the engine", async () => {
  const sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0, maxModelLen: 4096 });
  const tokenProxy = await startTestProxy({
    engineUrl: sim.url, kind: 'sim', mode: 'token',
    sessions: staticSessions({ long: { session_id: 'long', task_id: 't', sampling: { maxTokens: 100_000 } } }),
  });
  try {
    const client = new OpenAI({ baseURL: `${tokenProxy.url}/v1`, apiKey: 'long', maxRetries: 0 });
    const answer = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hello' }] });
    expect(answer.choices[0]!.message.content).toBeString();
    const [record] = tokenProxy.store.completions.listBySession('long');
    expect(record!.ir_request.sampling.maxTokens).toBe(100_000);
  } finally {
    await tokenProxy.stop();
    await sim.stop();
  }
});

test('the custom harness: its settings are checked at submit as the gateway would at INIT (sampling keys aside)', () => {
  const custom = (settings: Record<string, unknown>) => taskRequest('t', { agent: { harness: 'custom', command: 'mycli {{INSTRUCTION}}', model_name: 'm', settings } });
  expect(runnableProblems(custom({ base_url_env: { MYCLI_URL: '/v1' }, sampling_params: { temperature: 1 } }))).toEqual([]);
  expect(runnableProblems(custom({ base_url_envs: { X: '/v1' }, api_key_env: ['1BAD'] })).map((p) => p.path).sort()).toEqual(['agent.settings.api_key_env[0]', 'agent.settings.base_url_envs']);
});
