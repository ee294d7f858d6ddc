/**
 * Behaviour scripts on the service path: a task directory submitted with `polar submit` to `polar serve --with-sim`
 * carries its sim.yaml in the TaskRequest (`metadata.sim_script`); the gateway registers it with the simulator, so the
 * sessions follow the scripted variants (rewards 1 for "solve", 0 for "give_up") instead of all getting the
 * simulator's "no behaviour script" reply. In-process: a stack on an external simulator registers the task's script
 * before its sessions run (again for each session, so a restarted simulator gets it back: test/stack/sim-scripts.test.ts). `polar submit` without an agent says to pass --harness.
 */
import { expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startLocalStack } from '../../src/stack/local-stack.ts';
import { loadTaskDir, toTaskRequest } from '../../src/rollout/task-file.ts';
import { chooseVariant, parseBehaviourScript } from '../../src/sim/script.ts';
import { SimServer } from '../../src/sim/server.ts';
import { openStore } from '../../src/store/index.ts';
import { runPolarSync, SHELL_AGENT_COMMAND as agent, SHELL_AGENT_PATHS, SHELL_AGENT_RUNTIME_YAML, startPolar, useScratch, writeSimTask } from '../support/polar-cli.ts';

const { dir: scratch, procs } = useScratch('polar-serve-sim-');

const SCRIPT = [
  'variants:',
  '  solve: {weight: 0.75, steps: [{shell: "echo ok > out.txt"}, {say: "Created out.txt."}]}',
  '  give_up: {weight: 0.25, steps: [{say: "I will not do that."}]}',
  '',
].join('\n');

/** Task directories (no agent in them: `polar submit --command` gives it) each with a sim.yaml. */
function writeTasks(dir: string, ids: string[]): string {
  for (const id of ids) writeSimTask(dir, id, SCRIPT);
  return dir;
}

type TaskView = { status: string; sessions: { session_id: string; status: string; reward: number | null }[] };

test('polar serve --with-sim + polar submit <task dir>: sessions follow the tasks\' scripts', async () => {
  const tasksDir = writeTasks(join(scratch, 'tasks'), ['script-a', 'script-b']);
  const config = join(scratch, 'polar.yaml');
  writeFileSync(config, [
    'sim: {port: 0}',
    'rollout: {port: 0}',
    `gateway: {heartbeat_interval_s: 0.5, nodes: [{node_id: box-0, port: 0, work_root: ${join(scratch, 'work')}, ${SHELL_AGENT_RUNTIME_YAML}}]}`,
    `store: {path: ${join(scratch, 'polar.db')}}`, '',
  ].join('\n'));
  const { proc: serve, line } = await startPolar(['serve', '--config', config, '--with-sim'], procs);
  const server = line.match(/rollout server on (http:\/\/\S+?),/)?.[1];
  expect(server).toBeDefined();

  const noAgent = runPolarSync(['submit', tasksDir, '--server', server!]);
  expect(noAgent.exitCode).toBe(2);
  expect(noAgent.stderr.toString()).toContain('no agent to run task "script-a": pass --harness NAME');

  const submit = runPolarSync(['submit', tasksDir, '--server', server!, '--command', agent, '--samples', '4']);
  expect(submit.stderr.toString()).toBe('');
  expect(submit.exitCode).toBe(0);

  const script = parseBehaviourScript(SCRIPT);
  const answers = new Map<string, string>(); // session id → the answer its variant ends with
  for (const id of ['script-a', 'script-b']) {
    let view: TaskView | null = null;
    for (let i = 0; i < 400; i++) {
      view = (await (await fetch(`${server}/rollout/task/${id}`)).json()) as TaskView;
      if (view.status !== 'running') break;
      await Bun.sleep(100);
    }
    expect(view!.status).toBe('completed');
    expect(view!.sessions).toHaveLength(4);
    for (const s of view!.sessions) {
      expect(s.status).toBe('COMPLETED');
      const variant = chooseVariant(script, s.session_id);
      expect(s.reward).toBe(variant === 'solve' ? 1 : 0);
      answers.set(s.session_id, variant === 'solve' ? 'Created out.txt.' : 'I will not do that.');
    }
  }
  serve.kill('SIGTERM');
  expect(await serve.exited).toBe(0);
  // The variant is drawn by hashing a random session id, so all 8 sessions give up one run in 65536 (0.25^8), and
  // rewards alone (give_up and the simulator's "no behaviour script" reply both earn 0) cannot show that the scripts
  // were followed. Each session's last answer can, whatever the draw: its variant's, never the default reply.
  const store = openStore(join(scratch, 'polar.db'));
  try {
    for (const [sessionId, answer] of answers) {
      const last = store.completions.listBySession(sessionId).at(-1);
      expect({ sessionId, answer: (last?.ir_response?.content ?? []).map((p) => (p.type === 'text' ? p.text : '')).join('').trim() }).toEqual({ sessionId, answer });
    }
  } finally {
    store.close();
  }
}, 90_000);

test('a stack on an external simulator registers the task\'s script over HTTP before its sessions run', async () => {
  const sim = await SimServer.start({ port: 0 });
  const registered: string[] = [];
  const register = sim.registerScript.bind(sim);
  sim.registerScript = (taskId: string, script: unknown) => {
    registered.push(taskId);
    register(taskId, script);
  };
  const store = openStore(join(scratch, 'external.db'));
  const stack = await startLocalStack({
    store, engine: { kind: 'sim', url: sim.url }, node: { workRoot: join(scratch, 'external-work'), capacity: { max_run_workers: 3 }, runtimeDefaults: { read_only_paths: SHELL_AGENT_PATHS } },
    heartbeatIntervalMs: 200,
  });
  try {
    expect(stack.engineHealth.state()).toEqual({ ok: true, error: null });
    await stack.registered;
    const [loaded] = loadTaskDir(writeTasks(join(scratch, 'external-tasks'), ['external-task']));
    const request = toTaskRequest(loaded!, { num_samples: 3, agent: { harness: 'shell', command: agent, model_name: 'polar-sim' } });
    expect(request.metadata?.sim_script).toEqual(parseBehaviourScript(SCRIPT));
    stack.server.submit(request);
    const script = parseBehaviourScript(SCRIPT);
    for (let i = 0; i < 400 && store.tasks.get('external-task')?.status === 'RUNNING'; i++) await Bun.sleep(100);
    const sessions = stack.server.taskStatus('external-task')!.sessions;
    expect(sessions).toHaveLength(3);
    for (const s of sessions) expect(s.reward).toBe(chooseVariant(script, s.session_id) === 'solve' ? 1 : 0);
    // Once per session at most (concurrent sessions share a registration in flight).
    expect(registered.length).toBeGreaterThanOrEqual(1);
    expect(registered.length).toBeLessThanOrEqual(3);
    expect(new Set(registered)).toEqual(new Set(['external-task']));
  } finally {
    await stack.stop();
    await sim.stop();
    store.close();
  }
}, 60_000);
