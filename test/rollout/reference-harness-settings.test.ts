/**
 * TaskRequests shaped as a trainer written for the Python Polar sends them (test/fixtures/reference/
 * harness-task-requests.json: a pydantic model_dump() with the harness keys its presets read) are accepted by
 * `POST /rollout/task/submit`, and every one of those keys reaches the CLI the way the gateway launches it
 * (session-stages.ts: the adapter gets `harnessSettings(task.agent.settings)`), while the gateway-read keys
 * (`model_kwargs`, `sampling_seed`) become the task's sampling. A key this server cannot honour is a 400 saying why.
 */
import { afterEach, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CODEX_VERSION, harnessSettings, taskSamplingOf, type TaskRequest } from '../../src/core/contracts/index.ts';
import { getHarnessAdapter } from '../../src/gateway/harnesses/index.ts';
import type { HarnessContext, HarnessLaunch } from '../../src/gateway/harnesses/types.ts';
import { RolloutServer } from '../../src/rollout/server.ts';
import { openStore } from '../../src/store/index.ts';

const fixture = JSON.parse(readFileSync(join(import.meta.dir, '../fixtures/reference/harness-task-requests.json'), 'utf8')) as { tasks: Record<string, unknown>[] };
const byId = (id: string) => {
  const task = fixture.tasks.find((t) => t.task_id === id);
  if (!task) throw new Error(`no fixture task ${id}`);
  return structuredClone(task) as Record<string, unknown> & { agent: { harness: string; settings: Record<string, unknown> } };
};

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

function server() {
  const store = openStore(':memory:');
  const s = new RolloutServer({ store, clock: () => 1_000_000, tickMs: 60_000, heartbeatTimeoutMs: 5_000 }).start();
  cleanups.push(() => store.close());
  cleanups.push(() => s.stop());
  return { url: s.url, store };
}

