/**
 * Test helper: a proxy (createProxyApp) on Bun.serve({port: 0}) in front of a fake engine, with an in-memory store and
 * injected clock/ids. Reused by the proxy tests and the e2e tests.
 */
import { afterAll, beforeAll, expect } from 'bun:test';
import { fixedClock } from '../../src/core/clock.ts';
import { sequentialIds } from '../../src/core/ids.ts';
import type { CompletionRecord } from '../../src/core/records.ts';
import { createEngineClient } from '../../src/engines/index.ts';
import type { EngineKind } from '../../src/engines/types.ts';
import { createProxyApp, type ProxyApp } from '../../src/proxy/app.ts';
import { adHocSessions } from '../../src/proxy/sessions.ts';
import { newProxyCounters, type ProxyCounters, type ProxyOptions, type SessionDirectory } from '../../src/proxy/types.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { EOS_ID, fakeIds, startFakeEngine, type FakeEngine, type FakeEngineOptions, type FakeReply } from './fake-engine.ts';

export interface TestProxy {
  url: string;
  store: Store;
  app: ProxyApp;
  counters: ProxyCounters;
  stop(): Promise<void>;
}

export async function startTestProxy(opts: {
  engineUrl: string;
  kind: EngineKind;
  timeoutMs?: number;
  sessions?: SessionDirectory;
  options?: ProxyOptions;
  /** Capture mode (default chat). */
  mode?: 'chat' | 'token';
  /** Called with each committed record (ProxyDeps.onRecord). */
  onRecord?: (rec: CompletionRecord) => void;
}): Promise<TestProxy> {
  const store = openStore(':memory:');
  const engine = createEngineClient({ kind: opts.kind, url: opts.engineUrl, mode: opts.mode ?? 'chat', timeoutMs: opts.timeoutMs ?? 5000, now: fixedClock(), newId: sequentialIds() });
  await engine.probe();
  const counters = newProxyCounters();
  const app = createProxyApp({ engine, store, sessions: opts.sessions ?? adHocSessions(), clock: fixedClock(), newId: sequentialIds(), options: opts.options, counters, onRecord: opts.onRecord });
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: app.fetch, idleTimeout: 0 });
  return {
    url: `http://127.0.0.1:${server.port}`,
    store,
    app,
    counters,
    async stop() {
      await server.stop(true);
      store.close();
    },
  };
}

export type EngineShape = 'vllm' | 'sglang';

/**
 * One fake engine (served model `qwen3-test`) and one test proxy in front of it for each engine shape, started in
 * beforeAll and stopped in afterAll of the calling test file. The returned records are filled in beforeAll.
 */
export function useProxyPerShape(opts: { script: FakeEngineOptions['script']; timeoutMs: number }): {
  engines: Record<EngineShape, FakeEngine>;
  proxies: Record<EngineShape, TestProxy>;
} {
  const engines = {} as Record<EngineShape, FakeEngine>;
  const proxies = {} as Record<EngineShape, TestProxy>;
  beforeAll(async () => {
    for (const shape of ['vllm', 'sglang'] as const) {
      engines[shape] = await startFakeEngine({ shape, servedModel: 'qwen3-test', script: opts.script });
      proxies[shape] = await startTestProxy({ engineUrl: engines[shape].url, kind: shape, timeoutMs: opts.timeoutMs, options: { keepaliveIntervalMs: 50 } });
    }
  });
  afterAll(async () => {
    for (const shape of ['vllm', 'sglang'] as const) {
      await proxies[shape]?.stop();
      await engines[shape]?.stop();
    }
  });
  return { engines, proxies };
}

/**
 * A fake-engine script that picks a scenario by a `scenario:<name>` marker in the last user message, so one engine
 * serves a whole matrix; no marker (or an unknown name) → `scenarios.text`.
 */
export function scenarioByMarker(scenarios: Record<string, FakeReply>): (body: Record<string, unknown>) => FakeReply {
  return (body) => {
    const users = (body.messages as { role: string }[]).filter((m) => m.role === 'user');
    const name = /scenario:(\w+)/.exec(JSON.stringify(users.at(-1)))?.[1];
    return name !== undefined && Object.hasOwn(scenarios, name) ? scenarios[name]! : scenarios.text!;
  };
}

/** The completion records the proxy captured for a session (`GET /sessions/:id/completions`), in order. */
export async function sessionRecords(proxy: TestProxy, session: string): Promise<CompletionRecord[]> {
  const response = await fetch(`${proxy.url}/sessions/${session}/completions`, { headers: { authorization: `Bearer ${session}` } });
  expect(response.status).toBe(200);
  return ((await response.json()) as { completions: CompletionRecord[] }).completions;
}

/** What the fake engine samples for a reply: the ids of a Qwen3-style rendering, + EOS unless truncated by length. */
export function expectedResponseIds(reply: FakeReply): number[] {
  let text = '';
  if ('reasoning' in reply && reply.reasoning) text += `<think>\n${reply.reasoning}\n</think>\n\n`;
  if (reply.kind === 'tool-calls') for (const call of reply.calls) text += `<tool_call>\n${JSON.stringify({ name: call.name, arguments: call.arguments })}\n</tool_call>`;
  else if (reply.kind === 'text' || reply.kind === 'length') text += reply.text;
  const ids = fakeIds(text);
  if (reply.kind !== 'length') ids.push(EOS_ID);
  return ids;
}
