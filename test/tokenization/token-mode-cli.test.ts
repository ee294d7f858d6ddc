/**
 * `polar proxy --mode token` as a process against the simulator: usage errors exit 2; a call is captured in token mode;
 * a golden mismatch refuses to start unless accepted; `polar sim --tokenizer DIR` serves another family.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SimServer } from '../../src/sim/server.ts';
import { openStore } from '../../src/store/index.ts';
import { loadTokenizer } from '../../src/tokenization/tokenizer.ts';
import { modelDir } from '../support/model-dirs.ts';
import { firstLine, startPolarProxy } from '../support/polar-cli.ts';

const root = join(import.meta.dir, '..', '..');
const bun = process.execPath;
const dir = mkdtempSync(join(tmpdir(), 'polar-token-cli-'));
let sim: SimServer;

beforeAll(async () => {
  sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0 });
});
afterAll(async () => {
  await sim.stop();
  rmSync(dir, { recursive: true, force: true });
});

function polar(args: string[]) {
  return Bun.spawnSync([bun, join(root, 'src/main.ts'), 'proxy', '--port', '0', ...args], { cwd: dir, stdout: 'pipe', stderr: 'pipe' });
}

test('token-mode usage errors exit 2', () => {
  const rate = polar(['--engine', 'sim', '--engine-url', sim.url, '--mode', 'token', '--golden-rate', '2']);
  expect(rate.exitCode).toBe(2);
  expect(rate.stderr.toString()).toContain('--golden-rate must be in [0, 1]');
  const chatTokenizer = polar(['--engine', 'sim', '--engine-url', sim.url, '--tokenizer', dir]);
  expect(chatTokenizer.exitCode).toBe(2);
  expect(chatTokenizer.stderr.toString()).toContain('apply to --mode token only');
  const llama = polar(['--engine', 'llamacpp', '--engine-url', sim.url]);
  expect(llama.exitCode).toBe(2);
  expect(llama.stderr.toString()).toContain('use --mode token');
});

test('a tokenizer directory without tokenizer.json fails the start-up: exit 1', () => {
  const bad = polar(['--engine', 'sim', '--engine-url', sim.url, '--mode', 'token', '--tokenizer', dir]);
  expect(bad.exitCode).toBe(1);
  expect(bad.stderr.toString()).toContain('has no tokenizer.json');
});

test('serves in token mode, records mode "token", exposes the counters on GET /', async () => {
  const db = join(dir, 'records.db');
  const { proc, url } = await startPolarProxy(['--port', '0', '--engine', 'sim', '--engine-url', sim.url, '--mode', 'token', '--db', db], dir);
  const answer = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer cli-token', 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hello' }] }) });
  expect(answer.status).toBe(200);
  const health = (await (await fetch(url)).json()) as { engine_stats: { mode: string; family: string; golden: { checks: number; mismatches: number } } };
  expect(health.engine_stats).toMatchObject({ mode: 'token', family: 'qwen3', golden: { mismatches: 0 } });
  expect(health.engine_stats.golden.checks).toBeGreaterThanOrEqual(1);
  proc.kill('SIGTERM');
  expect(await proc.exited).toBe(0);
  const store = openStore(db);
  const records = store.completions.listBySession('cli-token');
  store.close();
  expect(records.length).toBe(1);
  expect(records[0]!.mode).toBe('token');
  expect(records[0]!.capture_error).toBeNull();
  expect(sim.tokenizer.decode(records[0]!.prompt_ids)).toBe('<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n');
});

test('a start-up golden mismatch (Llama 3.1 files against a Qwen3 engine) refuses to start: exit 1; --allow-golden-mismatch starts', async () => {
  const llama = modelDir('llama-3.1');
  // Not spawnSync: the simulator answering the probe runs in this process.
  const proc0 = Bun.spawn([bun, join(root, 'src/main.ts'), 'proxy', '--port', '0', '--engine', 'sim', '--engine-url', sim.url, '--mode', 'token', '--tokenizer', llama, '--db', join(dir, 'refused.db')], { cwd: dir, stdout: 'pipe', stderr: 'pipe' });
  const [stderr, code] = await Promise.all([new Response(proc0.stderr).text(), proc0.exited]);
  expect(code).toBe(1);
  expect(stderr).toContain('token mode refuses to start: our llama3 chat template rendering');
  expect(stderr).toContain('--allow-golden-mismatch');
  const { proc, url } = await startPolarProxy(['--port', '0', '--engine', 'sim', '--engine-url', sim.url, '--mode', 'token', '--tokenizer', llama, '--allow-golden-mismatch', '--db', join(dir, 'allowed.db')], dir);
  const health = (await (await fetch(url)).json()) as { engine_stats: { family: string; golden: { mismatches: number } } };
  expect(health.engine_stats.family).toBe('llama3');
  expect(health.engine_stats.golden.mismatches).toBe(1);
  proc.kill('SIGTERM');
  expect(await proc.exited).toBe(0);
});

test('polar sim --tokenizer DIR serves that model: gpt-oss renders harmony, Llama 3.1 starts with <|begin_of_text|>', async () => {
  for (const [name, start] of [['gpt-oss', '<|start|>system<|message|>'], ['llama-3.1', '<|begin_of_text|>']] as const) {
    const proc = Bun.spawn([bun, join(root, 'src/main.ts'), 'sim', '--port', '0', '--tokenizer', modelDir(name)], { cwd: dir, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' });
    const line = await firstLine(proc.stdout);
    const url = /on (http:\/\/\S+)/.exec(line)?.[1];
    expect(line).toContain(`serving ${name === 'gpt-oss' ? 'gpt-oss-20b' : 'Llama-3.1-8B-Instruct'}`);
    const tokenized = (await (await fetch(`${url}/tokenize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }) })).json()) as { tokens: number[] };
    const tk = await loadTokenizer(modelDir(name));
    expect(tk.decode(tokenized.tokens).startsWith(start)).toBe(true);
    if (name === 'llama-3.1') expect(tokenized.tokens[0]).toBe(128000);
    proc.kill('SIGTERM');
    await proc.exited;
  }
});
