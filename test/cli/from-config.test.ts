/**
 * The config → gateway node mapping (src/cli/from-config.ts) that `polar serve` and `polar gateway` share: the
 * documented `runtime.binary` reaches the runtime (a recording CLI at a custom path is the one called), the other
 * runtime keys map to the runtime defaults, and relative paths resolve against the given base, not a session's work dir;
 * `gateway.engine_wait_s` and `gateway.engine_handback_s` (seconds) reach the node as ms and change when a waiting
 * session is handed back or fails.
 */
import { expect, test } from 'bun:test';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { engineOutageFromConfig, engineSpecFromConfig, nodeSettingsFromConfig, runtimeDefaultsFromConfig } from '../../src/cli/from-config.ts';
import { resolveConfig } from '../../src/config/load.ts';
import { engineSchema } from '../../src/config/sections/engine.ts';
import { gatewayNodeSchema, runtimeSchema } from '../../src/config/sections/gateway.ts';
import type { TaskRequest } from '../../src/core/records.ts';
import { GatewayNode } from '../../src/gateway/node.ts';
import { parseRuntimeSpec } from '../../src/gateway/runtimes/index.ts';
import { openStore } from '../../src/store/index.ts';
import { until } from '../support/poll.ts';
import { taskRequest } from '../support/tasks.ts';
import { useTempStores } from '../support/temp-stores.ts';

const temp = useTempStores('polar-from-config-');

/** A container CLI stand-in that appends its argv to `log` and refuses every command. */
function recordingCli(dir: string, log: string): string {
  const bin = join(dir, 'opt', 'bin', 'my-docker');
  mkdirSync(join(dir, 'opt', 'bin'), { recursive: true });
  writeFileSync(bin, `#!/bin/sh\necho "$*" >> '${log}'\necho "recording CLI refuses: $1" >&2\nexit 3\n`);
  chmodSync(bin, 0o755);
  return bin;
}

test('runtime.binary: the session runtime calls the configured CLI path, not the kind name on PATH', async () => {
  const dir = temp.tempDir();
  const log = join(dir, 'calls.log');
  const binary = recordingCli(dir, log);
  const nodeConfig = gatewayNodeSchema.parse({ node_id: 'n1', port: 0, runtime: { kind: 'docker', image: 'example/img:1', binary } });
  const store = openStore(join(dir, 'db.sqlite'));
  temp.stores.push(store);
  const node = new GatewayNode({ ...nodeSettingsFromConfig(nodeConfig, dir), store, harnessLogDir: null });
  await node.start();
  try {
    const task: TaskRequest = {
      task_id: 't', instruction: 'x', num_samples: 1, timeout_seconds: 30,
      agent: { command: 'true', model_name: 'm' }, builder: { strategy: 'per_request' },
    };
    node.dispatch({ session_id: 's1', task, sample_index: 0 });
    const result = await node.wait('s1');
    expect(result.status).toBe('ERROR');
    expect(result.error).toContain('recording CLI refuses: run');
    const calls = readFileSync(log, 'utf8').trim().split('\n');
    expect(calls[0]).toStartWith('run -d --rm --init --name polar-');
    expect(calls[0]).toContain('example/img:1');
  } finally {
    await node.stop();
  }
});

test('without runtime.binary the runtime CLI is the kind name; a task cannot name a host binary', () => {
  expect(runtimeDefaultsFromConfig(runtimeSchema.parse({ kind: 'podman', image: 'i' }))).toEqual({ kind: 'podman', image: 'i', isolation: 'bwrap', network: 'gateway' });
  expect(runtimeDefaultsFromConfig(runtimeSchema.parse({ kind: 'apptainer', image: 'i.sif', binary: '/x/apptainer', isolation: 'none', network: 'host', extra_args: ['--a'], limits: { memory: '2g', pids: 64 } })))
    .toEqual({ kind: 'apptainer', image: 'i.sif', isolation: 'none', network: 'host', run_args: ['--a'], binary: '/x/apptainer', limits: { memory: '2g', pids: 64 } });
  expect(() => parseRuntimeSpec({ kind: 'docker', image: 'i', binary: '/tmp/evil' })).toThrow(/binary: unknown key/);
  // The node default still applies under a task's own section.
  expect(parseRuntimeSpec({ kind: 'docker', image: 'i' }, { binary: '/opt/podman' }).binary).toBe('/opt/podman');
});

test('relative work_root and harness_cache_dir resolve against the base directory', () => {
  const settings = nodeSettingsFromConfig(gatewayNodeSchema.parse({ work_root: 'w', harness_cache_dir: 'cache/h' }), '/srv/polar');
  expect(settings.workRoot).toBe('/srv/polar/w');
  expect(settings.harnessCacheDir).toBe('/srv/polar/cache/h');
  expect(existsSync(settings.workRoot)).toBe(false);
});

