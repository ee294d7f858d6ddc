/**
 * `agent.settings` of every harness adapter (src/gateway/harnesses/<name>.ts), one strict schema per adapter, so the
 * rollout server refuses a task with a misspelt key or a bad value at submit (runnableProblems) and `polar run` before
 * it starts, instead of every session failing at INIT or the key being ignored. Defaults live here; each adapter
 * reads its parsed, typed settings (parseHarnessSettings). An adapter that reads no settings takes none (`{}`).
 * The gateway-read keys (task-sampling.ts TASK_SAMPLING_KEYS) are not part of any of them: they are checked by their
 * own schema and removed before the adapter sees the settings. Keys, types and defaults: README.md#harnesses.
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

/** `pi`: the provider API and the model entry of its models.json (Source: pi docs/models.md). */
export const piSettingsSchema = z.strictObject({
  api: z.enum(PI_APIS).default('anthropic-messages'),
  reasoning: z.boolean().default(false),
  context_window: contextWindow,
  max_tokens: maxTokens,
});

/** `claude_code`: its `--allowedTools` value (comma-separated tool names, e.g. `Bash,Read,Edit,Write`). */
export const claudeCodeSettingsSchema = z.strictObject({
  allowed_tools: z.string().min(1).default('Bash,Read,Edit,Write'),
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

/** `openclaw`: its `tools.deny` list (`[]` = its full tool set) and the model entry of its provider config. */
export const openclawSettingsSchema = z.strictObject({
  tools_deny: z.array(z.string().regex(/\S/, 'must be a tool name')).default(() => [...OPENCLAW_DEFAULT_TOOLS_DENY]),
  context_window: contextWindow,
  max_tokens: maxTokens,
});

/** Adapters that read no settings. */
const noSettings = z.strictObject({});

/** Each built-in harness (as `agent.harness` spells it, `_` form) and the schema of its `agent.settings`. */
export const HARNESS_SETTINGS_SCHEMAS = {
  shell: shellSettingsSchema,
  custom: customSettingsSchema,
  pi: piSettingsSchema,
  claude_code: claudeCodeSettingsSchema,
  codex: noSettings,
  qwen_code: noSettings,
  gemini_cli: noSettings,
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