async function submit(url: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${url}/rollout/task/submit`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** Fixture task `id` copied as `taskId` with `settings` as its agent settings. */
function variant(id: string, taskId: string, settings: Record<string, unknown>) {
  const task = byId(id);
  task.task_id = taskId;
  task.agent.settings = settings;
  return task;
}

/** Submit a task that must be refused: asserts the 400 and returns its error text. */
async function refusal(url: string, task: unknown): Promise<string> {
  const refused = await submit(url, task);
  expect(refused.status).toBe(400);
  return String(refused.body.error);
}

/** The adapter's launch for a stored task, as the gateway builds it at INIT. */
function launchOf(task: TaskRequest): HarnessLaunch {
  const ctx: HarnessContext = {
    sessionId: 'ps_secret', instruction: task.instruction, modelName: 'served-model', gatewayUrl: 'http://127.0.0.1:4321',
    home: '/s/home', workDir: '/s/work', binPath: '/bin/cli', installDir: '/cache/node_modules', settings: harnessSettings(task.agent.settings),
  };
  return getHarnessAdapter(task.agent.harness!).launch(ctx);
}
const fileOf = (launch: HarnessLaunch, path: string) => {
  const f = launch.files.find((x) => x.path === path);
  if (!f) throw new Error(`no file ${path}`);
  return f.content;
};
/** The value after `flag` in argv (undefined when the flag is absent). */
const after = (argv: string[], flag: string) => (argv.includes(flag) ? argv[argv.indexOf(flag) + 1] : undefined);

test('every reference-shaped TaskRequest of the fixture is accepted at submit and stored with its settings', async () => {
  const { url, store } = server();
  expect(fixture.tasks.length).toBe(7);
  for (const task of fixture.tasks) {
    const answer = await submit(url, task);
    expect({ id: task.task_id, status: answer.status, error: answer.body.error }).toEqual({ id: task.task_id, status: 200, error: undefined });
    expect(store.tasks.get(String(task.task_id))!.task.agent.settings).toEqual((task.agent as { settings: Record<string, unknown> }).settings);
  }
});

test('codex: reasoning_effort and reasoning_summary reach config.toml; version is checked against the pinned CLI', async () => {
  const { url, store } = server();
  expect((await submit(url, byId('ref-codex'))).status).toBe(200);
  const config = fileOf(launchOf(store.tasks.get('ref-codex')!.task), '/s/home/.codex/config.toml');
  expect(config).toContain('model_reasoning_effort = "high"\n');
  expect(config).toContain('model_reasoning_summary = "detailed"\n');
  // Top-level keys, before the first table (TOML puts anything after [model_providers.polar] inside it).
  expect(config.indexOf('model_reasoning_effort')).toBeLessThan(config.indexOf('[model_providers.polar]'));
  // Unset: codex's own default, nothing written.
  expect((await submit(url, variant('ref-codex', 'codex-plain', {}))).status).toBe(200);
  expect(fileOf(launchOf(store.tasks.get('codex-plain')!.task), '/s/home/.codex/config.toml')).not.toContain('model_reasoning');
  // Another CLI version cannot run here: a 400 naming the key, the reason and what to give.
  expect(await refusal(url, variant('ref-codex', 'codex-old', { version: '0.125.0' }))).toContain(`agent.settings.version: not installable here: every gateway runs the pinned @openai/codex ${CODEX_VERSION}`);
  expect(await refusal(url, variant('ref-codex', 'codex-effort', { reasoning_effort: 'extreme' }))).toMatch(/agent\.settings\.reasoning_effort: .*"xhigh"/);
  expect(store.tasks.get('codex-old')).toBeNull();
});

test('pi: api_type picks the API, compat goes into the provider, thinking is its --thinking flag', async () => {
  const { url, store } = server();
  expect((await submit(url, byId('ref-pi'))).status).toBe(200);
  const launch = launchOf(store.tasks.get('ref-pi')!.task);
  const polar = JSON.parse(fileOf(launch, '/s/home/.pi/agent/models.json')).providers.polar;
  expect(polar.api).toBe('openai-completions');
  expect(polar.baseUrl).toBe('http://127.0.0.1:4321/v1');
  expect(polar.compat).toEqual({ supportsDeveloperRole: false, supportsReasoningEffort: false, supportsStore: false, maxTokensField: 'max_tokens' });
  expect(polar.models[0]).toMatchObject({ contextWindow: 262144, maxTokens: 8192 });
  expect(after(launch.argv, '--thinking')).toBe('medium');
  // api and api_type that disagree are one question answered twice: a 400.
  expect(await refusal(url, variant('ref-pi', 'pi-both', { api: 'anthropic-messages', api_type: 'openai-completions' }))).toContain('agent.settings.api_type: conflicts with agent.settings.api "anthropic-messages"; give one');
});

test('claude_code: each reference key is its CLI flag or variable', async () => {
  const { url, store } = server();
  expect((await submit(url, byId('ref-claude-code'))).status).toBe(200);
  const launch = launchOf(store.tasks.get('ref-claude-code')!.task);
  expect(after(launch.argv, '--max-turns')).toBe('30');
  expect(after(launch.argv, '--effort')).toBe('high');
  expect(after(launch.argv, '--max-budget-usd')).toBe('5');
  expect(after(launch.argv, '--fallback-model')).toBe('Qwen/Qwen3-4B');
  expect(after(launch.argv, '--append-system-prompt')).toBe('Run the tests before you finish.');
  expect(after(launch.argv, '--allowedTools')).toBe('Bash,Read,Edit,Write,Glob,Grep');
  expect(after(launch.argv, '--disallowedTools')).toBe('WebFetch,WebSearch');
  expect(launch.env.MAX_THINKING_TOKENS).toBe('8000');
  // The prompt stays where the CLI reads it, and the output flags last.
  expect(launch.argv.slice(0, 3)).toEqual(['/bin/cli', '-p', 'Create calc.py with add(a, b) that returns a + b.']);
  expect(launch.argv.slice(-3)).toEqual(['--output-format', 'stream-json', '--verbose']);
});

test('gemini_cli: sandbox true adds --sandbox, false does not', async () => {
  const { url, store } = server();
  expect((await submit(url, byId('ref-gemini-cli'))).status).toBe(200);
  expect(launchOf(store.tasks.get('ref-gemini-cli')!.task).argv).not.toContain('--sandbox');
  expect((await submit(url, variant('ref-gemini-cli', 'gemini-sandbox', { sandbox: true }))).status).toBe(200);
  expect(launchOf(store.tasks.get('gemini-sandbox')!.task).argv).toContain('--sandbox');
});

test('openclaw: thinking is its thinkingDefault; openclaw_agent_id is accepted as main only, with the reason', async () => {
  const { url, store } = server();
  expect((await submit(url, byId('ref-openclaw'))).status).toBe(200);
  const config = JSON.parse(fileOf(launchOf(store.tasks.get('ref-openclaw')!.task), '/s/home/.openclaw/polar.json'));
  expect(config.agents.defaults.thinkingDefault).toBe('low');
  expect(await refusal(url, variant('ref-openclaw', 'openclaw-ops', { openclaw_agent_id: 'ops' }))).toContain('agent.settings.openclaw_agent_id: only "main" is supported');
});

test('model_kwargs and sampling_seed are the task sampling (seed included) and never reach the adapter', async () => {
  const { url, store } = server();
  for (const id of ['ref-codex', 'ref-qwen-code', 'ref-opencode']) expect((await submit(url, byId(id))).status).toBe(200);
  expect(taskSamplingOf(store.tasks.get('ref-codex')!.task.agent.settings)).toEqual({ temperature: 1, topP: 1, topK: -1, minP: 0, maxTokens: 4096, seed: 1234 });
  expect(taskSamplingOf(store.tasks.get('ref-qwen-code')!.task.agent.settings)).toMatchObject({ seed: 7 });
  expect(taskSamplingOf(store.tasks.get('ref-opencode')!.task.agent.settings)).not.toHaveProperty('seed');
  expect(harnessSettings(store.tasks.get('ref-qwen-code')!.task.agent.settings)).toEqual({});
  // A negative or fractional seed is refused naming its path.
  expect(await refusal(url, variant('ref-qwen-code', 'seed-bad', { sampling_seed: -1 }))).toContain('agent.settings.sampling_seed:');
});

test('unknown keys are still 400s naming their path, next to valid reference keys', async () => {
  const { url } = server();
  const error = await refusal(url, variant('ref-codex', 'codex-typo', { reasoning_effort: 'high', reasoning_efort: 'low' }));
  expect(error).toContain('agent.settings.reasoning_efort: unknown key');
  expect(error).not.toContain('agent.settings.reasoning_effort:');
});
