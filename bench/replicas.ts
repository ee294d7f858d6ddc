/**
 * Engine replicas: prefix reuse with and without session affinity (src/engines/replicas.ts). Two in-process
 * simulators, each with its own per-session prefix cache (src/sim/server.ts `cachedPrefix`: the prompt tokens that
 * extend the session's previous prompt + sampled ids on that replica are not prefilled again), behind one
 * ReplicaRouter in chat mode. N sessions run K turns each, all sessions at once with a short varied think time; every turn appends ~300 tokens of
 * user text to the conversation. Reported: prompt tokens, tokens served from the prefix cache, the cache hit rate,
 * the prefill tokens recomputed, calls that landed on another replica than the session's previous call, and wall time
 * (prefill 20 000 tok/s, decode 2 000 tok/s, so recomputed prefixes cost time).
 * Run: bun bench/replicas.ts [--quick] [affinity | no-affinity]
 */
import { Registry } from 'prom-client';
import { createEngineClient, ReplicaRouter } from '../src/engines/index.ts';
import type { IRRequest } from '../src/core/ir.ts';
import { replicaMetrics } from '../src/observe/replica-metrics.ts';
import { SimServer } from '../src/sim/server.ts';
import { defineBench } from './lib/bench.ts';

const PARAGRAPH = 'The build failed in the parser module because a token boundary was misread when the input ended with a comment. '.repeat(14);

await defineBench({
  name: 'replicas',
  variants: () => ['affinity', 'no-affinity'],
  async run(variant, ctx) {
    const affinity = variant === 'affinity';
    const sessions = ctx.quick ? 8 : 32;
    const turns = ctx.quick ? 4 : 8;
    const sims = await Promise.all([0, 1].map(() => SimServer.start({ port: 0, prefillTps: 20_000, decodeTps: 2_000, maxConcurrency: 64 })));
    const registry = new Registry();
    const engine = createEngineClient({
      kind: 'sim', url: sims[0]!.url, urls: sims.map((s) => s.url), mode: 'chat', timeoutMs: 60_000, log: () => {},
      replicas: { healthIntervalMs: 0, affinity, metrics: replicaMetrics(registry) },
    }) as ReplicaRouter;
    try {
      await engine.probe();
      const before = sims.map((s) => s.metrics());
      let moved = 0;
      const t0 = performance.now();
      await Promise.all(Array.from({ length: sessions }, async (_, s) => {
        const messages: IRRequest['messages'] = [];
        let last: string | undefined;
        for (let k = 0; k < turns; k++) {
          // Think time between turns (a tool running), 0–45 ms, varied per session and turn so load shifts between replicas.
          await Bun.sleep(((s * 7 + k * 13) % 10) * 5);
          messages.push({ role: 'user', content: [{ type: 'text', text: `Turn ${k} of session ${s}. ${PARAGRAPH}` }] });
          const request = { model: 'm', system: [], messages, tools: [], sampling: { maxTokens: 32, temperature: 1 }, stream: false, warnings: [] } as unknown as IRRequest;
          const done = await engine.complete(request, { sessionId: `bench-${s}`, requestId: `r-${s}-${k}` });
          if (last !== undefined && done.engineId !== last) moved++;
          last = done.engineId;
          messages.push({ role: 'assistant', content: done.response.content, ...(done.response.reasoning ? { reasoning: done.response.reasoning } : {}) });
        }
      }));
      const wallS = (performance.now() - t0) / 1000;
      const after = sims.map((s) => s.metrics());
      const prompt = after.reduce((n, m, i) => n + m.promptTokens - before[i]!.promptTokens, 0);
      const cached = after.reduce((n, m, i) => n + m.cachedTokens - before[i]!.cachedTokens, 0);
      const calls = after.map((m, i) => m.requests - before[i]!.requests);
      return {
        title: 'replicas · prefix reuse across 2 simulator replicas, with and without session affinity',
        columns: ['routing', 'sessions', 'turns', 'prompt tokens', 'cached tokens', 'cache hit', 'prefill recomputed', 'calls moved', 'calls per replica', 'wall s'],
        rows: [[variant, sessions, turns, prompt, cached, cached / prompt, prompt - cached, moved, calls.join(' / '), wallS]],
        keyColumns: 1,
        notes: [
          `${sessions} sessions × ${turns} turns at once, 0–45 ms think time before each turn, ~300 new prompt tokens per turn, 32 sampled tokens; simulators: prefill 20 000 tok/s, decode 2 000 tok/s, prefix cache per session per replica.`,
          'affinity: a session sticks to its replica; no-affinity: each call goes to the replica with the fewest calls in flight. calls moved = turns that ran on another replica than the turn before.',
        ],
      };
    } finally {
      engine.close();
      await Promise.all(sims.map((s) => s.stop()));
    }
  },
});
