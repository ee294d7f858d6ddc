/**
 * `polar serve --with-sim`: the `engine` section's serving settings (default_sampling, timeout_s, stream,
 * allow_golden_mismatch, an explicit system_messages) apply to the in-process simulator as to any engine
 * (src/cli/from-config.ts simEngineFromConfig → startLocalStack `simEngine`); only where the engine is (kind, url,
 * urls, api_key, served_model) is the simulator's.
 */
import { expect, test } from 'bun:test';
import { join } from 'node:path';
import { simEngineFromConfig } from '../../src/cli/from-config.ts';
import { engineSchema } from '../../src/config/sections/engine.ts';
import type { IRRequest } from '../../src/core/ir.ts';
import { startLocalStack } from '../../src/stack/local-stack.ts';
import { openStore } from '../../src/store/index.ts';
import { useTempStores } from '../support/temp-stores.ts';

const temp = useTempStores('polar-with-sim-engine-');

const request: IRRequest = {
  version: 1, model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'Tell me a long story.' }] }], tools: [], sampling: {}, stream: false, warnings: [],
};

test('simEngineFromConfig keeps the serving settings and leaves auto placement to the stack', () => {
  const engine = engineSchema.parse({ kind: 'vllm', url: 'http://10.0.0.1:8000', api_key: 'k', timeout_s: 7, stream: 'never', default_sampling: { temperature: 0.3, max_tokens: 5 } });
  expect(simEngineFromConfig(engine)).toEqual({
    timeoutMs: 7000, stream: 'never', allowGoldenMismatch: false,
    defaults: { temperature: 0.3, topP: 1, topK: -1, minP: 0, maxTokens: 5 },
  });
  expect(simEngineFromConfig(engineSchema.parse({ system_messages: 'merge' })).systemMessages).toBe('merge');
  expect(simEngineFromConfig(engineSchema.parse({ system_messages: 'in_place' })).systemMessages).toBe('in-place');
});

test('startLocalStack simEngine: default_sampling.max_tokens caps the in-process simulator\'s answers', async () => {
  const dir = temp.tempDir();
  const lengths: number[] = [];
  for (const simEngine of [undefined, { defaults: { maxTokens: 3 } }]) {
    const store = openStore(join(dir, `${lengths.length}.db`));
    temp.stores.push(store);
    const stack = await startLocalStack({ store, sim: { prefillTps: 0, decodeTps: 0 }, ...(simEngine ? { simEngine } : {}), node: { workRoot: join(dir, `work${lengths.length}`) } });
    try {
      const result = await stack.engine.complete(request, { sessionId: 's', requestId: `r${lengths.length}` });
      lengths.push(result.capture!.responseIds.length);
    } finally {
      await stack.stop();
    }
  }
  expect(lengths[0]).toBeGreaterThan(3);
  expect(lengths[1]).toBe(3);
}, 60_000);
