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
  // Adapters that read no settings take none; those that read the Python Polar's keys take only those.
  for (const harness of ['qwen_code', 'opencode', 'continue', 'cline', 'gemini_cli', 'codex']) {
    expect(runnableProblems(withAgent(harness, { reasoning_efort: 'high' }))).toEqual([{ path: 'agent.settings.reasoning_efort', message: 'unknown key' }]);
  }
  // A reference key read for one harness is not a key of another that has no use for it.
  expect(runnableProblems(withAgent('qwen_code', { reasoning_effort: 'high' }))).toEqual([{ path: 'agent.settings.reasoning_effort', message: 'unknown key' }]);
  expect(runnableProblems(withAgent('opencode', { thinking: 'low' }))).toEqual([{ path: 'agent.settings.thinking', message: 'unknown key' }]);
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
  // The Python Polar's keys, checked as strictly.
  expect(paths('codex', { reasoning_effort: 'max', reasoning_summary: 'short' }).sort()).toEqual(['agent.settings.reasoning_effort', 'agent.settings.reasoning_summary']);
  expect(paths('codex', { version: 125 })).toEqual(['agent.settings.version']);
  expect(paths('pi', { api_type: 'openai', thinking: 'max', compat: [] }).sort()).toEqual(['agent.settings.api_type', 'agent.settings.compat', 'agent.settings.thinking']);
  expect(paths('claude_code', { max_turns: 0, reasoning_effort: 'minimal', max_budget_usd: -1, max_thinking_tokens: 1.5 }).sort())
    .toEqual(['agent.settings.max_budget_usd', 'agent.settings.max_thinking_tokens', 'agent.settings.max_turns', 'agent.settings.reasoning_effort']);
  expect(paths('gemini_cli', { sandbox: 'docker' })).toEqual(['agent.settings.sandbox']);
  expect(paths('openclaw', { thinking: 'huge', openclaw_agent_id: 'ops' }).sort()).toEqual(['agent.settings.openclaw_agent_id', 'agent.settings.thinking']);
});

test("the Python Polar's keys parse to what the adapters read; api_type is pi's api; nulls mean unset", () => {
  expect(parseHarnessSettings('pi', { api_type: 'openai-responses' })).toEqual({ api: 'openai-responses', reasoning: false, context_window: 32768, max_tokens: 4096 });
  expect(parseHarnessSettings('pi', { api: 'openai-responses', api_type: 'openai-responses' }).api).toBe('openai-responses');
  expect(() => parseHarnessSettings('pi', { api: 'anthropic-messages', api_type: 'openai-completions' })).toThrow('agent.settings.api_type: conflicts with agent.settings.api');
  expect(parseHarnessSettings('claude_code', { allowed_tools: null }).allowed_tools).toBe('Bash,Read,Edit,Write');
  expect(parseHarnessSettings('codex', { version: '', reasoning_effort: null })).toEqual({ version: '', reasoning_effort: null });
  expect(runnableProblems(withAgent('codex', { version: null }))).toEqual([]);
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
