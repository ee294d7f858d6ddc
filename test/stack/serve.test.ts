/**
 * `polar serve --config FILE --with-sim` as a process: the local gateway registers with the in-process rollout server
 * over HTTP, a TaskRequest submitted over the Polar API runs through it (shell harness + simulator), the evaluated
 * group is served once to the trainer API and acknowledged; SIGTERM exits 0. A bad config exits 2.
 */
import { expect, test } from 'bun:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runPolarSync, SHELL_AGENT_COMMAND, SHELL_AGENT_RUNTIME_YAML, startPolar, useScratch } from '../support/polar-cli.ts';

const { dir: scratch, procs } = useScratch('polar-serve-');

test('polar serve: submit → sessions on the local gateway → evaluated group served once → SIGTERM exits 0', async () => {
  const scripts = join(scratch, 'scripts');
  mkdirSync(scripts);
  writeFileSync(join(scripts, 'serve-task.yaml'), 'variants:\n  solve: {weight: 1, steps: [{shell: "echo ok > out.txt"}, {say: "done"}]}\n');
  const config = join(scratch, 'polar.yaml');
  writeFileSync(config, [
    `sim: {port: 0, scripts: ${scripts}}`,
    'rollout: {port: 0}',
    `gateway: {heartbeat_interval_s: 0.5, nodes: [{node_id: box-0, port: 0, work_root: ${join(scratch, 'work')}, ${SHELL_AGENT_RUNTIME_YAML}}]}`,
    `store: {path: ${join(scratch, 'polar.db')}}`,
    '',
  ].join('\n'));
  const { proc: serve, line } = await startPolar(['serve', '--config', config, '--with-sim'], procs);
  const server = line.match(/rollout server on (http:\/\/\S+?),/)?.[1];
  expect(server).toBeDefined();

  const task = {
    task_id: 'serve-task', instruction: 'Create out.txt containing ok.', num_samples: 2, timeout_seconds: 60,
    agent: { harness: 'shell', command: SHELL_AGENT_COMMAND, model_name: 'polar-sim' },
    builder: { strategy: 'prefix_merging' }, runtime: { kind: 'local' },
    evaluator: { strategy: 'test_on_output', config: { command: 'grep -q ok out.txt' } },
  };
  const submitted = await fetch(`${server}/rollout/task/submit`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(task) });
  expect(submitted.status).toBe(200);
  let status: { status: string; sessions: { status: string; node_id: string; reward: number | null }[] } | null = null;
  for (let i = 0; i < 200; i++) {
    status = (await (await fetch(`${server}/rollout/task/serve-task`)).json()) as typeof status;
    if (status!.status !== 'running') break;
    await Bun.sleep(100);
  }
  expect(status!.status).toBe('completed');
  expect(status!.sessions.map((s) => [s.status, s.node_id, s.reward])).toEqual([['COMPLETED', 'box-0', 1], ['COMPLETED', 'box-0', 1]]);

  const nodes = (await (await fetch(`${server}/nodes`)).json()) as { node_id: string; healthy: boolean }[];
  expect(nodes).toMatchObject([{ node_id: 'box-0', healthy: true }]);
  const ready = (await (await fetch(`${server}/rollout/groups?ready=1`)).json()) as { groups: { group_id: string; rewards: number[]; grpo_advantages: number[] }[] };
  expect(ready.groups).toHaveLength(1);
  expect(ready.groups[0]).toMatchObject({ group_id: 'serve-task', rewards: [1, 1], grpo_advantages: [0, 0] });
  const ack = (await (await fetch(`${server}/rollout/groups/serve-task/ack`, { method: 'POST' })).json()) as { acked: boolean };
  expect(ack.acked).toBe(true);
  const after = (await (await fetch(`${server}/rollout/groups?ready=1`)).json()) as { groups: unknown[] };
  expect(after.groups).toEqual([]);

  serve.kill('SIGTERM');
  expect(await serve.exited).toBe(0);
}, 60_000);

test('polar serve with an invalid config exits 2 and names the field', () => {
  const config = join(scratch, 'bad.yaml');
  writeFileSync(config, 'gateway: {nodes: [{node_id: "bad id!"}]}\n');
  const run = runPolarSync(['serve', '--config', config]);
  expect(run.exitCode).toBe(2);
  expect(run.stderr.toString()).toContain('node_id');
});
