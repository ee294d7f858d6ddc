/**
 * Every harness adapter's `agent.settings` has a strict schema (src/core/contracts/harness-settings.ts): a misspelt
 * key or a bad value is refused at submit (runnableProblems) naming its path, for any harness, and the gateway-read
 * sampling keys stay outside it (accepted, checked by their own schema, stripped before the harness sees settings).
 */
import { expect, test } from 'bun:test';
import { HARNESS_NAMES, HARNESS_SETTINGS_SCHEMAS, parseHarnessSettings, runnableProblems } from '../../src/core/contracts/index.ts';
import type { AgentSpec } from '../../src/core/records.ts';
import { taskRequest } from '../support/tasks.ts';

const withAgent = (harness: string, settings: Record<string, unknown>, extra: Partial<AgentSpec> = {}) =>
  taskRequest('t', { agent: { harness, model_name: 'm', settings, ...extra } });

test('every built-in harness has a settings schema, and only those', () => {
  expect(Object.keys(HARNESS_SETTINGS_SCHEMAS).sort()).toEqual([...HARNESS_NAMES].sort());
});

test('a misspelt key is refused for any harness, naming its path', () => {
  expect(runnableProblems(withAgent('pi', { contex_window: 65536 }))).toEqual([{ path: 'agent.settings.contex_window', message: 'unknown key' }]);
  expect(runnableProblems(withAgent('openclaw', { max_token: 1 }))).toEqual([{ path: 'agent.settings.max_token', message: 'unknown key' }]);
  // `-` spellings of the name get the same schema.
  expect(runnableProblems(withAgent('claude-code', { allowed_tool: 'Bash' }))).toEqual([{ path: 'agent.settings.allowed_tool', message: 'unknown key' }]);
  expect(runnableProblems(withAgent('kilo', { retry_limt: 3 }))).toEqual([{ path: 'agent.settings.retry_limt', message: 'unknown key' }]);
  expect(runnableProblems(withAgent('shell', { comand: 'x' }, { command: 'true' }))).toEqual([{ path: 'agent.settings.comand', message: 'unknown key' }]);
  // Adapters that read no settings take none (the Python Polar's codex keys are not read here).
  for (const harness of ['codex', 'qwen_code', 'gemini_cli', 'opencode', 'continue', 'cline']) {
    expect(runnableProblems(withAgent(harness, { reasoning_effort: 'high' }))).toEqual([{ path: 'agent.settings.reasoning_effort', message: 'unknown key' }]);
  }
});

test('a value of the wrong type or out of range is refused, naming its path', () => {
  const paths = (harness: string, settings: Record<string, unknown>) => runnableProblems(withAgent(harness, settings)).map((p) => p.path);
  expect(paths('pi', { api: 'openai' })).toEqual(['agent.settings.api']);
  expect(paths('pi', { context_window: '64k' })).toEqual(['agent.settings.context_window']);
  expect(paths('pi', { max_tokens: 0, reasoning: 'yes' }).sort()).toEqual(['agent.settings.max_tokens', 'agent.settings.reasoning']);
  expect(paths('openclaw', { context_window: 1.5 })).toEqual(['agent.settings.context_window']);
  expect(paths('openclaw', { tools_deny: 'process' })).toEqual(['agent.settings.tools_deny']);
  expect(paths('openclaw', { tools_deny: ['process', ' '] })).toEqual(['agent.settings.tools_deny[1]']);
  expect(paths('claude_code', { allowed_tools: ['Bash'] })).toEqual(['agent.settings.allowed_tools']);
  // 0 does not mean "no retries" to Kilo Code (it waits for ever): docs/protocol-notes.md.
  expect(paths('kilo', { retry_limit: 0 })).toEqual(['agent.settings.retry_limit']);
  expect(paths('shell', { command: 3 })).toEqual(['agent.settings.command']);
});

test('valid settings pass; the sampling keys are accepted for any harness and stripped before the adapter parses', () => {
  const sampling = { sampling_params: { temperature: 0.6 } };
  expect(runnableProblems(withAgent('pi', { api: 'openai-completions', reasoning: true, context_window: 131072, max_tokens: 8192, ...sampling }))).toEqual([]);
  expect(runnableProblems(withAgent('openclaw', { tools_deny: [], context_window: 65536, model_kwargs: { temperature: 1 } }))).toEqual([]);
  expect(runnableProblems(withAgent('codex', sampling))).toEqual([]);
  // The sampling keys keep their own strict schema.
  expect(runnableProblems(withAgent('codex', { sampling_params: { temprature: 1 } }))).toEqual([{ path: 'agent.settings.sampling_params.temprature', message: 'unknown key' }]);
  expect(parseHarnessSettings('pi', { context_window: 65536, ...sampling })).toEqual({ api: 'anthropic-messages', reasoning: false, context_window: 65536, max_tokens: 4096 });
  expect(parseHarnessSettings('kilo', {})).toEqual({ retry_limit: 2 });
  expect(() => parseHarnessSettings('pi', { contex_window: 1 })).toThrow('harness pi: agent.settings.contex_window: unknown key');
});

test("a gateway's own extra adapter (no schema here) gets its settings unchecked; a built-in name keeps its schema", () => {
  const extra = withAgent('my_cli', { anything: 1 });
  expect(runnableProblems(extra, { harnesses: [...HARNESS_NAMES, 'my_cli'] })).toEqual([]);
  expect(runnableProblems(withAgent('pi', { contex_window: 1 }), { harnesses: [...HARNESS_NAMES, 'my_cli'] })).toEqual([{ path: 'agent.settings.contex_window', message: 'unknown key' }]);
});
