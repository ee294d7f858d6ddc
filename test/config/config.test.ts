/** Topology config: strict validation with full key paths, defaults, env references, secrets, `polar config check`. */
import { describe, expect, test } from 'bun:test';
import { join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ConfigError, closestKey, formatPath, loadConfig, parseConfigText, redactConfig, resolveConfig } from '../../src/config/load.ts';
import type { PolarConfig } from '../../src/config/schema.ts';

const root = resolve(import.meta.dir, '..', '..');
const fixtures = join(root, 'test/fixtures/config');
const bun = process.execPath;

function issuesOf(fn: () => unknown): { path: string; message: string }[] {
  try {
    fn();
  } catch (error) {
    if (error instanceof ConfigError) return error.issues;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

describe('resolveConfig', () => {
  test('an empty config fills every default, including nested sections and the default node', () => {
    const config = resolveConfig({}, { env: {} });
    expect(config.engine).toMatchObject({ kind: 'sim', mode: 'chat', api_key: null, default_sampling: { temperature: 1, top_k: -1, max_tokens: null } });
    expect(config.proxy).toEqual({ strip_billing_header: true, restore_reasoning: false, keepalive_interval_ms: 5000, max_body_bytes: 64 * 1024 * 1024 });
    expect(config.gateway.nodes).toHaveLength(1);
    expect(config.gateway.nodes[0]!.runtime.kind).toBe('local');
    expect(config.rollout.control_plane_token).toBeNull();
    expect(resolveConfig(null, { env: {} })).toEqual(config);
  });

  test('defaults fill around given values inside array items', () => {
    const config = resolveConfig({ gateway: { nodes: [{ node_id: 'a', max_run_workers: 3 }, { node_id: 'b', port: 8091, runtime: { kind: 'podman' } }] } }, { env: {} });
    expect(config.gateway.nodes.map((n) => [n.node_id, n.max_run_workers, n.runtime.kind, n.init_workers])).toEqual([
      ['a', 3, 'local', 4],
      ['b', 8, 'podman', 4],
    ]);
  });

  test('an unknown key names its full path with a did-you-mean hint', () => {
    const issues = issuesOf(() => resolveConfig({ gateway: { nodes: [{ max_run_worker: 3 }] } }, { env: {} }));
    expect(issues).toEqual([{ path: 'gateway.nodes[0].max_run_worker', message: 'unknown key; did you mean "max_run_workers"?' }]);
  });

  test('an unknown key far from every known one lists the known keys', () => {
    const issues = issuesOf(() => resolveConfig({ store: { location: 'x' } }, { env: {} }));
    expect(issues).toEqual([{ path: 'store.location', message: 'unknown key (known keys: path)' }]);
  });

  test('every problem is reported at once: unknown keys, wrong types, enums, ranges, duplicates', () => {
    const issues = issuesOf(() =>
      resolveConfig(
        {
          engine: { kind: 'tgi', timeout_s: -1, default_sampling: { top_p: 2 } },
          proxy: { max_body_bytes: 0 },
          gateway: { nodes: [{ node_id: 'x' }, { node_id: 'x', port: '80' }] },
          extra: true,
        },
        { env: {} },
      ),
    );
    const paths = issues.map((i) => i.path).sort();
    expect(paths).toEqual(['engine.default_sampling.top_p', 'engine.kind', 'engine.timeout_s', 'extra', 'gateway.nodes[1].port', 'proxy.max_body_bytes'].sort());
    expect(issues.find((i) => i.path === 'engine.kind')!.message).toContain('vllm');
    // The duplicate-id check runs once the items themselves are valid.
    expect(issuesOf(() => resolveConfig({ gateway: { nodes: [{ node_id: 'x' }, { node_id: 'x', port: 8091 }] } }, { env: {} }))).toEqual([
      { path: 'gateway.nodes[1].node_id', message: 'duplicate node_id "x"' },
    ]);
  });

  test('runtime.limits.memory must be a size the runtime can parse (bytes, 512m, 2g)', () => {
    const limits = (memory: unknown) => ({ gateway: { nodes: [{ node_id: 'a' }, { node_id: 'b', port: 0, runtime: { limits: { memory } } }] } });
    expect(issuesOf(() => resolveConfig(limits('lots'), { env: {} }))).toEqual([
      { path: 'gateway.nodes[1].runtime.limits.memory', message: 'memory "lots" is not a size (e.g. 512m, 2g or a byte count)' },
    ]);
    expect(issuesOf(() => resolveConfig(limits('0g'), { env: {} }))[0]!.path).toBe('gateway.nodes[1].runtime.limits.memory');
    for (const ok of ['512m', '2g', '2GiB', '100k', 1048576]) expect(resolveConfig(limits(ok), { env: {} }).gateway.nodes[1]!.runtime.limits.memory).toBe(ok);
  });

  test('gateway.engine_handback_s at or above gateway.engine_wait_s is an error naming both; null hands back never and passes', () => {
    const gateway = (g: object) => ({ gateway: g });
    const message = (h: number, w: number) =>
      `${h} s is not below gateway.engine_wait_s (${w} s): a session waiting for a down engine ends ERROR after gateway.engine_wait_s before it could be handed back; make gateway.engine_handback_s smaller than gateway.engine_wait_s, or null to never hand back`;
    expect(issuesOf(() => resolveConfig(gateway({ engine_wait_s: 60, engine_handback_s: 60 }), { env: {} }))).toEqual([{ path: 'gateway.engine_handback_s', message: message(60, 60) }]);
    expect(issuesOf(() => resolveConfig(gateway({ engine_wait_s: 30, engine_handback_s: 90 }), { env: {} }))).toEqual([{ path: 'gateway.engine_handback_s', message: message(90, 30) }]);
    // The default handback (60 s) against a shorter wait, and a wait of 0 (fail at once) with any handback.
    expect(issuesOf(() => resolveConfig(gateway({ engine_wait_s: 45 }), { env: {} }))).toEqual([{ path: 'gateway.engine_handback_s', message: message(60, 45) }]);
    expect(issuesOf(() => resolveConfig(gateway({ engine_wait_s: 0, engine_handback_s: 0 }), { env: {} }))).toEqual([{ path: 'gateway.engine_handback_s', message: message(0, 0) }]);
    // Fine: below it, the defaults (60 < 600), and null (never hand back) whatever the wait.
    expect(resolveConfig(gateway({ engine_wait_s: 60, engine_handback_s: 59.5 }), { env: {} }).gateway.engine_handback_s).toBe(59.5);
    expect(resolveConfig({}, { env: {} }).gateway).toMatchObject({ engine_wait_s: 600, engine_handback_s: 60 });
    expect(resolveConfig(gateway({ engine_wait_s: 0, engine_handback_s: null }), { env: {} }).gateway.engine_handback_s).toBeNull();
    // Reported with the section's other problems, not instead of them; a negative wait is its own problem only.
    expect(issuesOf(() => resolveConfig(gateway({ engine_wait_s: 10, heartbeat_interval_s: 0 }), { env: {} })).map((i) => i.path).sort())
      .toEqual(['gateway.engine_handback_s', 'gateway.heartbeat_interval_s']);
    expect(issuesOf(() => resolveConfig(gateway({ engine_wait_s: -5, engine_handback_s: 10 }), { env: {} })).map((i) => i.path)).toEqual(['gateway.engine_wait_s']);
  });

  test('two listeners on one address: nodes sharing host:port, a node on the rollout server\'s port', () => {
    const nodes = (...list: object[]) => ({ gateway: { nodes: list.map((n, i) => ({ node_id: `n${i}`, ...n })) } });
    expect(issuesOf(() => resolveConfig(nodes({ port: 8090 }, { port: 8091 }, { port: 8090 }), { env: {} }))).toEqual([
      { path: 'gateway.nodes[2].port', message: '127.0.0.1:8090 is also the address of gateway.nodes[0] (gateway.nodes[0].host, gateway.nodes[0].port); give each node its own port, or a public_url when they run on different machines' },
    ]);
    // A wildcard host listens on loopback too.
    expect(issuesOf(() => resolveConfig(nodes({ host: '0.0.0.0' }, { host: 'localhost' }), { env: {} })).map((i) => i.path)).toEqual(['gateway.nodes[1].port']);
    expect(issuesOf(() => resolveConfig({ ...nodes({ port: 8100 }) }, { env: {} }))).toEqual([
      { path: 'gateway.nodes[0].port', message: '127.0.0.1:8100 is also the address of the rollout server (rollout.host, rollout.port); give the node another port' },
    ]);
    expect(issuesOf(() => resolveConfig({ ...nodes({ port: 9000 }), rollout: { host: '0.0.0.0', port: 9000 } }, { env: {} })).map((i) => i.path)).toEqual(['gateway.nodes[0].port']);
    // Two nodes with the same public_url are one address as well.
    expect(issuesOf(() => resolveConfig(nodes({ public_url: 'http://10.0.0.11:8090' }, { public_url: 'http://10.0.0.11:8090/' }), { env: {} })).map((i) => i.path))
      .toEqual(['gateway.nodes[1].public_url']);
    // Fine: port 0 (a free port each), different hosts, different machines told apart by public_url (the multi-node example).
    expect(() => resolveConfig(nodes({ port: 0 }, { port: 0 }), { env: {} })).not.toThrow();
    expect(() => resolveConfig({ ...nodes({ port: 0 }), rollout: { port: 0 } }, { env: {} })).not.toThrow();
    expect(() => resolveConfig(nodes({ host: '10.0.0.11' }, { host: '10.0.0.12' }), { env: {} })).not.toThrow();
    expect(() => resolveConfig(nodes({ host: '0.0.0.0', public_url: 'http://10.0.0.11:8090' }, { host: '0.0.0.0', public_url: 'http://10.0.0.12:8090' }), { env: {} })).not.toThrow();
    expect(() => loadConfig(join(root, 'examples/config/multi-node.json'), { env: { POLAR_CLUSTER_TOKEN: 't' } })).not.toThrow();
  });

  test('a non-object config is a clear error, not a crash', () => {
    expect(issuesOf(() => resolveConfig([1, 2], { env: {} }))[0]!.message).toContain('mapping of sections');
    expect(issuesOf(() => resolveConfig('engine', { env: {} }))[0]!.path).toBe('');
    expect(issuesOf(() => resolveConfig({ engine: 5 }, { env: {} }))[0]!.path).toBe('engine');
  });

  test('${NAME} references expand from the env; unset ones are errors at their path; $${ is a literal', () => {
    const config = resolveConfig({ engine: { url: 'http://${HOST}:8000', api_key: '${KEY}' }, store: { path: '/srv/$${x}.db' } }, { env: { HOST: 'gpu1', KEY: 'k1' } });
    expect(config.engine.url).toBe('http://gpu1:8000');
    expect(config.engine.api_key).toBe('k1');
    expect(config.store.path).toBe('/srv/${x}.db');
    const issues = issuesOf(() => resolveConfig({ gateway: { nodes: [{ work_root: '${MISSING}/w' }] }, store: { path: '${bad name}' } }, { env: {} }));
    expect(issues).toEqual([
      { path: 'gateway.nodes[0].work_root', message: 'environment variable MISSING is not set' },
      { path: 'store.path', message: 'invalid environment reference ${bad name}; use ${NAME} (letters, digits, _)' },
    ]);
  });

  test('secrets fall back to POLAR_ENGINE_API_KEY and POLAR_CONTROL_TOKEN only when the file leaves them null', () => {
    const env = { POLAR_ENGINE_API_KEY: 'from-env', POLAR_CONTROL_TOKEN: 'tok-env' };
    const fromEnv = resolveConfig({}, { env });
    expect(fromEnv.engine.api_key).toBe('from-env');
    expect(fromEnv.rollout.control_plane_token).toBe('tok-env');
    const fromFile = resolveConfig({ engine: { api_key: 'from-file' } }, { env });
    expect(fromFile.engine.api_key).toBe('from-file');
    expect(resolveConfig({}, { env: { POLAR_CONTROL_TOKEN: '' } }).rollout.control_plane_token).toBeNull();
  });

  test("the Python Polar's POLAR_CONTROL_PLANE_TOKEN fills the control-plane token too; POLAR_CONTROL_TOKEN wins", () => {
    expect(resolveConfig({}, { env: { POLAR_CONTROL_PLANE_TOKEN: 'ref' } }).rollout.control_plane_token).toBe('ref');
    expect(resolveConfig({}, { env: { POLAR_CONTROL_PLANE_TOKEN: 'ref', POLAR_CONTROL_TOKEN: 'ours' } }).rollout.control_plane_token).toBe('ours');
  });

  test('redactConfig hides set secrets and leaves the original untouched', () => {
    const config = resolveConfig({ rollout: { control_plane_token: 'sekret' } }, { env: {} });
    const redacted = redactConfig(config);
    expect(redacted.rollout.control_plane_token).toBe('<redacted>');
    expect(redacted.engine.api_key).toBeNull();
    expect(config.rollout.control_plane_token).toBe('sekret');
  });
});

describe('files', () => {
  test('YAML and JSON by extension or by content', () => {
    expect(loadConfig(join(fixtures, 'valid.json'), { env: { TEST_ENGINE_KEY: 'k' } }).gateway.nodes.map((n) => n.node_id)).toEqual(['n1', 'n2']);
    expect(loadConfig(join(fixtures, 'no-extension'), { env: {} }).sim.port).toBe(9191);
    expect(parseConfigText('proxy:\n  port: 1\n', 'x.conf')).toEqual({ proxy: { port: 1 } });
    expect(parseConfigText('', 'empty.yaml')).toEqual({});
  });

  test('syntax errors, duplicate keys and missing files are ConfigErrors', () => {
    expect(issuesOf(() => parseConfigText('{"a": ', 'bad.json'))[0]!.message).toContain('invalid JSON');
    expect(issuesOf(() => parseConfigText('a: [1, 2\n', 'bad.yaml'))[0]!.message).toContain('invalid YAML');
    expect(issuesOf(() => parseConfigText('proxy: {}\nproxy: {}\n', 'dup.yaml'))[0]!.message).toMatch(/unique/i);
    expect(issuesOf(() => loadConfig(join(fixtures, 'does-not-exist.yaml')))[0]!.message).toContain('no such file');
  });

  test('helpers: path formatting and typo distance', () => {
    expect(formatPath(['gateway', 'nodes', 0, 'runtime', 'kind'])).toBe('gateway.nodes[0].runtime.kind');
    expect(formatPath(['a', 'b c'])).toBe('a["b c"]');
    expect(closestKey('prefil_tps', ['prefill_tps', 'decode_tps'])).toBe('prefill_tps');
    expect(closestKey('zzz', ['prefill_tps'])).toBeNull();
  });
});

describe('polar config check', () => {
  async function run(args: string[], env: Record<string, string> = {}) {
    const proc = Bun.spawn([bun, join(root, 'src/main.ts'), 'config', 'check', ...args], {
      stdout: 'pipe',
      stderr: 'pipe',
      env: { PATH: process.env.PATH ?? '', ...env },
    });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { stdout, stderr, code };
  }

  test('a misspelled key exits 2 and names each key path on stderr', async () => {
    const { stdout, stderr, code } = await run([join(fixtures, 'misspelled.yaml')]);
    expect(code).toBe(2);
    expect(stdout).toBe('');
    for (const line of [
      'engine.servd_model: unknown key; did you mean "served_model"?',
      'gateway.nodes[0].max_run_worker: unknown key; did you mean "max_run_workers"?',
      'gateway.nodes[0].runtime.imagee: unknown key; did you mean "image"?',
      'rollot: unknown key; did you mean "rollout"?',
    ]) {
      expect(stderr).toContain(line);
    }
  });

  test('a valid file prints the resolved config with defaults filled and secrets redacted', async () => {
    const { stdout, stderr, code } = await run([join(fixtures, 'valid.json')], { TEST_ENGINE_KEY: 'super-secret', POLAR_CONTROL_TOKEN: 'tok' });
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).not.toContain('super-secret');
    const printed = parseYaml(stdout) as PolarConfig;
    expect(printed.engine.api_key).toBe('<redacted>');
    expect(printed.rollout.control_plane_token).toBe('<redacted>');
    expect(printed.engine.kind).toBe('sglang');
    expect(printed.gateway.nodes[1]).toMatchObject({ node_id: 'n2', port: 0, max_run_workers: 8, runtime: { kind: 'local' } });
    expect(printed.sim.max_concurrency).toBe(64);
  });

  test('a bad runtime.limits.memory and a node on the rollout server\'s port exit 2 naming the paths', async () => {
    const { stdout, stderr, code } = await run([join(fixtures, 'bad-limits-ports.yaml')]);
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toContain('gateway.nodes[0].runtime.limits.memory: memory "lots" is not a size');
    const ports = await run([join(fixtures, 'clashing-ports.yaml')]);
    expect(ports.code).toBe(2);
    expect(ports.stderr).toContain('gateway.nodes[1].port: 127.0.0.1:8090 is also the address of gateway.nodes[0]');
    expect(ports.stderr).toContain('gateway.nodes[1].port: 127.0.0.1:8090 is also the address of the rollout server (rollout.host, rollout.port)');
  });

  test('a missing file exits 2 with the reason', async () => {
    const { stderr, code } = await run([join(fixtures, 'nope.yaml')]);
    expect(code).toBe(2);
    expect(stderr).toContain('no such file');
  });

  test('a missing argument is a usage error (exit 2)', async () => {
    const { code } = await run([]);
    expect(code).toBe(2);
  });
});
