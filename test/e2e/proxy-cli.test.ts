/**
 * End to end: the real `claude` (Claude Code) and `qwen` (Qwen Code) CLIs complete a two-turn tool loop through the
 * proxy (`createProxyApp` on Bun.serve) with a scripted fake engine, and both completions are captured. Runs only in a
 * loopback-only network namespace (`npm test`, or `node scripts/test.mjs test/e2e/proxy-cli.test.ts`).
 * CLI flags and environment: docs/protocol-notes.md#harness-clis.
 */
import { expect, test } from 'bun:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expectTwoTurnLoop, runCli, twoTurnShellScript, useFakeEngineProxy } from '../support/harness-e2e.ts';
import { harnessBin, HARNESS_CLIS } from '../support/install-harnesses.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';

const FINAL = 'I ran ls: the directory holds README.txt and main.py.';
const isolated = networkIsolated();
const e2e = useFakeEngineProxy({ isolated, script: twoTurnShellScript({ Bash: 'command', run_shell_command: 'command' }, FINAL), tmpPrefix: 'polar-e2e-' });

test.skipIf(!isolated)(`claude (Claude Code) completes a two-turn tool loop through the proxy ${NEEDS_ISOLATION}`, async () => {
  const claude = harnessBin('@anthropic-ai/claude-code', HARNESS_CLIS['@anthropic-ai/claude-code']!, 'claude');
  expect(claude).not.toBeNull();
  const { home, work } = e2e.workspace();
  const result = await runCli(
    [claude!, '-p', 'Run ls in the current directory and tell me what you see', '--allowedTools', 'Bash,Read,Edit,Write', '--output-format', 'stream-json', '--verbose'],
    {
      HOME: home,
      ANTHROPIC_BASE_URL: e2e.proxy.url,
      ANTHROPIC_API_KEY: 'e2e-claude',
      ANTHROPIC_MODEL: 'claude-sonnet-4-5',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      IS_SANDBOX: '1',
    },
    work,
  );
  const records = e2e.proxy.store.completions.listBySession('e2e-claude');
  if (result.code !== 0) console.error(result.stdout.slice(-3000), result.stderr.slice(-3000));
  expect(result.code).toBe(0);
  const resultEvent = result.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { type: string; result?: string; is_error?: boolean }).find((e) => e.type === 'result');
  expect(resultEvent?.is_error).toBe(false);
  expect(resultEvent?.result).toContain(FINAL);
  expectTwoTurnLoop(records, 'Bash', FINAL);
}, 180_000); // a real CLI on a loaded 2-core box: qwen alone takes 38–49 s

test.skipIf(!isolated)(`qwen (Qwen Code) completes a two-turn tool loop through the proxy ${NEEDS_ISOLATION}`, async () => {
  const qwen = harnessBin('@qwen-code/qwen-code', HARNESS_CLIS['@qwen-code/qwen-code']!, 'qwen');
  expect(qwen).not.toBeNull();
  const { home, work } = e2e.workspace();
  mkdirSync(join(home, '.qwen'), { recursive: true });
  writeFileSync(join(home, '.qwen', 'settings.json'), JSON.stringify({ privacy: { usageStatisticsEnabled: false } }));
  const result = await runCli(
    [qwen!, '--auth-type', 'openai', '--yolo', '-o', 'stream-json', 'Run ls in the current directory and tell me what you see'],
    { HOME: home, OPENAI_BASE_URL: `${e2e.proxy.url}/v1`, OPENAI_API_KEY: 'e2e-qwen', OPENAI_MODEL: 'qwen3-coder-plus' },
    work,
  );
  if (result.code !== 0) console.error(result.stdout.slice(-3000), result.stderr.slice(-3000));
  expect(result.code).toBe(0);
  // Qwen Code exits 0 even when every call failed: the result event is the truth (docs/protocol-notes.md#error-behaviour).
  const resultEvent = result.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { type: string; result?: string; is_error?: boolean }).find((e) => e.type === 'result');
  expect(resultEvent?.is_error).toBe(false);
  expect(resultEvent?.result).toContain(FINAL);
  expectTwoTurnLoop(e2e.proxy.store.completions.listBySession('e2e-qwen'), 'run_shell_command', FINAL);
}, 180_000); // a real CLI on a loaded 2-core box: qwen alone takes 38–49 s
