/**
 * examples/slurm/polar.sbatch in dry-run mode (POLAR_DRY_RUN=1, nodes from POLAR_NODES, no Slurm needed): the config it
 * writes passes `polar config check`, and every command it would start is a valid invocation — srun pinned to an
 * allocated node, polar subcommands and options that the CLI accepts, one gateway per node whose --node-id is in the
 * config, the engine on the port the config points at, gateways pointed at the rollout server on the first node.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { loadConfig } from '../../src/config/load.ts';

const root = resolve(import.meta.dir, '..', '..');
const script = join(root, 'examples/slurm/polar.sbatch');
const work = mkdtempSync(join(tmpdir(), 'polar-slurm-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const nodes = ['gpu-a', 'gpu-b', 'gpu-c'];
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', POLAR_DRY_RUN: '1', POLAR_NODES: nodes.join(' '), POLAR_CONTROL_TOKEN: 'tok-slurm', POLAR_WORKDIR: work, POLAR_ROLLOUT_PORT: '9100' };
const polar = (args: string[], extraEnv: Record<string, string> = {}) =>
  spawnSync(process.execPath, [join(root, 'src/main.ts'), ...args], { encoding: 'utf8', cwd: work, env: { ...process.env, ...extraEnv } });

/** Split one printed command line the way bash would (the script prints with printf %q). */
function argv(line: string): string[] {
  const out = spawnSync('bash', ['-c', 'eval "set -- $1"; printf "%s\\0" "$@"', '_', line], { encoding: 'utf8' });
  expect(out.status).toBe(0);
  return out.stdout.split('\0').slice(0, -1);
}

const run = spawnSync('bash', [script], { encoding: 'utf8', env });
const commands = run.stdout.trim().split('\n').map(argv);
const configPath = join(work, 'polar.yaml');

describe('examples/slurm/polar.sbatch (dry run)', () => {
  test('it exits 0, writes a config that `polar config check` accepts, and starts nothing', () => {
    expect(run.stderr).toContain(`config written to ${configPath}`);
    expect(run.status).toBe(0);
    const check = polar(['config', 'check', configPath], { POLAR_CONTROL_TOKEN: 'tok-slurm' });
    expect(check.stderr).toBe('');
    expect(check.status).toBe(0);
    const config = loadConfig(configPath, { env: { POLAR_CONTROL_TOKEN: 'tok-slurm' } });
    expect(config.rollout.control_plane_token).toBe('tok-slurm');
    expect(config.rollout.port).toBe(9100);
    expect(config.gateway.nodes.map((n) => n.node_id)).toEqual(nodes);
    expect(config.gateway.nodes.map((n) => n.public_url)).toEqual(nodes.map((n) => `http://${n}:${config.gateway.nodes[0]!.port}`));
    expect(config.gateway.rollout_url).toBe(`http://${nodes[0]}:9100`);
  });

  test('without POLAR_CONTROL_TOKEN it refuses to run', () => {
    const { POLAR_CONTROL_TOKEN: _, ...noToken } = env;
    const refused = spawnSync('bash', [script], { encoding: 'utf8', env: noToken });
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toContain('POLAR_CONTROL_TOKEN');
  });

  test('one engine and one gateway per node, one rollout server on the first; every srun is pinned to an allocated node', () => {
    const config = loadConfig(configPath, { env: {} });
    const srun = commands.map((c) => {
      expect(c[0]).toBe('srun');
      const w = c.indexOf('-w');
      expect(nodes).toContain(c[w + 1]!);
      return { node: c[w + 1]!, rest: c.slice(w + 2) };
    });
    const engines = srun.filter((c) => c.rest.includes('sglang.launch_server'));
    expect(engines.map((e) => e.node)).toEqual(nodes);
    for (const e of engines) expect(e.rest[e.rest.indexOf('--port') + 1]).toBe(new URL(config.engine.url).port);
    const rollouts = srun.filter((c) => c.rest[0] === 'polar' && c.rest[1] === 'rollout');
    expect(rollouts.map((r) => r.node)).toEqual([nodes[0]!]);
    const gateways = srun.filter((c) => c.rest[0] === 'polar' && c.rest[1] === 'gateway');
    expect(gateways.map((g) => [g.node, g.rest[g.rest.indexOf('--node-id') + 1]])).toEqual(nodes.map((n) => [n, n]));
    expect(engines.length + rollouts.length + gateways.length).toBe(commands.length);
  });

  test('every polar command uses a subcommand and options the CLI accepts, with the written config', () => {
    const polarCommands = commands.map((c) => c.slice(c.indexOf('polar'))).filter((c) => c[0] === 'polar');
    expect(polarCommands.length).toBe(1 + nodes.length);
    for (const [, sub, ...args] of polarCommands as [string, string, ...string[]][]) {
      const help = polar([sub, '--help']);
      expect(help.status).toBe(0);
      for (const option of args.filter((a) => a.startsWith('--'))) expect(help.stdout).toContain(option);
      expect(args[args.indexOf('--config') + 1]).toBe(configPath);
    }
    // An option the CLI does not know is refused, so the check above can fail.
    expect(polar(['gateway', '--no-such-option']).status).not.toBe(0);
  });
});
