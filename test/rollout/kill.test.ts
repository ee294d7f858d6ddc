/**
 * Multi-process failure tests (a kill -9 loses no acknowledged result): `polar rollout` and two `polar gateway` processes, the shell
 * harness (test/support/run-shell-agent.ts behind a sleep, so sessions are mid-run when the kill lands) and the simulator.
 * 1. SIGKILL one gateway mid-task: the server misses its heartbeats, re-dispatches its sessions to the other gateway,
 *    and the task completes with num_samples results.
 * 2. SIGKILL the rollout server mid-task and restart it on the same db and port: the gateways' callbacks retry until
 *    it is back, the task completes, every session ran once and its result is stored exactly once.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { SimServer } from '../../src/sim/server.ts';
import { openStore } from '../../src/store/index.ts';
import { taskRequest } from '../support/tasks.ts';
import { unusedPort } from '../support/fake-engine.ts';
import { SHELL_AGENT_RUNTIME_YAML } from '../support/polar-cli.ts';

const root = resolve(import.meta.dir, '..', '..');
const bun = process.execPath;
const scratch = mkdtempSync(join(tmpdir(), 'polar-rollout-kill-'));
const procs = new Set<ReturnType<typeof Bun.spawn>>();
const script = { variants: { solve: { weight: 1, steps: [{ shell: 'echo ok > out.txt' }, { say: 'done' }] } } };
let sim: SimServer;

beforeAll(async () => {
  sim = await SimServer.start({ port: 0, scripts: { 'kill-gateway': script, 'kill-rollout': script } });
});
afterAll(async () => {
  for (const p of procs) p.kill('SIGKILL');
  await sim?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

function writeConfig(name: string, rolloutPort: number): string {
  const dir = join(scratch, name);
  const file = join(scratch, `${name}.yaml`);
  writeFileSync(file, [
    `engine: {kind: sim, url: "${sim.url}"}`,
    `rollout: {port: ${rolloutPort}, heartbeat_timeout_s: 2, db: ${join(dir, 'rollout.db')}}`,
    'gateway:',
    `  rollout_url: "http://127.0.0.1:${rolloutPort}"`,
    '  heartbeat_interval_s: 0.3',
    '  nodes:',
    `    - {node_id: gw-1, port: 0, max_run_workers: 2, work_root: ${join(dir, 'work-1')}, ${SHELL_AGENT_RUNTIME_YAML}}`,
    `    - {node_id: gw-2, port: 0, max_run_workers: 4, work_root: ${join(dir, 'work-2')}, ${SHELL_AGENT_RUNTIME_YAML}}`,
    `store: {path: ${join(dir, 'gateways.db')}}`,
    '',
  ].join('\n'));
  return file;
}

/** Spawn `polar ARGS…` and resolve once its first stdout line (the "listening on URL" line) arrives. */
async function start(args: string[]): Promise<{ proc: ReturnType<typeof Bun.spawn>; url: string }> {
  const proc = Bun.spawn([bun, 'src/main.ts', ...args], { cwd: root, stdout: 'pipe', stderr: 'ignore' });
  procs.add(proc);
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
  let text = '';
  while (!text.includes('\n')) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`polar ${args.join(' ')} exited before listening`);
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  const url = text.match(/http:\/\/[\d.:]+/)?.[0];
  if (!url) throw new Error(`no URL in ${JSON.stringify(text)}`);
  return { proc, url };
}

async function kill(proc: ReturnType<typeof Bun.spawn>): Promise<void> {
  proc.kill('SIGKILL');
  await proc.exited;
  procs.delete(proc);
}

async function until<T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await probe().catch(() => null);
    if (value) return value;
    await Bun.sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const getJson = async <T>(url: string): Promise<T> => (await fetch(url)).json() as Promise<T>;

interface TaskView {
  status: string;
  sessions: { session_id: string; status: string; node_id: string | null; attempt: number; reward: number | null }[];
  results: unknown[];
  completed_sessions: number;
}

function killTask(taskId: string) {
  return taskRequest(taskId, {
    instruction: 'Create out.txt containing ok.', num_samples: 4,
    // The sleep keeps each session in RUNNING long enough for the kill to land mid-task.
    agent: { harness: 'shell', command: `sleep 2 && ${bun} ${join(root, 'test/support/run-shell-agent.ts')} {{INSTRUCTION}}`, model_name: 'polar-sim' },
    runtime: { kind: 'local' },
    evaluator: { strategy: 'test_on_output', config: { command: 'grep -q ok out.txt' } },
  });
}

async function startCluster(name: string) {
  const port = unusedPort();
  const config = writeConfig(name, port);
  const rollout = await start(['rollout', '--config', config]);
  const gw1 = await start(['gateway', '--config', config, '--node-id', 'gw-1']);
  const gw2 = await start(['gateway', '--config', config, '--node-id', 'gw-2']);
  await until('both gateways registered', async () => (await getJson<unknown[]>(`${rollout.url}/nodes`)).length === 2);
  return { config, rollout, gw1, gw2, dir: join(scratch, name) };
}

