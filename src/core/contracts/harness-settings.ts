/**
 * `agent.settings` of every harness adapter (src/gateway/harnesses/<name>.ts), one strict schema per adapter, so the
 * rollout server refuses a task with a misspelt key or a bad value at submit (runnableProblems) and `polar run` before
 * it starts, instead of every session failing at INIT or the key being ignored. Defaults live here; each adapter
 * reads its parsed, typed settings (parseHarnessSettings). An adapter that reads no settings takes none (`{}`).
 * The gateway-read keys (task-sampling.ts TASK_SAMPLING_KEYS) are not part of any of them: they are checked by their
 * own schema and removed before the adapter sees the settings. Keys, types and defaults: README.md#harnesses.
 *
 * The keys the Python Polar's harness presets read (NVIDIA-NeMo/ProRL-Agent-Server `src/polar/agent/presets/*.py`
 * `self.settings.get(...)`) are accepted here under the same names for the harnesses both have, and each one reaches
 * the CLI: codex `reasoning_effort` / `reasoning_summary` (config.toml) and `version`; pi `api_type`, `compat`,
 * `thinking`; claude_code `max_turns`, `reasoning_effort`, `max_budget_usd`, `fallback_model`,
 * `append_system_prompt`, `disallowed_tools`, `max_thinking_tokens`; gemini_cli `sandbox`; openclaw `thinking` and
 * `openclaw_agent_id`. A value this server cannot honour (another codex version, another OpenClaw agent) is refused
 * naming the key, why, and what to give instead.
 */
import { z } from 'zod';
import { issueList } from './issues.ts';
import { harnessSettings } from './task-sampling.ts';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const envName = z.string().regex(ENV_NAME, 'must be an environment variable name');

/** `shell`: the command line (`{{INSTRUCTION}}` replaced, shell-quoted) when `agent.command` gives none. */
export const shellSettingsSchema = z.strictObject({
  command: z.string().min(1).optional(),
});

/** `custom`: a CLI without an adapter, described by its settings (src/gateway/harnesses/custom.ts documents each key). */
export const customSettingsSchema = z.strictObject({
  command: z.string().min(1).optional(),
  base_url_env: z.record(envName, z.string().regex(/^(\/.*)?$/, 'must be empty or a path starting with /')).default({}),
  api_key_env: z.array(envName).default([]),
  model_env: z.array(envName).default([]),
  env: z.record(envName, z.string()).default({}),
  files: z.record(z.string().min(1).refine((p) => !p.startsWith('/') && !p.split('/').includes('..'), 'must be a relative path inside HOME'), z.string()).default({}),
});
export type CustomSettings = z.infer<typeof customSettingsSchema>;

/** pi's provider APIs (its models.json `api`), each served by one of the gateway's dialects. */
export const PI_APIS = ['anthropic-messages', 'openai-completions', 'openai-responses', 'google-generative-ai'] as const;

/** A model's context window, tokens, as pi and OpenClaw write it into their model entry (`contextWindow`). */
const contextWindow = z.number().int().positive().default(32768);
/** The most output tokens a call asks for, as pi and OpenClaw write it into their model entry (`maxTokens`). */
const maxTokens = z.number().int().positive().default(4096);

/** pi's `--thinking` levels. Source: `pi --help` (pi-coding-agent 0.73.1). */
export const PI_THINKING_LEVELS = ['off', 'minimal', 'low', 'medium', 'high', 'xhigh'] as const;

/**
 * `pi`: the provider API and the model entry of its models.json (Source: pi docs/models.md). `api_type` is the Python
 * Polar's name for `api` (give one, or both the same); `compat` is merged into the provider's `compat` object (pi's
 * OpenAI/Anthropic compatibility switches, e.g. `supportsDeveloperRole`, `maxTokensField`); `thinking` is pi's
 * `--thinking` level. Parsed, `api` holds whichever was given (default `anthropic-messages`) and `api_type` is gone.
 */
export const piSettingsSchema = z
  .strictObject({
    api: z.enum(PI_APIS).optional(),
    api_type: z.enum(PI_APIS).nullish(),
    reasoning: z.boolean().default(false),
    context_window: contextWindow,
    max_tokens: maxTokens,
    compat: z.record(z.string(), z.unknown()).nullish(),
    thinking: z.enum(PI_THINKING_LEVELS).nullish(),
  })
  .superRefine((s, ctx) => {
    if (s.api !== undefined && s.api_type != null && s.api !== s.api_type) ctx.addIssue({ code: 'custom', path: ['api_type'], message: `conflicts with agent.settings.api ${JSON.stringify(s.api)}; give one` });
  })
  .transform(({ api, api_type, ...rest }) => ({ ...rest, api: api ?? api_type ?? 'anthropic-messages' }));

