/**
 * End to end: the real `codex` (Codex, OpenAI Responses) and `gemini` (Gemini CLI, generateContent) CLIs complete a
 * two-turn tool loop through the proxy (`createProxyApp` on Bun.serve) with a scripted fake engine, and both completions
 * are captured. Runs only in a loopback-only network namespace (`npm test`, or
 * `node scripts/test.mjs test/e2e/proxy2-cli.test.ts`). CLI flags and environment: PROTOCOL-NOTES.md §4.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CompletionRecord } from '../../src/core/records.ts';
import { startFakeEngine, type FakeEngine, type FakeReply } from '../support/fake-engine.ts';
import { harnessBin, HARNESS_CLIS } from '../support/install-harnesses.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';
import { startTestProxy, type TestProxy } from '../support/proxy-harness.ts';

const TASK = 'Run ls in the current directory and tell me what you see';
const FINAL = 'I ran ls: the directory holds README.txt and main.py.';
/** Shell-like tool of each harness and the name of its command argument (PROTOCOL-NOTES §4). */
const SHELL_TOOLS: Record<string, string> = { exec_command: 'cmd', run_shell_command: 'command' };

/** Turn 1: call the harness's shell tool; once a tool result is in the conversation: a final answer. */
function twoTurnScript(body: Record<string, unknown>): FakeReply {
  const messages = body.messages as Array<{ role: string }>;
  const tools = ((body.tools ?? []) as Array<{ function: { name: string } }>).map((t) => t.function.name);
  const shell = Object.keys(SHELL_TOOLS).find((name) => tools.includes(name));
  if (messages.some((m) => m.role === 'tool') || !shell) return { kind: 'text', text: FINAL };
  return { kind: 'tool-calls', calls: [{ name: shell, arguments: { [SHELL_TOOLS[shell]!]: 'ls' } }] };
}

let engine: FakeEngine;
let proxy: TestProxy;
const dirs: string[] = [];

function workspace(): { home: string; work: string } {
  const root = mkdtempSync(join(tmpdir(), 'polar-e2e2-'));
  dirs.push(root);
  const home = join(root, 'home');
  const work = join(root, 'work');
  mkdirSync(home, { recursive: true });
  mkdirSync(work, { recursive: true });
  writeFileSync(join(work, 'README.txt'), 'hello\n');
  writeFileSync(join(work, 'main.py'), 'print("hi")\n');
  return { home, work };
}

async function run(cmd: string[], env: Record<string, string>, cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn(cmd, { cwd, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' });
  const timer = setTimeout(() => proc.kill('SIGKILL'), 50_000);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code, stdout, stderr };
}

/** Records of a session that answered with a tool call, then with the final text after the tool result. */
function expectTwoTurnLoop(records: CompletionRecord[], shell: string, dialect: CompletionRecord['dialect']): void {
  const toolTurn = records.find((r) => r.ir_response?.toolCalls.some((c) => c.name === shell));
  const finalTurn = records.find((r) => r.ir_request.messages.some((m) => m.role === 'tool') && r.ir_response?.content.some((p) => p.type === 'text' && p.text === FINAL));
  expect(toolTurn).toBeDefined();
  expect(finalTurn).toBeDefined();
  expect(finalTurn!.seq).toBeGreaterThan(toolTurn!.seq);
  for (const rec of [toolTurn!, finalTurn!]) {
    expect(rec.dialect).toBe(dialect);
    expect(rec.capture_error).toBeNull();
    expect(rec.response_ids.length).toBe(rec.logprobs.length);
    expect(rec.prompt_ids.length).toBeGreaterThan(0);
  }
  // The tool result the harness sent back is the real output of `ls` in its work tree, paired with the call's id.
  const call = toolTurn!.ir_response!.toolCalls[0]!;
  const toolMessage = finalTurn!.ir_request.messages.find((m) => m.role === 'tool')!;
  expect(toolMessage.role === 'tool' && toolMessage.toolCallId).toBe(call.id);
  expect(JSON.stringify(toolMessage)).toContain('README.txt');
}

const isolated = networkIsolated();

beforeAll(async () => {
  if (!isolated) return;
  engine = await startFakeEngine({ shape: 'vllm', servedModel: 'qwen3-e2e', script: twoTurnScript });
  proxy = await startTestProxy({ engineUrl: engine.url, kind: 'vllm', options: { keepaliveIntervalMs: 1000 } });
});
afterAll(async () => {
  await proxy?.stop();
  await engine?.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

test.skipIf(!isolated)(`codex (Codex, Responses API) completes a two-turn tool loop through the proxy ${NEEDS_ISOLATION}`, async () => {
  const codex = harnessBin('@openai/codex', HARNESS_CLIS['@openai/codex']!, 'codex');
  expect(codex).not.toBeNull();
  const { home, work } = workspace();
  const codexHome = join(home, '.codex');
  mkdirSync(codexHome, { recursive: true });
  writeFileSync(
    join(codexHome, 'config.toml'),
    [
      'model = "gpt-5.5"',
      'model_provider = "polar"',
      'check_for_update_on_startup = false',
      '[model_providers.polar]',
      'name = "polar"',
      `base_url = "${proxy.url}/v1"`,
      'env_key = "POLAR_API_KEY"',
      'wire_api = "responses"',
      '[analytics]',
      'enabled = false',
      '',
    ].join('\n'),
  );
  const result = await run(
    [codex!, 'exec', '--json', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', '--disable', 'plugins', '--disable', 'remote_plugin', TASK],
    { HOME: home, CODEX_HOME: codexHome, POLAR_API_KEY: 'e2e-codex' },
    work,
  );
  if (result.code !== 0) console.error(result.stdout.slice(-3000), result.stderr.slice(-3000));
  expect(result.code).toBe(0);
  const messages = result.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { type: string; item?: { type: string; text?: string } })
    .filter((e) => e.type === 'item.completed' && e.item?.type === 'agent_message');
  expect(messages.at(-1)?.item?.text).toContain(FINAL);
  expectTwoTurnLoop(proxy.store.completions.listBySession('e2e-codex'), 'exec_command', 'openai-responses');
}, 60_000);

test.skipIf(!isolated)(`gemini (Gemini CLI, generateContent) completes a two-turn tool loop through the proxy ${NEEDS_ISOLATION}`, async () => {
  const gemini = harnessBin('@google/gemini-cli', HARNESS_CLIS['@google/gemini-cli']!, 'gemini');
  expect(gemini).not.toBeNull();
  const { home, work } = workspace();
  mkdirSync(join(home, '.gemini'), { recursive: true });
  writeFileSync(
    join(home, '.gemini', 'settings.json'),
    JSON.stringify({ security: { auth: { selectedType: 'gemini-api-key' } }, privacy: { usageStatisticsEnabled: false } }),
  );
  const result = await run(
    [gemini!, '-m', 'gemini-2.5-pro', '--yolo', '-o', 'stream-json', '-p', TASK],
    { HOME: home, GOOGLE_GEMINI_BASE_URL: proxy.url, GEMINI_API_KEY: 'e2e-gemini', GEMINI_CLI_TRUST_WORKSPACE: 'true' },
    work,
  );
  if (result.code !== 0) console.error(result.stdout.slice(-3000), result.stderr.slice(-3000));
  expect(result.code).toBe(0);
  expect(result.stdout).toContain(FINAL);
  expectTwoTurnLoop(proxy.store.completions.listBySession('e2e-gemini'), 'run_shell_command', 'gemini');
}, 60_000);
