/**
 * `engine.tokenizer` on the service path: `polar serve --with-sim` with `engine.mode: token` and a Llama 3.1 model
 * directory runs a session whose prompt ids start with `<|begin_of_text|>` (128000), rendered by Llama 3.1's own
 * template; `polar gateway` in token mode against an engine serving another model refuses to start (exit 1) on the
 * golden mismatch unless `engine.allow_golden_mismatch` is set; so does `polar run` unless `--allow-golden-mismatch`.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SimServer } from '../../src/sim/server.ts';
import { openStore } from '../../src/store/index.ts';
import { loadTokenizer } from '../../src/tokenization/tokenizer.ts';
import { modelDir } from '../support/model-dirs.ts';
import { REPO_ROOT, SHELL_AGENT_COMMAND, SHELL_AGENT_RUN_FLAGS, SHELL_AGENT_RUNTIME_YAML, startPolar, useScratch, writeSimTask } from '../support/polar-cli.ts';

const { dir: scratch, procs } = useScratch('polar-serve-token-');
let qwenSim: SimServer;
beforeAll(async () => {
  qwenSim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0 });
});
afterAll(async () => {
  await qwenSim.stop();
});

test('polar serve: engine.mode token + engine.tokenizer (Llama 3.1) — the session\'s prompt ids start with <|begin_of_text|> 128000', async () => {
  const scripts = join(scratch, 'scripts');
  mkdirSync(scripts);
  writeFileSync(join(scripts, 'llama-task.yaml'), 'variants:\n  solve: {weight: 1, steps: [{shell: "echo ok > out.txt"}, {say: "done"}]}\n');
  const db = join(scratch, 'serve.db');
  const config = join(scratch, 'serve.yaml');
  writeFileSync(config, [
    `engine: {mode: token, tokenizer: ${modelDir('llama-3.1')}}`,
    `sim: {port: 0, scripts: ${scripts}}`,
    'rollout: {port: 0}',
    `gateway: {heartbeat_interval_s: 0.5, nodes: [{node_id: box-0, port: 0, work_root: ${join(scratch, 'work')}, ${SHELL_AGENT_RUNTIME_YAML}}]}`,
    `store: {path: ${db}}`, '',
  ].join('\n'));
  const { proc: serve, line } = await startPolar(['serve', '--config', config, '--with-sim'], procs);
  const server = line.match(/rollout server on (http:\/\/\S+?),/)?.[1];
  expect(server).toBeDefined();
  const task = {
    task_id: 'llama-task', instruction: 'Create out.txt containing ok.', num_samples: 1, timeout_seconds: 60,
    agent: { harness: 'shell', command: SHELL_AGENT_COMMAND, model_name: 'polar-sim' },
    builder: { strategy: 'prefix_merging' }, runtime: { kind: 'local' },
    evaluator: { strategy: 'test_on_output', config: { command: 'grep -q ok out.txt' } },
  };
  expect((await fetch(`${server}/rollout/task/submit`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(task) })).status).toBe(200);
  let status: { status: string; sessions: { status: string; reward: number | null }[] } | null = null;
  for (let i = 0; i < 300; i++) {
    status = (await (await fetch(`${server}/rollout/task/llama-task`)).json()) as typeof status;
    if (status!.status !== 'running') break;
    await Bun.sleep(100);
  }
  expect(status!.sessions.map((s) => [s.status, s.reward])).toEqual([['COMPLETED', 1]]);
  serve.kill('SIGTERM');
  expect(await serve.exited).toBe(0);

  const store = openStore(db);
  const sessions = store.sessions.listByTask('llama-task');
  const records = store.completions.listBySession(sessions[0]!.session_id);
  store.close();
  expect(records.length).toBe(2);
  const llama = await loadTokenizer(modelDir('llama-3.1'));
  for (const rec of records) {
    expect(rec.mode).toBe('token');
    expect(rec.prompt_ids[0]).toBe(128000);
    expect(llama.decode(rec.prompt_ids.slice(0, 5))).toBe('<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n');
    expect(rec.response_ids.at(-1)).toBe(128009);
  }
  // The first turn called the shell tool the Llama 3.1 way: a JSON object with "parameters".
  expect(llama.decode(records[0]!.response_ids)).toStartWith('{"name": ');
}, 90_000);

test('polar gateway in token mode: a golden mismatch exits 1; engine.allow_golden_mismatch starts it', async () => {
  const write = (name: string, allow: boolean) => {
    const config = join(scratch, `${name}.yaml`);
    writeFileSync(config, [
      `engine: {kind: sim, url: "${qwenSim.url}", mode: token, tokenizer: ${modelDir('gpt-oss')}, allow_golden_mismatch: ${allow}}`,
      `gateway: {nodes: [{node_id: gw, port: 0, work_root: ${join(scratch, `${name}-work`)}}]}`,
      `store: {path: ${join(scratch, `${name}.db`)}}`, '',
    ].join('\n'));
    return config;
  };
  const refused = Bun.spawn([process.execPath, 'src/main.ts', 'gateway', '--config', write('refuse', false), '--node-id', 'gw'], { cwd: join(import.meta.dir, '..', '..'), stdout: 'pipe', stderr: 'pipe' });
  const [stderr, code] = await Promise.all([new Response(refused.stderr).text(), refused.exited]);
  expect(code).toBe(1);
  expect(stderr).toContain('token mode refuses to start: our gpt-oss chat template rendering');
  const { proc, line } = await startPolar(['gateway', '--config', write('allow', true), '--node-id', 'gw'], procs);
  const url = line.match(/listening on (http:\/\/\S+)/)?.[1];
  expect(url).toBeDefined();
  expect(((await (await fetch(`${url}/health`)).json()) as { node_id: string }).node_id).toBe('gw');
  proc.kill('SIGTERM');
  expect(await proc.exited).toBe(0);
}, 60_000);

test('polar run --engine … --mode token --tokenizer DIR: a golden mismatch exits 1 before running anything; --allow-golden-mismatch runs', async () => {
  const tasks = writeSimTask(join(scratch, 'run-tasks'), 'run-task', 'variants:\n  solve: {weight: 1, steps: [{shell: "echo ok > out.txt"}, {say: "done"}]}\n');
  const run = async (extra: string[], out: string) => {
    const proc = Bun.spawn([process.execPath, 'src/main.ts', 'run', tasks, '--harness', 'shell', '--command', SHELL_AGENT_COMMAND, '--engine', 'sim', '--engine-url', qwenSim.url,
      '--mode', 'token', '--tokenizer', modelDir('llama-3.1'), '--out', join(scratch, out), '--quiet', ...SHELL_AGENT_RUN_FLAGS, '--ro-path', scratch, ...extra], { cwd: REPO_ROOT, stdout: 'pipe', stderr: 'pipe' });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { stdout, stderr, code };
  };
  const refused = await run([], 'refused');
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('token mode refuses to start: our llama3 chat template rendering');
  const allowed = await run(['--allow-golden-mismatch'], 'allowed');
  expect(allowed.code).toBe(0);
  const store = openStore(join(scratch, 'allowed', 'results.db'));
  const session = store.sessions.listByTask('run-task')[0]!;
  const records = store.completions.listBySession(session.session_id);
  store.close();
  // Our Llama rendering was sent as is (the Qwen engine mis-reads it, which is what was accepted).
  expect(records[0]!.prompt_ids[0]).toBe(128000);
}, 90_000);
