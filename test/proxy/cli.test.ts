/** `polar proxy` as a process: usage errors exit 2; a real run captures a call into --db and stops on SIGTERM. */
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../../src/store/index.ts';
import { startFakeEngine, type FakeEngine } from '../support/fake-engine.ts';
import { firstLine, startPolarProxy } from '../support/polar-cli.ts';

const root = join(import.meta.dir, '..', '..');
const bun = process.execPath;
let engine: FakeEngine;
const dir = mkdtempSync(join(tmpdir(), 'polar-proxy-cli-'));

beforeAll(async () => {
  engine = await startFakeEngine({ shape: 'vllm', script: [{ kind: 'text', text: 'from the cli' }] });
});
afterAll(async () => {
  await engine.stop();
  rmSync(dir, { recursive: true, force: true });
});

function polar(args: string[]) {
  return Bun.spawnSync([bun, join(root, 'src/main.ts'), 'proxy', ...args], { cwd: dir, stdout: 'pipe', stderr: 'pipe' });
}

test('usage errors exit 2 with a clear message', () => {
  const token = polar(['--port', '0', '--engine', 'openai', '--engine-url', engine.url, '--mode', 'token']);
  expect(token.exitCode).toBe(2);
  expect(token.stderr.toString()).toContain('--engine openai has no token endpoint');
  const kind = polar(['--port', '0', '--engine', 'tgi', '--engine-url', engine.url]);
  expect(kind.exitCode).toBe(2);
  expect(kind.stderr.toString()).toContain('--engine must be one of');
  const missing = polar(['--port', '0', '--engine', 'vllm']);
  expect(missing.exitCode).toBe(2);
});

test('an engine that is down does not stop the proxy: it serves and reports the engine in /health', async () => {
  const { proc, url } = await startPolarProxy(['--port', '0', '--engine', 'vllm', '--engine-url', 'http://127.0.0.1:9', '--timeout-ms', '2000', '--db', join(dir, 'down.db')], dir);
  try {
    const health = (await (await fetch(`${url}/health`)).json()) as { ok: boolean; engine: { ok: boolean; error: string | null } };
    expect(health.ok).toBe(true);
    expect(health.engine.ok).toBe(false);
    expect(health.engine.error).toBeTruthy();
    // A model call gets the engine's failure in the caller's own error shape, and the proxy keeps serving.
    const call = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer s1', 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }) });
    expect(call.status).toBeGreaterThanOrEqual(500);
    expect(((await call.json()) as { error: { message: string } }).error.message).toBeTruthy();
    expect((await fetch(`${url}/health`)).status).toBe(200);
  } finally {
    proc.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
  }
});

test('an engine URL ending in /v1 is accepted (not turned into /v1/v1/models)', async () => {
  const { proc, url } = await startPolarProxy(['--port', '0', '--engine', 'vllm', '--engine-url', `${engine.url}/v1/`, '--db', join(dir, 'v1.db')], dir);
  try {
    expect(((await (await fetch(`${url}/health`)).json()) as { engine: { ok: boolean } }).engine.ok).toBe(true);
    const call = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer s2', 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }) });
    expect(call.status).toBe(200);
  } finally {
    proc.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
  }
});

test('serves, records into --db, and stops cleanly on SIGTERM', async () => {
  const db = join(dir, 'records.db');
  const { proc, url } = await startPolarProxy(['--port', '0', '--engine', 'vllm', '--engine-url', engine.url, '--db', db], dir);
  const client = new Anthropic({ baseURL: url, apiKey: 'cli-session', maxRetries: 0 });
  const message = await client.messages.create({ model: 'polar-test-model', max_tokens: 20, messages: [{ role: 'user', content: 'hello' }] });
  expect(message.content[0]).toMatchObject({ type: 'text', text: 'from the cli' });
  proc.kill('SIGTERM');
  expect(await proc.exited).toBe(0);
  const store = openStore(db);
  try {
    const records = store.completions.listBySession('cli-session');
    expect(records.length).toBe(1);
    expect(records[0]!.engine_id).toBe(`vllm@${engine.url}`);
    expect(records[0]!.capture_error).toBeNull();
  } finally {
    store.close();
  }
});