/** Claude Code's `--effort` levels. Source: `claude --help` (2.1.197). */
export const CLAUDE_CODE_EFFORTS = ['low', 'medium', 'high', 'xhigh', 'max'] as const;

/** The `--allowedTools` value when a task gives none. */
export const CLAUDE_CODE_DEFAULT_TOOLS = 'Bash,Read,Edit,Write';

/**
 * `claude_code`: its `--allowedTools` value (comma-separated tool names; null = the default), and the Python Polar's
 * keys, each the CLI flag of the same meaning: `disallowed_tools` `--disallowedTools`, `max_turns` `--max-turns`,
 * `reasoning_effort` `--effort`, `max_budget_usd` `--max-budget-usd`, `fallback_model` `--fallback-model`,
 * `append_system_prompt` `--append-system-prompt`; `max_thinking_tokens` is the MAX_THINKING_TOKENS variable (0 = unset,
 * as there). Source: `claude --help` (2.1.197); ProRL-Agent-Server `agent/presets/claude_code.py`.
 */
export const claudeCodeSettingsSchema = z.strictObject({
  allowed_tools: z.string().min(1).nullish().transform((v) => v ?? CLAUDE_CODE_DEFAULT_TOOLS),
  disallowed_tools: z.string().min(1).nullish(),
  max_turns: z.number().int().positive().nullish(),
  reasoning_effort: z.enum(CLAUDE_CODE_EFFORTS).nullish(),
  max_budget_usd: z.number().positive().nullish(),
  fallback_model: z.string().min(1).nullish(),
  append_system_prompt: z.string().min(1).nullish(),
  max_thinking_tokens: z.number().int().min(0).nullish(),
});

/** The @openai/codex version every gateway installs for the `codex` harness (src/gateway/harnesses/codex.ts). */
export const CODEX_VERSION = '0.171.0';

/** Codex's `model_reasoning_effort` values (the Responses API's `reasoning.effort`). */
export const CODEX_REASONING_EFFORTS = ['none', 'minimal', 'low', 'medium', 'high', 'xhigh'] as const;
/** Codex's `model_reasoning_summary` values. Source: codex 0.171.0's own config error ("expected one of …"). */
export const CODEX_REASONING_SUMMARIES = ['auto', 'concise', 'detailed', 'none'] as const;

/**
 * `codex`: `reasoning_effort` and `reasoning_summary` go into its config.toml (`model_reasoning_effort`,
 * `model_reasoning_summary`), so every Responses request carries them (the gateway maps `reasoning.effort` to the
 * engine's thinking switch, off for `none`, and records the level); unset, codex's own default applies. `version` is the Python Polar's check of the installed CLI:
 * accepted as {@link CODEX_VERSION} (what is installed), null or empty; another version is refused, since a gateway
 * runs only its pinned package. Source: ProRL-Agent-Server `agent/presets/codex.py`; codex docs/config.md.
 */
export const codexSettingsSchema = z.strictObject({
  reasoning_effort: z.enum(CODEX_REASONING_EFFORTS).nullish(),
  reasoning_summary: z.enum(CODEX_REASONING_SUMMARIES).nullish(),
  version: z
    .string()
    .nullish()
    .refine((v) => v == null || v === '' || v === CODEX_VERSION, `not installable here: every gateway runs the pinned @openai/codex ${CODEX_VERSION}; give "${CODEX_VERSION}", null or "", or leave version out`),
});

/**
 * `gemini_cli`: `sandbox: true` adds `--sandbox` (Gemini CLI runs its tools in its own container, which needs docker or
 * podman inside the runtime). Source: `gemini --help` (0.61.0); ProRL-Agent-Server `agent/presets/gemini_cli.py`.
 */
export const geminiCliSettingsSchema = z.strictObject({
  sandbox: z.boolean().nullish(),
});

/**
 * `kilo`: KILO_SESSION_RETRY_LIMIT, retries of a failed model call before `kilo run` gives up. At least 1: unset or 0,
 * it retries for ever (docs/protocol-notes.md, Kilo Code).
 */
