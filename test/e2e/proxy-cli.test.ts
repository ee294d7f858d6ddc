/**
 * End to end: the real `claude` (Claude Code) and `qwen` (Qwen Code) CLIs complete a two-turn tool loop through the
 * proxy (`createProxyApp` on Bun.serve) with a scripted fake engine, and both completions are captured. Runs only in a
 * loopback-only network namespace (`npm test`, or `node scripts/test.mjs test/e2e/proxy-cli.test.ts`).
 * CLI flags and environment: PROTOCOL-NOTES.md §4.
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

const SHELL_TOOLS = ['Bash', 'run_shell_command'];
const FINAL = 'I ran ls: the directory holds README.txt and main.py.';

/** Turn 1: call the harness's shell tool; once a tool result is in the conversation: a final answer. */
function twoTurnScript(body: Record<string, unknown>): FakeReply {
  const messages = body.messages as Array<{ role: string }>;
  const tools = ((body.tools ?? []) as Array<{ function: { name: string } }>).map((t) => t.function.name);
  const shell = SHELL_TOOLS.find((name) => tools.includes(name));
  if (messages.some((m) => m.role === 'tool') || !shell) return { kind: 'text', text: FINAL };
  return { kind: 'tool-calls', calls: [{ name: shell, arguments: { command: 'ls' } }] };
}

let engine: FakeEngine;
let proxy: TestProxy;
const dirs: string[] = [];

function workspace(): { home: string; work: string } {
  const root = mkdtempSync(join(tmpdir(), 'polar-e2e-'));
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
function expectTwoTurnLoop(records: CompletionRecord[], shell: string): void {
  const toolTurn = records.find((r) => r.ir_response?.toolCalls.some((c) => c.name === shell));
  const finalTurn = records.find((r) => r.ir_request.messages.some((m) => m.role === 'tool') && r.ir_response?.content.some((p) => p.type === 'text' && p.text === FINAL));
  expect(toolTurn).toBeDefined();
  expect(finalTurn).toBeDefined();
  expect(finalTurn!.seq).toBeGreaterThan(toolTurn!.seq);
  for (const rec of [toolTurn!, finalTurn!]) {
    expect(rec.capture_error).toBeNull();
    expect(rec.response_ids.length).toBe(rec.logprobs.length);
    expect(rec.prompt_ids.length).toBeGreaterThan(0);
  }
  // The tool result the harness sent back is the real output of `ls` in its work tree.
  const toolMessage = finalTurn!.ir_request.messages.find((m) => m.role === 'tool')!;
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

test.skipIf(!isolated)(`claude (Claude Code) completes a two-turn tool loop through the proxy ${NEEDS_ISOLATION}`, async () => {
  const claude = harnessBin('@anthropic-ai/claude-code', HARNESS_CLIS['@anthropic-ai/claude-code']!, 'claude');
  expect(claude).not.toBeNull();
  const { home, work } = workspace();
  const result = await run(
    [claude!, '-p', 'Run ls in the current directory and tell me what you see', '--allowedTools', 'Bash,Read,Edit,Write', '--output-format', 'stream-json', '--verbose'],
    {
      HOME: home,
      ANTHROPIC_BASE_URL: proxy.url,
      ANTHROPIC_API_KEY: 'e2e-claude',
      ANTHROPIC_MODEL: 'claude-sonnet-4-5',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      IS_SANDBOX: '1',
    },
    work,
  );
  const records = proxy.store.completions.listBySession('e2e-claude');
  if (result.code !== 0) console.error(result.stdout.slice(-3000), result.stderr.slice(-3000));
  expect(result.code).toBe(0);
  const resultEvent = result.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { type: string; result?: string; is_error?: boolean }).find((e) => e.type === 'result');
  expect(resultEvent?.is_error).toBe(false);
  expect(resultEvent?.result).toContain(FINAL);
  expectTwoTurnLoop(records, 'Bash');
}, 60_000);

test.skipIf(!isolated)(`qwen (Qwen Code) completes a two-turn tool loop through the proxy ${NEEDS_ISOLATION}`, async () => {
  const qwen = harnessBin('@qwen-code/qwen-code', HARNESS_CLIS['@qwen-code/qwen-code']!, 'qwen');
  expect(qwen).not.toBeNull();
  const { home, work } = workspace();
  mkdirSync(join(home, '.qwen'), { recursive: true });
  writeFileSync(join(home, '.qwen', 'settings.json'), JSON.stringify({ privacy: { usageStatisticsEnabled: false } }));
  const result = await run(
    [qwen!, '--auth-type', 'openai', '--yolo', '-o', 'stream-json', 'Run ls in the current directory and tell me what you see'],
    { HOME: home, OPENAI_BASE_URL: `${proxy.url}/v1`, OPENAI_API_KEY: 'e2e-qwen', OPENAI_MODEL: 'qwen3-coder-plus' },
    work,
  );
  if (result.code !== 0) console.error(result.stdout.slice(-3000), result.stderr.slice(-3000));
  expect(result.code).toBe(0);
  // Qwen Code exits 0 even when every call failed: the result event is the truth (PROTOCOL-NOTES §4).
  const resultEvent = result.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { type: string; result?: string; is_error?: boolean }).find((e) => e.type === 'result');
  expect(resultEvent?.is_error).toBe(false);
  expect(resultEvent?.result).toContain(FINAL);
  expectTwoTurnLoop(proxy.store.completions.listBySession('e2e-qwen'), 'run_shell_command');
}, 60_000);
