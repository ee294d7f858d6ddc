/**
 * `polar rollout --config`, `polar submit` and `polar status` as separate processes: the server starts from a config
 * file, a task directory is submitted and expanded into sessions, status reports them; bad usage exits 2.
 */
import { expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, runPolarSync, startPolar, useScratch } from '../support/polar-cli.ts';

const { dir: scratch, procs } = useScratch('polar-rollout-cli-');

test('rollout + submit + status over the CLI', async () => {
  const config = join(scratch, 'polar.yaml');
  // The example tasks upload their repo/ directories: the server accepts sources under gateway.upload_roots only.
  writeFileSync(config, `rollout:\n  port: 0\nstore:\n  path: ${join(scratch, 'rollout.db')}\ngateway:\n  upload_roots: [${join(REPO_ROOT, 'examples/tasks')}]\n`);
  const { proc: server, line } = await startPolar(['rollout', '--config', config], procs);
  const url = line.match(/http:\/\/\S+/)?.[0];
  expect(url).toBeDefined();

  const submit = runPolarSync(['submit', 'examples/tasks', '--server', url!, '--harness', 'shell', '--command', 'true', '--samples', '2']);
  expect(submit.stderr.toString()).toBe('');
  expect(submit.exitCode).toBe(0);
  const accepted = submit.stdout.toString().trim().split('\n').map((l) => JSON.parse(l) as { task_id: string; sessions: number });
  expect(accepted.length).toBeGreaterThanOrEqual(5);
  expect(accepted.every((a) => a.sessions === 2)).toBe(true);

  const status = runPolarSync(['status', '--server', url!, '--json']);
  expect(status.exitCode).toBe(0);
  const body = JSON.parse(status.stdout.toString()) as { tasks: Record<string, string>; task_counts: Record<string, number>; sessions: Record<string, number> };
  expect(body.task_counts.running).toBe(accepted.length);
  expect(Object.keys(body.tasks).sort()).toEqual(accepted.map((a) => a.task_id).sort());
  expect(body.sessions.REGISTERED).toBe(accepted.length * 2); // no node registered yet: all queued

  const noAgent = runPolarSync(['submit', 'examples/tasks', '--server', url!]);
  expect(noAgent.exitCode).toBe(2);
  expect(noAgent.stderr.toString()).toContain('agent');
  server.kill('SIGTERM');
  expect(await server.exited).toBe(0);
});

test('a bad config exits 2 and names the field', () => {
  const config = join(scratch, 'bad.yaml');
  writeFileSync(config, 'rollout:\n  port: -5\n');
  const proc = runPolarSync(['rollout', '--config', config]);
  expect(proc.exitCode).toBe(2);
  expect(proc.stderr.toString()).toContain('rollout.port');
});