test('a body nested tens of thousands deep → 400 in the caller shape, streaming or not (not a 500); the proxy keeps serving', async () => {
  // Where the stack runs out depends on the process and the engine kind (here: `polar proxy` in front of `polar sim`,
  // as a newcomer found it; the in-process proxy of the other tests gets further).
  const sim = Bun.spawn([bun, join(root, 'src/main.ts'), 'sim', '--port', '0', '--decode-tps', '0', '--prefill-tps', '0'], { cwd: dir, stdout: 'pipe', stderr: 'pipe' });
  const simUrl = (await firstLine(sim.stdout)).match(/http:\/\/\S+/)![0];
  const { proc, url } = await startPolarProxy(['--port', '0', '--engine', 'sim', '--engine-url', simUrl, '--db', join(dir, 'deep.db')], dir);
  try {
    // Built as text: JSON.stringify of such a value exhausts the stack here too.
    const schema = `{"type":"object","properties":{"a":${'['.repeat(50_000)}${']'.repeat(50_000)}}}`;
    // Whether a path exhausts the stack depends on its frames; every answer must be a success or a 400 in the caller's
    // own shape, never a 500, and the path the newcomer hit (Chat, not streamed) must be the 400.
    const statuses: number[] = [];
    for (const stream of [false, true]) {
      const chat = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST', headers: { authorization: 'Bearer deep', 'content-type': 'application/json' },
        body: `{"model":"m","stream":${stream},"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":${schema}}}]}`,
      });
      statuses.push(chat.status);
      if (chat.status === 400) expect(await chat.json()).toMatchObject({ error: { type: 'invalid_request_error', message: expect.stringContaining('nested too deeply') } });
      else await chat.arrayBuffer();
      const messages = await fetch(`${url}/v1/messages`, {
        method: 'POST', headers: { 'x-api-key': 'deep', 'content-type': 'application/json' },
        body: `{"model":"m","max_tokens":5,"stream":${stream},"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":${schema}}]}`,
      });
      statuses.push(messages.status);
      if (messages.status === 400) expect(await messages.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
      else await messages.arrayBuffer();
    }
    expect(statuses[0]).toBe(400);
    expect(statuses.every((status) => status === 200 || status === 400)).toBe(true);
    const ok = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer deep', 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }) });
    expect(ok.status).toBe(200);
  } finally {
    proc.kill('SIGTERM');
    sim.kill('SIGTERM');
    await Promise.all([proc.exited, sim.exited]);
  }
});

test('--task: polar proxy in front of polar sim plays that task\'s behaviour script (a tool call of the client\'s shell tool)', async () => {
  const scripts = join(dir, 'scripts');
  mkdirSync(scripts, { recursive: true });
  writeFileSync(join(scripts, 'list-files.yaml'), 'variants:\n  only:\n    steps:\n      - shell: ls -la\n      - say: done\n');
  const sim = Bun.spawn([bun, join(root, 'src/main.ts'), 'sim', '--port', '0', '--decode-tps', '0', '--prefill-tps', '0', '--scripts', scripts], { cwd: dir, stdout: 'pipe', stderr: 'pipe' });
  const simUrl = (await firstLine(sim.stdout)).match(/http:\/\/\S+/)![0];
  const tools = [{ type: 'function', function: { name: 'bash', description: 'run a command', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } } }];
  const ask = (url: string) => fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer scripted', 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', tools, messages: [{ role: 'user', content: 'list the files' }] }) });
  const procs = [];
  try {
    for (const task of ['list-files', undefined]) {
      const { proc, url } = await startPolarProxy(['--port', '0', '--engine', 'sim', '--engine-url', simUrl, '--db', join(dir, `task-${task}.db`), ...(task ? ['--task', task] : [])], dir);
      procs.push(proc);
      const answer = (await (await ask(url)).json()) as { choices: { message: { tool_calls?: { function: { name: string; arguments: string } }[]; content: string | null } }[] };
      const calls = answer.choices[0]!.message.tool_calls ?? [];
      if (task) expect(calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)])).toEqual([['bash', { command: 'ls -la' }]]);
      else expect(calls).toEqual([]); // no task: the simulator's no-script answer
    }
  } finally {
    for (const proc of procs) proc.kill('SIGTERM');
    sim.kill('SIGTERM');
    await Promise.all([...procs.map((p) => p.exited), sim.exited]);
  }
});
