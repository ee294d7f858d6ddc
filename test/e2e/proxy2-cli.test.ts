/**
 * End to end: the real `codex` (Codex, OpenAI Responses) and `gemini` (Gemini CLI, generateContent) CLIs complete a
 * two-turn tool loop through the proxy (`createProxyApp` on Bun.serve) with a scripted fake engine, and both completions
 * are captured. Runs only in a loopback-only network namespace (`npm test`, or
 * `node scripts/test.mjs test/e2e/proxy2-cli.test.ts`). CLI flags and environment: docs/protocol-notes.md#harness-clis.
 */
import { expect, test } from 'bun:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CompletionRecord } from '../../src/core/records.ts';
import { expectTwoTurnLoop as expectLoopCaptured, runCli, twoTurnShellScript, useFakeEngineProxy } from '../support/harness-e2e.ts';
import { harnessBin, HARNESS_CLIS } from '../support/install-harnesses.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';

const TASK = 'Run ls in the current directory and tell me what you see';
const FINAL = 'I ran ls: the directory holds README.txt and main.py.';
/** Shell-like tool of each harness and the name of its command argument (docs/protocol-notes.md#shell-like-tools). */
const SHELL_TOOLS: Record<string, string> = { exec_command: 'cmd', run_shell_command: 'command' };

/** Records of a session that answered with a tool call, then with the final text after the tool result. */
function expectTwoTurnLoop(records: CompletionRecord[], shell: string, dialect: CompletionRecord['dialect']): void {
  const { toolTurn, finalTurn } = expectLoopCaptured(records, shell, FINAL);
  for (const rec of [toolTurn, finalTurn]) expect(rec.dialect).toBe(dialect);
  // The tool result the harness sent back is paired with the call's id.
  const call = toolTurn.ir_response!.toolCalls[0]!;
  const toolMessage = finalTurn.ir_request.messages.find((m) => m.role === 'tool')!;
  expect(toolMessage.role === 'tool' && toolMessage.toolCallId).toBe(call.id);
}

const isolated = networkIsolated();
const e2e = useFakeEngineProxy({ isolated, script: twoTurnShellScript(SHELL_TOOLS, FINAL), tmpPrefix: 'polar-e2e2-' });

test.skipIf(!isolated)(`codex (Codex, Responses API) completes a two-turn tool loop through the proxy ${NEEDS_ISOLATION}`, async () => {
  const codex = harnessBin('@openai/codex', HARNESS_CLIS['@openai/codex']!, 'codex');
  expect(codex).not.toBeNull();
  const { home, work } = e2e.workspace();
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
      `base_url = "${e2e.proxy.url}/v1"`,
      'env_key = "POLAR_API_KEY"',
      'wire_api = "responses"',
      '[analytics]',
      'enabled = false',
      '',
    ].join('\n'),
  );
  const result = await runCli(
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
  expectTwoTurnLoop(e2e.proxy.store.completions.listBySession('e2e-codex'), 'exec_command', 'openai-responses');
}, 60_000);

test.skipIf(!isolated)(`gemini (Gemini CLI, generateContent) completes a two-turn tool loop through the proxy ${NEEDS_ISOLATION}`, async () => {
  const gemini = harnessBin('@google/gemini-cli', HARNESS_CLIS['@google/gemini-cli']!, 'gemini');
  expect(gemini).not.toBeNull();
  const { home, work } = e2e.workspace();
  mkdirSync(join(home, '.gemini'), { recursive: true });
  writeFileSync(
    join(home, '.gemini', 'settings.json'),
    JSON.stringify({ security: { auth: { selectedType: 'gemini-api-key' } }, privacy: { usageStatisticsEnabled: false } }),
  );
  const result = await runCli(
    [gemini!, '-m', 'gemini-2.5-pro', '--yolo', '-o', 'stream-json', '-p', TASK],
    { HOME: home, GOOGLE_GEMINI_BASE_URL: e2e.proxy.url, GEMINI_API_KEY: 'e2e-gemini', GEMINI_CLI_TRUST_WORKSPACE: 'true' },
    work,
  );
  if (result.code !== 0) console.error(result.stdout.slice(-3000), result.stderr.slice(-3000));
  expect(result.code).toBe(0);
  expect(result.stdout).toContain(FINAL);
  expectTwoTurnLoop(e2e.proxy.store.completions.listBySession('e2e-gemini'), 'run_shell_command', 'gemini');
}, 60_000);