test('engine section → engine spec: seconds to ms, sampling defaults, system message placement', () => {
  const spec = engineSpecFromConfig(engineSchema.parse({ kind: 'vllm', url: 'http://127.0.0.1:9', timeout_s: 2, system_messages: 'in_place', default_sampling: { max_tokens: 7 } }));
  expect(spec).toMatchObject({ kind: 'vllm', url: 'http://127.0.0.1:9', timeoutMs: 2000, systemMessages: 'in-place', defaults: { temperature: 1, maxTokens: 7 } });
  // engine.stream reaches the engine client (what it changes: test/proxy/streaming.test.ts, test/proxy/cli-stream.test.ts).
  expect(spec.stream).toBe('auto');
  expect(engineSpecFromConfig(engineSchema.parse({ stream: 'never' })).stream).toBe('never');
});

test('gateway.engine_wait_s / engine_handback_s → engineWaitMs / engineHandbackMs: seconds to ms, null stays null', () => {
  const gateway = (g: object) => resolveConfig({ gateway: g }, { env: {} }).gateway;
  expect(engineOutageFromConfig(gateway({}))).toEqual({ engineWaitMs: 600_000, engineHandbackMs: 60_000 });
  expect(engineOutageFromConfig(gateway({ engine_handback_s: 2 }))).toEqual({ engineWaitMs: 600_000, engineHandbackMs: 2000 });
  expect(engineOutageFromConfig(gateway({ engine_wait_s: 30, engine_handback_s: 0.25 }))).toEqual({ engineWaitMs: 30_000, engineHandbackMs: 250 });
  expect(engineOutageFromConfig(gateway({ engine_wait_s: 0, engine_handback_s: null }))).toEqual({ engineWaitMs: 0, engineHandbackMs: null });
});

test('a node built from the gateway section hands a waiting session back after engine_handback_s; with null it never does and fails after engine_wait_s', async () => {
  const dir = temp.tempDir();
  const handbacks: { session_ids: string[]; reason: string }[] = [];
  const rollout = Bun.serve({
    hostname: '127.0.0.1', port: 0,
    fetch: async (req) => {
      const body = (await req.json().catch(() => ({}))) as { session_ids: string[]; reason: string };
      if (new URL(req.url).pathname.endsWith('/handback')) {
        handbacks.push(body);
        return Response.json({ node_id: 'n', requeued: body.session_ids });
      }
      return Response.json({ ok: true });
    },
  });
  const store = openStore(join(dir, 'db.sqlite'));
  temp.stores.push(store);
  const nodes: GatewayNode[] = [];
  const start = async (gateway: object) => {
    const node = new GatewayNode({
      nodeId: 'n', store, workRoot: join(dir, 'work'), harnessLogDir: null, engineWaitPollMs: 20,
      engineHealth: () => ({ ok: false, error: 'connect ECONNREFUSED 127.0.0.1:9' }),
      rollout: { url: `http://127.0.0.1:${rollout.port}`, heartbeatIntervalMs: 10_000 },
      ...engineOutageFromConfig(resolveConfig({ gateway }, { env: {} }).gateway),
    });
    nodes.push(node);
    await node.start();
    return node;
  };
  const task = taskRequest('t', { num_samples: 1, timeout_seconds: 30, agent: { command: 'true', model_name: 'm' } });
  try {
    // engine_handback_s 0.3: offered once it has waited 0.3 s, released when the server takes it (no result here).
    const handing = await start({ engine_wait_s: 30, engine_handback_s: 0.3 });
    const t0 = Date.now();
    handing.dispatch({ session_id: 'h1', task, sample_index: 0 });
    await until(() => handing.get('h1') === null, 5000);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
    expect(handbacks).toHaveLength(1);
    expect(handbacks[0]!.session_ids).toEqual(['h1']);
    expect(handbacks[0]!.reason).toMatch(/^engine down for [\d.]+ s \(gateway\.engine_handback_s 0\.3\): connect ECONNREFUSED/);
    expect(store.results.get('h1')).toBeNull();
    // engine_handback_s null: never offered; engine_wait_s 0.5 then ends it ERROR on this node.
    const keeping = await start({ engine_wait_s: 0.5, engine_handback_s: null });
    keeping.dispatch({ session_id: 'k1', task, sample_index: 0 });
    const result = await keeping.wait('k1');
    expect(result.status).toBe('ERROR');
    expect(result.error).toMatch(/^engine down: not started after waiting [\d.]+ s for the engine \(gateway\.engine_wait_s 0\.5\)/);
    expect(handbacks).toHaveLength(1);
  } finally {
    for (const node of nodes) await node.stop({ graceMs: 100 });
    rollout.stop(true);
  }
});