export const kiloSettingsSchema = z.strictObject({
  retry_limit: z.number().int().positive().default(2),
});

/**
 * OpenClaw tools denied by default: the two whose presence makes it append its per-request runtime-context message
 * (src/gateway/harnesses/openclaw.ts).
 */
export const OPENCLAW_DEFAULT_TOOLS_DENY: readonly string[] = ['process', 'sessions_spawn'];

/** OpenClaw's thinking levels. Source: https://docs.openclaw.ai/tools/thinking */
export const OPENCLAW_THINKING_LEVELS = ['off', 'minimal', 'low', 'medium', 'high', 'xhigh', 'adaptive', 'max'] as const;

/**
 * `openclaw`: its `tools.deny` list (`[]` = its full tool set), the model entry of its provider config, `thinking`
 * (its `agents.defaults.thinkingDefault`, the level every call of the run uses), and the Python Polar's
 * `openclaw_agent_id`, accepted only as `main`: the adapter runs OpenClaw's default agent from its own config, and no
 * other agent is configured.
 */
export const openclawSettingsSchema = z.strictObject({
  tools_deny: z.array(z.string().regex(/\S/, 'must be a tool name')).default(() => [...OPENCLAW_DEFAULT_TOOLS_DENY]),
  context_window: contextWindow,
  max_tokens: maxTokens,
  thinking: z.enum(OPENCLAW_THINKING_LEVELS).nullish(),
  openclaw_agent_id: z.literal('main', 'only "main" is supported: the adapter runs OpenClaw\'s default agent from its own config, and no other agent is configured; leave it out').nullish(),
});

/** Adapters that read no settings. */
const noSettings = z.strictObject({});

/** Each built-in harness (as `agent.harness` spells it, `_` form) and the schema of its `agent.settings`. */
export const HARNESS_SETTINGS_SCHEMAS = {
  shell: shellSettingsSchema,
  custom: customSettingsSchema,
  pi: piSettingsSchema,
  claude_code: claudeCodeSettingsSchema,
  codex: codexSettingsSchema,
  qwen_code: noSettings,
  gemini_cli: geminiCliSettingsSchema,
  opencode: noSettings,
  kilo: kiloSettingsSchema,
  continue: noSettings,
  cline: noSettings,
  openclaw: openclawSettingsSchema,
} as const;
export type HarnessName = keyof typeof HARNESS_SETTINGS_SCHEMAS;
/** The parsed settings of one harness, defaults filled. */
export type HarnessSettings<N extends HarnessName> = z.output<(typeof HARNESS_SETTINGS_SCHEMAS)[N]>;

/** One problem with a harness's settings: `agent.settings.<path>` and what is wrong. */
export interface HarnessSettingsProblem {
  path: string;
  message: string;
}

/**
 * The problems of `settings` (a task's `agent.settings`, sampling keys included or not) for `harness` (`-` or `_`
 * spelling), as `{path: 'agent.settings.…', message}`; empty when they are valid or the harness has no schema here
 * (a gateway's own extra adapter checks its settings itself).
 */
export function harnessSettingsProblems(harness: string, settings: Record<string, unknown> | undefined): HarnessSettingsProblem[] {
  const schema = (HARNESS_SETTINGS_SCHEMAS as Record<string, z.ZodType>)[harness.replaceAll('-', '_')];
  if (!schema) return [];
  const parsed = schema.safeParse(harnessSettings(settings));
  return parsed.success ? [] : issueList(parsed.error, 'agent.settings');
}

/**
 * Parse a harness's `agent.settings` (the sampling keys, if still there, are dropped first), defaults filled.
 * @throws Error `harness <name>: agent.settings.<path>: message; …` for unknown keys and bad values.
 */
export function parseHarnessSettings<N extends HarnessName>(harness: N, settings: Record<string, unknown> | undefined): HarnessSettings<N> {
  const schema: z.ZodType = HARNESS_SETTINGS_SCHEMAS[harness];
  const parsed = schema.safeParse(harnessSettings(settings));
  if (parsed.success) return parsed.data as HarnessSettings<N>;
  throw new Error(`harness ${harness}: ${issueList(parsed.error, 'agent.settings').map((i) => `${i.path}: ${i.message}`).join('; ')}`);
}