async function submit(server: string, taskId: string): Promise<void> {
  const response = await fetch(`${server}/rollout/task/submit`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(killTask(taskId)) });
  expect(response.status).toBe(200);
}

test('SIGKILL of a gateway mid-task: its sessions are re-dispatched and the task completes with num_samples results', async () => {
  const c = await startCluster('gateway-kill');
  await submit(c.rollout.url, 'kill-gateway');
  // gw-1 (2 run slots) and gw-2 both get sessions by stage pressure; wait until gw-1 runs harnesses.
  const onGw1 = await until('sessions running on gw-1', async () => {
    const task = await getJson<TaskView>(`${c.rollout.url}/rollout/task/kill-gateway`);
    const running: string[] = [];
    for (const s of task.sessions.filter((x) => x.node_id === 'gw-1')) {
      const view = await fetch(`${c.gw1.url}/sessions/${encodeURIComponent(s.session_id)}`);
      if (view.ok && ((await view.json()) as { status: string }).status === 'RUNNING') running.push(s.session_id);
    }
    return running.length > 0 ? running : null;
  });
  await kill(c.gw1.proc);

  const done = await until('task completed', async () => {
    const task = await getJson<TaskView>(`${c.rollout.url}/rollout/task/kill-gateway`);
    return task.status === 'completed' ? task : null;
  }, 45_000);
  expect(done.results).toHaveLength(4);
  expect(done.completed_sessions).toBe(4);
  expect(done.sessions).toHaveLength(4);
  for (const s of done.sessions) {
    expect(s.status).toBe('COMPLETED');
    expect(s.node_id).toBe('gw-2');
    expect(s.reward).toBe(1);
  }
  // The sessions gw-1 was running were dispatched again (a dispatch that failed in flight is retried as the same attempt).
  for (const id of onGw1) expect(done.sessions.find((s) => s.session_id === id)!.attempt).toBeGreaterThanOrEqual(1);
  const nodes = await getJson<{ node_id: string; healthy: boolean }[]>(`${c.rollout.url}/nodes`);
  expect(nodes.find((n) => n.node_id === 'gw-1')?.healthy).toBe(false);
  const groups = await getJson<{ groups: { group_id: string; rewards: number[] }[] }>(`${c.rollout.url}/rollout/groups?ready=1`);
  expect(groups.groups.find((g) => g.group_id === 'kill-gateway')?.rewards).toEqual([1, 1, 1, 1]);
  for (const p of [c.rollout.proc, c.gw2.proc]) await kill(p);
}, 90_000);

test('SIGKILL of the rollout server mid-task and a restart on the same db: the task completes, each result stored once', async () => {
  const c = await startCluster('rollout-kill');
  await submit(c.rollout.url, 'kill-rollout');
  await until('every session dispatched and harnesses running', async () => {
    const task = await getJson<TaskView>(`${c.rollout.url}/rollout/task/kill-rollout`);
    const health = await Promise.all([c.gw1.url, c.gw2.url].map((u) => getJson<{ stages: { running: number } }>(`${u}/health`)));
    return task.sessions.every((s) => s.node_id !== null) && health.some((h) => h.stages.running > 0);
  });
  await kill(c.rollout.proc);
  await Bun.sleep(2500); // results that finish now can only wait in the gateways' callback retries
  const restarted = await start(['rollout', '--config', c.config]);
  expect(restarted.url).toBe(c.rollout.url);

  const done = await until('task completed after the restart', async () => {
    const task = await getJson<TaskView>(`${restarted.url}/rollout/task/kill-rollout`);
    return task.status === 'completed' ? task : null;
  }, 60_000);
  expect(done.sessions).toHaveLength(4);
  expect(done.results).toHaveLength(4);
  expect(done.completed_sessions).toBe(4);
  for (const s of done.sessions) {
    expect(s.status).toBe('COMPLETED');
    expect(s.reward).toBe(1);
    expect(s.attempt).toBe(0); // nothing was re-dispatched: every session ran exactly once
  }
  for (const p of [restarted.proc, c.gw1.proc, c.gw2.proc]) await kill(p);

  const rolloutStore = openStore(join(c.dir, 'rollout.db'));
  const gatewayStore = openStore(join(c.dir, 'gateways.db'));
  try {
    const results = rolloutStore.results.listByTask('kill-rollout');
    expect(results).toHaveLength(4);
    expect(new Set(results.map((r) => r.session_id)).size).toBe(4);
    expect(rolloutStore.sessions.listByTask('kill-rollout')).toHaveLength(4);
    expect(rolloutStore.groups.get('kill-rollout')?.data).toMatchObject({ rewards: [1, 1, 1, 1] });
    // Each session ran its two model calls once (a second run would have added records).
    for (const r of results) expect(gatewayStore.completions.listBySession(r.session_id)).toHaveLength(2);
    expect(gatewayStore.results.listByTask('kill-rollout')).toHaveLength(4);
  } finally {
    rolloutStore.close();
    gatewayStore.close();
  }
}, 120_000);
