/**
 * End to end: the real pi CLI, through a gateway node (local runtime, proxy on the same port), against the in-process
 * simulator with a registered behaviour script, fixes a small repository's failing test: test_on_output gives 1;
 * the give-up variant gives 0. Runs only in a loopback-only network namespace (`npm test` or scripts/test.mjs).
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse } from 'yaml';
import type { TaskRequest } from '../../src/core/records.ts';
import { createEngineClient } from '../../src/engines/index.ts';
import { GatewayNode } from '../../src/gateway/node.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { SimServer } from '../../src/sim/server.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { HARNESS_CACHE, harnessBin } from '../support/install-harnesses.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';

const example = resolve(import.meta.dir, '../../examples/tasks/range-sum');
const script = parse(await Bun.file(join(example, 'sim.yaml')).text()) as { variants: Record<string, { steps: unknown[] }> };
const isolated = networkIsolated();
const root = mkdtempSync(join(tmpdir(), 'polar-e2e-pi-'));
let sim: SimServer;
let store: Store;
let node: GatewayNode;

beforeAll(async () => {
  if (!isolated) return;
  sim = await SimServer.start({ decodeTps: 0, prefillTps: 0 });
  // One variant per task id, so each session's behaviour is fixed whatever its id hashes to.
  sim.registerScript('range-sum-solve', { variants: { solve: { weight: 1, steps: script.variants.solve!.steps } } });
  sim.registerScript('range-sum-give-up', { variants: { give_up: { weight: 1, steps: script.variants.give_up!.steps } } });
  store = openStore(join(root, 'polar.db'));
  const engine = createEngineClient({ kind: 'sim', url: sim.url, mode: 'chat', timeoutMs: 30_000 });
  node = new GatewayNode({
    nodeId: 'e2e', store, workRoot: join(root, 'work'), harnessCacheDir: HARNESS_CACHE, autoInstallHarness: false,
    runtimeDefaults: { isolation: 'none' },
    proxy: (sessions) => createProxyApp({ engine, store, sessions }),
  });
  await node.start();
});
afterAll(async () => {
  if (!isolated) return;
  await node.stop();
  await sim.stop();
  store.close();
  rmSync(root, { recursive: true, force: true });
});

function task(taskId: string): TaskRequest {
  return {
    task_id: taskId,
    instruction: 'The unit tests of the Python project in the current directory fail. Fix the bug in ranges.py. Say "done" when the tests pass.',
    num_samples: 1, timeout_seconds: 50,
    agent: { harness: 'pi', model_name: 'qwen3-sim', settings: { api: 'anthropic-messages' } },
    builder: { strategy: 'prefix_merging' },
    runtime: { kind: 'local', prepare: [{ upload_dir: { src: join(example, 'repo'), dest: '.' } }] },
    evaluator: { strategy: 'test_on_output', config: { command: 'python3 -m unittest -q', expect_exit_code: 0 } },
    metadata: { agent_timeout: 45 },
  };
}

test.skipIf(!isolated)(`pi fixes the failing test through the gateway: reward 1; a give-up session: reward 0 ${NEEDS_ISOLATION}`, async () => {
  expect(harnessBin('@mariozechner/pi-coding-agent', '0.73.1', 'pi')).not.toBeNull();
  node.dispatch({ session_id: `ps_solve_${crypto.randomUUID()}`, task: task('range-sum-solve'), sample_index: 0 });
  node.dispatch({ session_id: `ps_giveup_${crypto.randomUUID()}`, task: task('range-sum-give-up'), sample_index: 1 });
  const ids = [...(node as unknown as { sessions: Map<string, unknown> }).sessions.keys()];
  const [solved, gaveUp] = await Promise.all(ids.map((id) => node.wait(id)));
  const detail = (r: typeof solved) => JSON.stringify({ status: r!.status, error: r!.error, eval: r!.trajectory.metadata.evaluation, harness: r!.trajectory.metadata.harness_outcome });
  expect(solved!.status, detail(solved)).toBe('COMPLETED');
  expect(solved!.trajectory.metadata.evaluation?.outcome_reward, detail(solved)).toBe(1);
  expect((solved!.trajectory.metadata.harness_outcome as { success: boolean }).success).toBe(true);
  // pi's calls were captured: 3 shell steps + the final answer = 4 completions, merged into one chain.
  expect(store.completions.listBySession(solved!.session_id).length).toBe(4);
  expect(solved!.trajectory.traces.length).toBeGreaterThanOrEqual(1);
  expect(solved!.trajectory.traces.every((t) => t.reward === 1)).toBe(true);
  expect(gaveUp!.status, detail(gaveUp)).toBe('COMPLETED');
  expect(gaveUp!.trajectory.metadata.evaluation?.outcome_reward, detail(gaveUp)).toBe(0);
  expect(store.completions.listBySession(gaveUp!.session_id).length).toBe(2);
}, 60_000);
