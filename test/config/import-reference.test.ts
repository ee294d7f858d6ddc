/**
 * `polar config import`: a Python Polar topology (ProRL-Agent-Server TopologyConfig) becomes a config our strict
 * schema accepts, with a note for every key left out; unknown keys and what cannot be expressed are exit 2.
 */
import { expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { importReferenceTopology } from '../../src/config/import-reference.ts';
import { resolveConfig } from '../../src/config/load.ts';
import { REPO_ROOT, runPolar, useScratch } from '../support/polar-cli.ts';

const scratch = useScratch('polar-import-');
const fixture = join(REPO_ROOT, 'test/fixtures/reference/topology.yaml');

test('the fixture converts field by field and our loader accepts the result', async () => {
  const out = join(scratch.dir, 'ours.yaml');
  const run = await runPolar(['config', 'import', fixture, '-o', out]);
  expect(run.code).toBe(0);
  const config = resolveConfig(parse(await Bun.file(out).text()), { env: {} });
  expect(config.engine).toMatchObject({ kind: 'vllm', url: 'http://127.0.0.1:8000', served_model: 'Qwen/Qwen3-8B' });
  expect(config.rollout).toMatchObject({ host: '0.0.0.0', port: 8080 });
  expect(config.gateway.rollout_url).toBe('http://10.0.0.5:8080');
  expect(config.gateway.heartbeat_interval_s).toBe(30);
  expect(config.gateway.nodes[0]).toMatchObject({ node_id: 'node-a', port: 8081, public_url: 'http://10.0.0.6:8081', init_workers: 8, max_run_workers: 16, postrun_workers: 4, runtime: { kind: 'apptainer', image: '/images/swe.sif' } });
  expect(config.gateway.nodes[1]).toMatchObject({ node_id: 'node-b', port: 8082, init_workers: 4, max_run_workers: 2, postrun_workers: 4 });
  for (const key of ['rollout.save_dir', 'rollout.dispatch_poll_interval_seconds', 'gateway.completion_persistence', 'gateway.nodes[0].default_runtime: workdir', 'gateway.nodes[1].id']) expect(run.stderr).toContain(key);
  // Paths are written as everywhere else in the tool (config check: gateway.nodes[0].port), never nodes.0.
  expect(run.stderr).not.toMatch(/nodes\.\d/);
});

test('`polar config check` accepts the converted file (it rejects the reference one)', async () => {
  const out = join(scratch.dir, 'checked.yaml');
  expect((await runPolar(['config', 'import', fixture, '-o', out])).code).toBe(0);
  expect((await runPolar(['config', 'check', out])).code).toBe(0);
  const check = await runPolar(['config', 'check', fixture]);
  expect(check.code).toBe(2);
  expect(check.stderr).toContain('is a Python Polar topology: convert it with `polar config import');
});

test('the serving commands read a reference topology as converted (serve_rollout -c topology.yaml), notes on stderr', async () => {
  // The fixture's rollout listens on 0.0.0.0 without a token: the converted config gets as far as our listen check.
  const run = await runPolar(['serve_rollout', '-c', fixture]);
  expect(run.code).toBe(2);
  expect(run.stderr).toContain('is a Python Polar topology; reading it as `polar config import');
  expect(run.stderr).toContain('note: rollout.save_dir');
  expect(run.stderr).toContain('rollout.host');
  expect(run.stderr).toMatch(/token/);
  // A file that is neither ours nor the reference's is still exit 2 with our schema's issues.
  const bad = join(scratch.dir, 'neither.yaml');
  writeFileSync(bad, 'rollout: {prot: 1}\n');
  const neither = await runPolar(['serve_rollout', '-c', bad]);
  expect(neither.code).toBe(2);
  expect(neither.stderr).toContain('rollout.prot');
});

test('an unknown key is exit 2 naming its path', async () => {
  const bad = join(scratch.dir, 'bad.yaml');
  writeFileSync(bad, 'gateway:\n  nodes:\n    - id: a\n      max_workers: 3\n');
  const run = await runPolar(['config', 'import', bad]);
  expect(run.code).toBe(2);
  expect(run.stderr).toContain('gateway.nodes[0]: Unrecognized key: "max_workers"');
  expect(run.stderr).not.toMatch(/nodes\.\d/);
});

test('model pools and nodes on different engines cannot be expressed: errors, not silent loss', () => {
  const base = { gateway: { nodes: [{ id: 'a', inference: { engine: 'vllm', base_url: 'http://127.0.0.1:1' } }, { id: 'b', model_pool: [{ alias: 'pool/x', model: 'm', base_url: 'http://h', api_key_env: 'K' }] }] } };
  expect(() => importReferenceTopology(base)).toThrow(/different engines[\s\S]*gateway\.nodes\[1\]\.model_pool: /);
});

test('reference defaults fill what the file leaves out (ports 8080/8081, public URLs on 127.0.0.1)', () => {
  const { config } = importReferenceTopology({ gateway: { nodes: [{ id: 'n' }] } });
  expect(config).toMatchObject({ rollout: { host: '0.0.0.0', port: 8080 }, engine: { kind: 'sglang', url: 'http://127.0.0.1:8000' }, gateway: { rollout_url: 'http://127.0.0.1:8080', heartbeat_interval_s: 30, nodes: [{ node_id: 'n', port: 8081, public_url: 'http://127.0.0.1:8081', init_workers: 4, max_run_workers: 2, postrun_workers: 4 }] } });
});
