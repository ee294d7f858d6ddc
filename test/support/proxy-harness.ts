/**
 * Test helper: a proxy (createProxyApp) on Bun.serve({port: 0}) in front of a fake engine, with an in-memory store and
 * injected clock/ids. Reused by the proxy tests and the e2e tests.
 */
import { fixedClock } from '../../src/core/clock.ts';
import { sequentialIds } from '../../src/core/ids.ts';
import { createEngineClient } from '../../src/engines/index.ts';
import type { EngineKind } from '../../src/engines/types.ts';
import { createProxyApp, type ProxyApp } from '../../src/proxy/app.ts';
import { adHocSessions } from '../../src/proxy/sessions.ts';
import { newProxyCounters, type ProxyCounters, type ProxyOptions, type SessionDirectory } from '../../src/proxy/types.ts';
import { openStore, type Store } from '../../src/store/index.ts';

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
}): Promise<TestProxy> {
  const store = openStore(':memory:');
  const engine = createEngineClient({ kind: opts.kind, url: opts.engineUrl, mode: 'chat', timeoutMs: opts.timeoutMs ?? 5000, now: fixedClock(), newId: sequentialIds() });
  await engine.probe();
  const counters = newProxyCounters();
  const app = createProxyApp({ engine, store, sessions: opts.sessions ?? adHocSessions(), clock: fixedClock(), newId: sequentialIds(), options: opts.options, counters });
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
