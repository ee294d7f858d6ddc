/**
 * `systemMessages: auto`: at probe time the engine's chat template is asked (vLLM POST /tokenize) whether it renders
 * a system message after a user turn; in_place when it does, merge when it refuses or drops it; the choice is in the
 * probe report, applied to the requests, and logged by `polar proxy`. Token mode asks our own template.
 */
import { afterAll, expect, test } from 'bun:test';
import { join } from 'node:path';
import { createEngineClient } from '../../src/engines/index.ts';
import { placementFromRenderer, placementLogLine } from '../../src/engines/system-placement.ts';
import type { IRRequest } from '../../src/core/ir.ts';
import { loadTokenizer } from '../../src/tokenization/index.ts';
import { startFakeEngine, type FakeEngine } from '../support/fake-engine.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { staticSessions } from '../../src/proxy/sessions.ts';
import { openStore } from '../../src/store/index.ts';
import { REPO_ROOT, useScratch } from '../support/polar-cli.ts';

const engines: FakeEngine[] = [];
afterAll(async () => {
  for (const e of engines) await e.stop();
});
const { dir: scratch, procs } = useScratch('polar-placement-');

async function fake(systemAfterUser: 'render' | 'reject' | 'drop'): Promise<FakeEngine> {
  const engine = await startFakeEngine({ shape: 'vllm', script: [{ kind: 'text', text: 'ok' }], systemAfterUser });
  engines.push(engine);
  return engine;
}

const midConversationSystem: IRRequest = {
  version: 1, model: 'm', tools: [], sampling: {}, stream: false, warnings: [],
  messages: [
    { role: 'system', content: [{ type: 'text', text: 'lead' }] },
    { role: 'user', content: [{ type: 'text', text: 'one' }] },
    { role: 'assistant', content: [{ type: 'text', text: 'two' }] },
    { role: 'system', content: [{ type: 'text', text: 'later note' }] },
    { role: 'user', content: [{ type: 'text', text: 'three' }] },
  ],
} as unknown as IRRequest;

for (const [behaviour, placement, reason] of [['render', 'in-place', 'renders a system message after a user turn'], ['reject', 'merge', 'refuses'], ['drop', 'merge', 'drops']] as const) {
  test(`auto against a template that ${behaviour}s a later system message → ${placement}`, async () => {
    const engine = await fake(behaviour);
    const client = createEngineClient({ kind: 'vllm', url: engine.url, mode: 'chat', timeoutMs: 5000, systemMessages: 'auto' });
    await client.probe();
    const report = client.probeReport!()!;
    expect(report.systemMessages).toMatchObject({ placement, auto: true });
    expect(report.systemMessages!.reason).toContain(reason);
    await client.complete(midConversationSystem, { sessionId: 's', requestId: 'r' });
    const sent = engine.chatRequests().at(-1)!.body.messages as { role: string }[];
    expect(sent.map((m) => m.role)).toEqual(placement === 'in-place' ? ['system', 'user', 'assistant', 'system', 'user'] : ['system', 'user', 'assistant', 'user']);
  });
}

test('a configured placement is kept and not probed', async () => {
  const engine = await fake('reject');
  const client = createEngineClient({ kind: 'vllm', url: engine.url, mode: 'chat', timeoutMs: 5000, systemMessages: 'in-place' });
  await client.probe();
  expect(client.probeReport!()!.systemMessages).toEqual({ placement: 'in-place', auto: false, reason: 'configured' });
  // No conversation was rendered (the probe's one /tokenize is of `</think>`, a prompt: chat-engine.ts probeThinkCloseId).
  expect(engine.requests.filter((r) => r.path === '/tokenize' && r.body.messages !== undefined)).toHaveLength(0);
  expect(placementLogLine(client.probeReport!())).toBe('system_messages: in_place (configured)');
});

test("token mode: our embedded Qwen3 template renders a later system message → in_place", async () => {
  const tokenizer = await loadTokenizer();
  const decision = await placementFromRenderer((messages) => tokenizer.renderChatIds(messages, { addGenerationPrompt: true }).length);
  expect(decision.placement).toBe('in-place');
  const refusing = await placementFromRenderer((messages) => {
    if (messages.some((m, i) => m.role === 'system' && i > 0)) throw new Error('System message must be at the beginning.');
    return messages.length;
  });
  expect(refusing.placement).toBe('merge');
});

test('polar proxy logs the placement it chose', async () => {
  const engine = await fake('reject');
  const proc = Bun.spawn([process.execPath, join(REPO_ROOT, 'src/main.ts'), 'proxy', '--port', '0', '--engine', 'vllm', '--engine-url', engine.url, '--db', join(scratch, 'p.db')], { cwd: scratch, stdout: 'pipe', stderr: 'pipe' });
  procs.push(proc);
  const reader = proc.stdout.getReader();
  let out = '';
  while (!out.includes('listening on')) {
    const { value, done } = await reader.read();
    if (done) break;
    out += new TextDecoder().decode(value);
  }
  const url = /listening on (http:\/\/\S+)/.exec(out)![1]!;
  expect((await fetch(`${url}/health`)).status).toBe(200);
  proc.kill('SIGTERM');
  expect(await proc.exited).toBe(0);
  expect(out).toMatch(/^polar proxy: system_messages: merge \(auto: the chat template refuses a system message after a user turn/m);
}, 30_000);

test('the placement reaches OpenAI Chat and Responses clients: in_place keeps a later system/developer message where it stood, merge moves it with a warning', async () => {
  const engine = await fake('render');
  const chatBody = {
    model: 'm', messages: [{ role: 'system', content: 'lead' }, { role: 'user', content: 'one' }, { role: 'assistant', content: 'two' }, { role: 'system', content: 'later note' }, { role: 'user', content: 'three' }],
  };
  const responsesBody = {
    model: 'm', instructions: 'lead',
    input: [{ role: 'user', content: 'one' }, { role: 'assistant', content: 'two' }, { role: 'developer', content: 'later note' }, { role: 'user', content: 'three' }],
  };
  for (const placement of ['in-place', 'merge'] as const) {
    const client = createEngineClient({ kind: 'vllm', url: engine.url, mode: 'chat', timeoutMs: 5000, systemMessages: placement });
    const store = openStore(':memory:');
    const app = createProxyApp({ engine: client, store, sessions: staticSessions({ k: { session_id: 's', task_id: 't' } }) });
    try {
      for (const [path, body] of [['/v1/chat/completions', chatBody], ['/v1/responses', responsesBody]] as const) {
        const seen = engine.chatRequests().length;
        const response = await app.fetch(new Request(`http://proxy${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer k' }, body: JSON.stringify(body) }));
        expect(response.status).toBe(200);
        const sent = engine.chatRequests().slice(seen).at(-1)!.body.messages as { role: string; content: string }[];
        if (placement === 'in-place') {
          expect(sent.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'system', 'user']);
          expect(sent[3]!.content).toBe('later note');
          expect(response.headers.get('x-polar-warnings') ?? '').not.toContain('system-message-moved');
        } else {
          expect(sent.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
          expect(sent[0]!.content).toBe('lead\n\nlater note');
          expect(response.headers.get('x-polar-warnings')).toContain('system-message-moved');
        }
      }
    } finally {
      store.close();
    }
  }
});
