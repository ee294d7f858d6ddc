/**
 * Compatibility with the Python Polar's wire API (NVIDIA-NeMo/ProRL-Agent-Server `src/polar`), end to end: a live
 * `polar serve --with-sim` with the control-plane token from the reference's variable (POLAR_CONTROL_PLANE_TOKEN), then
 * - test/compat/reference_client.py, a stdlib-only Python client written the way the trainer bridges are, submits
 *   reference-shaped TaskRequests, polls, receives the TaskResult callback, checks every response against the
 *   reference models' constraints and converts the traces into training samples;
 * - the SSE stream carries the reference's dotted event names;
 * - the reference CLI's loop: `polar status --rollout-url` and `polar submit FILE --rollout-url --wait`.
 */
import { expect, test } from 'bun:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { firstLine, REPO_ROOT, SHELL_AGENT_COMMAND, SHELL_AGENT_RUNTIME_YAML, useScratch } from '../support/polar-cli.ts';

const { dir: scratch, procs } = useScratch('polar-compat-');
const TOKEN = 'compat-secret-token';

/** Runs `polar ...args` to its end with `env` added. */
async function polarWithEnv(args: string[], env: Record<string, string>) {
  const proc = Bun.spawn([process.execPath, 'src/main.ts', ...args], { cwd: REPO_ROOT, stdout: 'pipe', stderr: 'pipe', env: { ...process.env, ...env } });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

test('a reference-style Python client, the SSE names and the reference CLI loop work against polar serve', async () => {
  const scripts = join(scratch, 'scripts');
  mkdirSync(scripts);
  const solve = 'variants:\n  solve: {weight: 1, steps: [{shell: "echo ok > out.txt"}, {say: "done"}]}\n';
  for (const id of ['compat-full', 'compat-minimal', 'compat-cli']) writeFileSync(join(scripts, `${id}.yaml`), solve);
  const config = join(scratch, 'polar.yaml');
  writeFileSync(config, [
    `sim: {port: 0, scripts: ${scripts}}`,
    'rollout: {port: 0}',
    `gateway: {heartbeat_interval_s: 0.5, nodes: [{node_id: compat-0, port: 0, work_root: ${join(scratch, 'work')}, ${SHELL_AGENT_RUNTIME_YAML}}]}`, // the sandbox sees the test agent read-only
    `store: {path: ${join(scratch, 'polar.db')}}`,
    '',
  ].join('\n'));
  const env = { ...process.env, POLAR_CONTROL_PLANE_TOKEN: TOKEN, POLAR_CONTROL_TOKEN: '' };
  const serve = Bun.spawn([process.execPath, 'src/main.ts', 'serve', '--config', config, '--with-sim'], { cwd: REPO_ROOT, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe', env });
  procs.push(serve);
  const server = (await firstLine(serve.stdout)).match(/rollout server on (http:\/\/\S+?),/)?.[1];
  expect(server).toBeDefined();

  // The token came from the reference's variable: no token → 401; either header → 200.
  expect((await fetch(`${server}/rollout/status`)).status).toBe(401);
  expect((await fetch(`${server}/rollout/status`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
  expect((await fetch(`${server}/rollout/status`, { headers: { 'x-polar-control-token': TOKEN } })).status).toBe(200);

  const events = new AbortController();
  const stream = await fetch(`${server}/events`, { headers: { 'x-polar-control-token': TOKEN }, signal: events.signal });
  const seen: string[] = [];
  const reading = (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of stream.body!) {
        buffer += decoder.decode(chunk);
        for (const m of buffer.matchAll(/^event: (\S+)$/gm)) seen.push(m[1]!);
        buffer = buffer.slice(buffer.lastIndexOf('\n') + 1);
      }
    } catch {
      // aborted
    }
  })();

  const client = Bun.spawn(['python3', join(REPO_ROOT, 'test/compat/reference_client.py'), server!, SHELL_AGENT_COMMAND], { stdout: 'pipe', stderr: 'pipe', env });
  const [out, err, code] = await Promise.all([new Response(client.stdout).text(), new Response(client.stderr).text(), client.exited]);
  expect({ code, err }).toEqual({ code: 0, err: '' });
  const summary = JSON.parse(out.trim()) as Record<string, unknown>;
  expect(summary).toMatchObject({ health_nodes: 1, full_sessions: 3, session_statuses: ['COMPLETED', 'COMPLETED', 'COMPLETED'], rewards: [1], minimal_status: 'completed', nodes: ['compat-0'] });
  expect(summary.samples as number).toBeGreaterThanOrEqual(3);
  expect(summary.trainable_tokens as number).toBeGreaterThan(0);
  for (const reason of summary.finish_reasons as unknown[]) expect(typeof reason).toBe('string');

  await Bun.sleep(200);
  events.abort();
  await reading;
  for (const name of ['task.created', 'session.state_changed', 'task.updated', 'task.completed']) expect(seen).toContain(name);

  // The reference CLI's loop: status by --rollout-url, submit of a reference task file that waits and summarises.
  const status = await polarWithEnv(['status', '--rollout-url', server!], env as Record<string, string>);
  expect(status.code).toBe(0);
  expect(status.stdout).toContain('completed=2');
  expect(status.stdout).toContain('compat-0');
  const taskFile = join(scratch, 'task.json');
  writeFileSync(taskFile, JSON.stringify({ task_id: 'compat-cli', instruction: 'Create out.txt containing ok.', num_samples: 2, agent: { harness: 'shell', custom_shell: { command: SHELL_AGENT_COMMAND } }, evaluator: { strategy: 'test_on_output', config: { command: 'grep -q ok out.txt' } } }));
  const submitted = await polarWithEnv(['submit', taskFile, '--rollout-url', server!, '--wait', '--poll-interval', '0.3'], env as Record<string, string>);
  expect(submitted.stderr).toBe('');
  expect(submitted.code).toBe(0);
  expect(submitted.stdout).toContain('Task: compat-cli\nStatus: completed\nCompleted sessions: 2/2\nReward=1.0 sessions: 2');
  // A task none of whose sessions is usable: "completed" in the reference's words, FAILED in ours, and --wait exits 1.
  const failingFile = join(scratch, 'failing.json');
  writeFileSync(failingFile, JSON.stringify({ task_id: 'compat-fail', instruction: 'x', num_samples: 1, agent: { harness: 'shell', custom_shell: { command: 'exit 3' } } }));
  const failing = await polarWithEnv(['submit', failingFile, '--rollout-url', server!, '--wait', '--poll-interval', '0.3', '--json'], env as Record<string, string>);
  expect(failing.code).toBe(1);
  expect(JSON.parse(failing.stdout)).toMatchObject({ task_id: 'compat-fail', status: 'completed', polar_status: 'FAILED' });

  serve.kill('SIGTERM');
  expect(await serve.exited).toBe(0);
}, 120_000);
