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

  const human = runPolarSync(['status', '--server', url!]).stdout.toString();
  expect(human).toContain(`sessions: REGISTERED=${accepted.length * 2}`);
  expect(human).toContain('nodes: 0');
  expect(human).not.toContain('stages:'); // the legend comes with node rows only

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

test('status prints each node with its stage counts, stale ones marked, and the stages legend', async () => {
  // A rollout server's /rollout/status body (the shape `polar rollout` answers), served by a stand-in.
  const server = Bun.serve({
    hostname: '127.0.0.1', port: 0,
    fetch: () => Response.json({
      task_counts: { running: 1 }, sessions: { INITIALIZING: 3, RUNNING: 1 }, groups_ready: 0,
      nodes: [
        { node_id: 'gpu-a', healthy: true, draining: false, in_flight: 4, stages: { queued: 2, init: 1, ready: 0, running: 1, postrun: 0 }, gateway_url: 'http://10.0.0.2:7000' },
        { node_id: 'gpu-b', healthy: false, draining: false, in_flight: 0, stages: { queued: 5 }, stages_stale: true, gateway_url: 'http://10.0.0.3:7000' },
      ],
    }),
  });
  try {
    const proc = Bun.spawn([process.execPath, join(REPO_ROOT, 'src/main.ts'), 'status', '--server', `http://127.0.0.1:${server.port}`], { stdout: 'pipe', stderr: 'pipe' });
    const out = await new Response(proc.stdout).text();
    expect(await proc.exited).toBe(0);
    expect(out).toContain('sessions: INITIALIZING=3 RUNNING=1');
    expect(out).toMatch(/gpu-a +healthy +in_flight=4 queued=2 init=1 ready=0 running=1 postrun=0 http:\/\/10\.0\.0\.2:7000/);
    expect(out).toMatch(/gpu-b +UNHEALTHY +in_flight=0 stages=stale/);
    expect(out).toContain('queued = accepted, waiting for an INIT slot');
  } finally {
    server.stop(true);
  }
});

test('status against something that is not a rollout server says what answered, not [object Object]', async () => {
  // A polar proxy answers an unknown route with its OpenAI-shaped error object.
  const server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => Response.json({ error: { message: 'no route for GET /rollout/status', type: 'invalid_request_error' } }, { status: 404 }) });
  try {
    const proc = Bun.spawn([process.execPath, join(REPO_ROOT, 'src/main.ts'), 'status', '--server', `http://127.0.0.1:${server.port}`], { stdout: 'pipe', stderr: 'pipe' });
    const err = await new Response(proc.stderr).text();
    expect(await proc.exited).toBe(1);
    expect(err).toContain('HTTP 404: no route for GET /rollout/status');
    expect(err).toContain('a polar rollout server?');
    expect(err).not.toContain('[object Object]');
  } finally {
    server.stop(true);
  }
});

test('submit --wait keeps polling while the rollout server restarts, then prints the summary', async () => {
  // A stand-in rollout server that goes away after the first poll (connection refused, as during a restart) and comes
  // back on the same port 1 s later with the task completed.
  const status = (done: boolean) => ({ task_id: 't-restart', status: done ? 'completed' : 'running', polar_status: done ? 'COMPLETED' : 'RUNNING', total_sessions: 1, completed_sessions: done ? 1 : 0, results: [], result_paths: [] });
  let polls = 0;
  const serve = (port: number, done: boolean) => Bun.serve({
    hostname: '127.0.0.1', port,
    fetch: (req) => {
      if (req.method === 'POST') return Response.json({ task_id: 't-restart', status: 'running', sessions: 1, previous_run: null });
      polls++;
      return Response.json(status(done));
    },
  });
  let server = serve(0, false);
  const port = server.port!;
  const taskFile = join(scratch, 'restart.json');
  writeFileSync(taskFile, JSON.stringify({ task_id: 't-restart', instruction: 'x', num_samples: 1, agent: { harness: 'shell', command: 'true' } }));
  const proc = Bun.spawn([process.execPath, join(REPO_ROOT, 'src/main.ts'), 'submit', taskFile, '--server', `http://127.0.0.1:${port}`, '--wait', '--poll-interval', '0.1'], { stdout: 'pipe', stderr: 'pipe' });
  try {
    for (const end = Date.now() + 20_000; polls === 0 && Date.now() < end;) await Bun.sleep(20);
    expect(polls).toBeGreaterThan(0);
    server.stop(true);
    await Bun.sleep(1000);
    server = serve(port, true);
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect({ code, out }).toMatchObject({ code: 0, out: expect.stringContaining('Status: completed') });
    expect(err).toContain('cannot reach rollout server');
    expect(err).toContain('still waiting');
  } finally {
    proc.kill();
    server.stop(true);
  }
});
