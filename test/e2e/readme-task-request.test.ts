/**
 * The README's "a trainer does the same over HTTP" workflow, as written: `polar serve --with-sim`, then
 * examples/task-request.json POSTed verbatim to /rollout/task/submit; the real pi CLI runs each sample against the
 * behaviour script the request carries in `metadata.sim_script`, the evaluator scores it, and the group is served
 * once with its rewards. Runs only in a loopback-only network namespace (`npm test`).
 */
import { expect, test } from 'bun:test';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { chooseVariant, parseBehaviourScript } from '../../src/sim/script.ts';
import { REPO_ROOT, startPolar, useScratch } from '../support/polar-cli.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';

const { dir: scratch, procs } = useScratch('polar-readme-task-');
const requestText = readFileSync(join(REPO_ROOT, 'examples/task-request.json'), 'utf8');
const request = JSON.parse(requestText) as { task_id: string; num_samples: number; metadata: { sim_script: unknown } };

test.skipIf(!networkIsolated())(`examples/task-request.json over HTTP to polar serve --with-sim: pi runs every sample, rewards follow the script, the group is served once ${NEEDS_ISOLATION}`, async () => {
  const config = join(scratch, 'polar.yaml');
  writeFileSync(config, [
    'sim: {port: 0}',
    'rollout: {port: 0}',
    `gateway: {heartbeat_interval_s: 0.5, nodes: [{node_id: box-0, port: 0, work_root: ${join(scratch, 'work')}}]}`,
    `store: {path: ${join(scratch, 'polar.db')}}`,
    '',
  ].join('\n'));
  const { proc: serve, line } = await startPolar(['serve', '--config', config, '--with-sim'], procs);
  const server = line.match(/rollout server on (http:\/\/\S+?),/)?.[1];
  expect(server, line).toBeDefined();

  const submitted = await fetch(`${server}/rollout/task/submit`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: requestText });
  expect(submitted.status, await submitted.clone().text()).toBe(200);
  type Status = { status: string; sessions: { session_id: string; status: string; reward: number | null; error: string | null }[] };
  let status: Status | null = null;
  for (let i = 0; i < 600; i++) {
    status = (await (await fetch(`${server}/rollout/task/${request.task_id}`)).json()) as Status;
    if (status.status !== 'running') break;
    await Bun.sleep(200);
  }
  expect(status!.status, JSON.stringify(status)).toBe('completed');
  const script = parseBehaviourScript(request.metadata.sim_script);
  expect(status!.sessions).toHaveLength(request.num_samples);
  for (const s of status!.sessions) {
    expect({ id: s.session_id, status: s.status, error: s.error }).toEqual({ id: s.session_id, status: 'COMPLETED', error: null });
    expect(s.reward).toBe(chooseVariant(script, s.session_id) === 'solve' ? 1 : 0);
  }

  const ready = (await (await fetch(`${server}/rollout/groups?ready=1`)).json()) as { groups: { task_id: string; rewards: number[] }[] };
  expect(ready.groups.map((g) => [g.task_id, g.rewards.length])).toEqual([[request.task_id, request.num_samples]]);
  const ack = (await (await fetch(`${server}/rollout/groups/${request.task_id}/ack`, { method: 'POST' })).json()) as { acked: boolean };
  expect(ack.acked).toBe(true);
  expect(((await (await fetch(`${server}/rollout/groups?ready=1`)).json()) as { groups: unknown[] }).groups).toEqual([]);

  serve.kill('SIGTERM');
  expect(await serve.exited).toBe(0);
}, 180_000);
