/**
 * The config → gateway node mapping (src/cli/from-config.ts) that `polar serve` and `polar gateway` share: the
 * documented `runtime.binary` reaches the runtime (a recording CLI at a custom path is the one called), the other
 * runtime keys map to the runtime defaults, and relative paths resolve against the given base, not a session's work dir.
 */
import { expect, test } from 'bun:test';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { engineSpecFromConfig, nodeSettingsFromConfig, runtimeDefaultsFromConfig } from '../../src/cli/from-config.ts';
import { engineSchema } from '../../src/config/sections/engine.ts';
import { gatewayNodeSchema, runtimeSchema } from '../../src/config/sections/gateway.ts';
import type { TaskRequest } from '../../src/core/records.ts';
import { GatewayNode } from '../../src/gateway/node.ts';
import { parseRuntimeSpec } from '../../src/gateway/runtimes/index.ts';
import { openStore } from '../../src/store/index.ts';
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
