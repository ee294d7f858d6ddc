/**
 * The gateway's `beforeSession` hook on the simulator (src/stack/sim-scripts.ts): each session registers its task's
 * script, so a simulator that restarted (and forgot every script) gets it again before the next session runs.
 */
import { expect, test } from 'bun:test';
import { simScriptRegistrar } from '../../src/stack/sim-scripts.ts';
import { SimServer } from '../../src/sim/server.ts';
import type { TaskRequest } from '../../src/core/records.ts';

const SCRIPT = { variants: { solve: { weight: 1, steps: [{ say: 'Scripted answer.' }] } } };
const task = { task_id: 'restart-task', metadata: { sim_script: SCRIPT } } as unknown as TaskRequest;

/** The simulator's answer to a session of `restart-task`. */
async function answer(sim: SimServer): Promise<string> {
  const response = await fetch(`${sim.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-polar-session': 's-1', 'x-polar-task': 'restart-task' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'go' }], max_tokens: 200 }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content;
}

test('a restarted simulator gets the task\'s script again before the next session', async () => {
  let sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0 });
  const port = Number(new URL(sim.url).port);
  const register = simScriptRegistrar(sim.url);
  try {
    await register(task, new AbortController().signal);
    expect(await answer(sim)).toContain('Scripted answer.');
    await sim.stop();
    sim = await SimServer.start({ port, prefillTps: 0, decodeTps: 0 }); // same URL, no scripts
    expect(await answer(sim)).not.toContain('Scripted answer.');
    await register(task, new AbortController().signal);
    expect(await answer(sim)).toContain('Scripted answer.');
  } finally {
    await sim.stop();
  }
});

test('concurrent sessions share one registration in flight; a settled one is not reused', async () => {
  const calls: string[] = [];
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const fakeFetch = (async (_url: string, init: RequestInit) => {
    calls.push(String(init.body));
    await gate;
    return new Response('{"ok":true}');
  }) as unknown as typeof fetch;
  const register = simScriptRegistrar('http://sim.invalid/', fakeFetch);
  const signal = new AbortController().signal;
  const both = Promise.all([register(task, signal), register(task, signal)]);
  release();
  await both;
  expect(calls).toHaveLength(1);
  await register(task, signal);
  expect(calls).toHaveLength(2);
  expect(JSON.parse(calls[1]!)).toEqual({ task_id: 'restart-task', script: SCRIPT });
});

test('a task without a script registers nothing; a refusal names the task and the status', async () => {
  const fakeFetch = (async () => new Response('bad script', { status: 400 })) as unknown as typeof fetch;
  const register = simScriptRegistrar('http://sim.invalid', fakeFetch);
  const signal = new AbortController().signal;
  await register({ task_id: 'plain' } as unknown as TaskRequest, signal);
  await expect(register(task, signal)).rejects.toThrow('refused the behaviour script of task restart-task (HTTP 400): bad script');
});
