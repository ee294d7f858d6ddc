/**
 * Behaviour scripts: what the simulated model says. A script has weighted variants (`solve`, `wrong_fix`, `give_up`,
 * ...), each a list of steps (`shell: cmd` → a call to the harness's shell-like tool, `say: text` → a final answer,
 * optional `think`). The variant of a session comes from a seeded hash of its id; the step from the number of tool
 * results already in the conversation, so the simulator keeps no per-session state.
 * Source: docs/architecture.md#the-simulator, src/core/contracts/sim-script.ts (schema), docs/protocol-notes.md#shell-like-tools.
 */
import { parse as parseYaml } from 'yaml';
import { behaviourScriptSchema, type BehaviourScript } from '../core/contracts/sim-script.ts';
import { pythonJsonDumps } from '../tokenization/json.ts';
import type { ChatTool } from '../tokenization/chat-messages.ts';
import type { ModelFamily, PromptThinking, SampleParts } from '../tokenization/families.ts';

export { behaviourScriptSchema, type BehaviourScript, type ScriptStep } from '../core/contracts/sim-script.ts';

/**
 * Validate a behaviour script given as a parsed object or YAML/JSON text.
 * @throws Error listing every schema violation (path: message).
 */
export function parseBehaviourScript(input: unknown): BehaviourScript {
  let value = input;
  if (typeof input === 'string') {
    try {
      value = parseYaml(input);
    } catch (error) {
      throw new Error(`behaviour script is not valid YAML: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  const result = behaviourScriptSchema.safeParse(value);
  if (!result.success) {
    const issues = result.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new Error(`invalid behaviour script: ${issues}`);
  }
  return result.data;
}

/** A 32-bit FNV-1a hash of a string's UTF-16 code units, finalised; deterministic across runs and machines. */
export function hashString(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Pick a session's variant by a seeded hash of its id: weights are relative probabilities. Returns the variant name. */
export function chooseVariant(script: BehaviourScript, sessionId: string): string {
  const entries = Object.entries(script.variants).filter(([, v]) => v.weight > 0);
  const total = entries.reduce((sum, [, v]) => sum + v.weight, 0);
  let point = (hashString(`${script.seed ?? ''}\u0000${sessionId}`) / 4294967296) * total;
  for (const [name, variant] of entries) {
    if (point < variant.weight) return name;
    point -= variant.weight;
  }
  return entries[entries.length - 1]![0];
}

/** The shell-like tool of a request and how to fill its command argument. */
export interface ShellTool {
  name: string;
  /** Property that takes the command. */
  commandArg: string;
  /** `string`: the command line; `argv`: `["bash", "-lc", cmd]`; `list`: `[cmd]`, a list of whole command lines. */
  commandKind: 'string' | 'argv' | 'list';
  parameters: Record<string, unknown>;
}

// docs/protocol-notes.md#shell-like-tools: Claude Code Bash, pi bash, Codex exec_command, Qwen Code / Gemini CLI run_shell_command, OpenCode bash.
const KNOWN_SHELL_TOOLS: Record<string, string> = { Bash: 'command', bash: 'command', exec_command: 'cmd', run_shell_command: 'command', shell: 'command' };
// Tools whose command property is an array of whole command lines, each run by the shell (Cline CLI run_commands).
const KNOWN_COMMAND_LIST_TOOLS: Record<string, string> = { run_commands: 'commands' };

type Schema = { type?: unknown; properties?: Record<string, Schema>; required?: unknown; items?: Schema; enum?: unknown[]; default?: unknown; minimum?: number; [key: string]: unknown };

function schemaType(schema: Schema | undefined): string | undefined {
  const type = schema?.type;
  if (Array.isArray(type)) return type.find((t) => t !== 'null') as string | undefined;
  return typeof type === 'string' ? type : undefined;
}

function commandKindOf(schema: Schema | undefined): 'string' | 'argv' | null {
  const type = schemaType(schema);
  if (type === 'string') return 'string';
  if (type === 'array' && (schemaType(schema?.items) ?? 'string') === 'string') return 'argv';
  return null;
}

/**
 * Find the harness's shell-like tool: a known name (Bash, bash, exec_command, run_shell_command, shell; run_commands
 * with a list of command lines) whose schema has the expected command property, else any tool whose only required property is a string (or argv array) named
 * `command` or `cmd`. Returns null when the request has none.
 */
export function findShellTool(tools: readonly ChatTool[]): ShellTool | null {
  const functions = tools.filter((t) => t && typeof t.function?.name === 'string').map((t) => t.function);
  for (const fn of functions) {
    const arg = KNOWN_SHELL_TOOLS[fn.name];
    const parameters = (fn.parameters ?? {}) as Schema;
    const kind = arg ? commandKindOf(parameters.properties?.[arg]) : null;
    if (arg && kind) return { name: fn.name, commandArg: arg, commandKind: kind, parameters };
    const listArg = KNOWN_COMMAND_LIST_TOOLS[fn.name];
    if (listArg && commandKindOf(parameters.properties?.[listArg]) === 'argv') return { name: fn.name, commandArg: listArg, commandKind: 'list', parameters };
  }
  for (const fn of functions) {
    const parameters = (fn.parameters ?? {}) as Schema;
    const required = Array.isArray(parameters.required) ? (parameters.required as string[]) : [];
    if (required.length !== 1) continue;
    const arg = required[0]!;
    if (arg !== 'command' && arg !== 'cmd') continue;
    const kind = commandKindOf(parameters.properties?.[arg]);
    if (kind) return { name: fn.name, commandArg: arg, commandKind: kind, parameters };
  }
  return null;
}

/** A value for a required property other than the command, from its schema (default, enum, or a plain value). */
function fillValue(name: string, schema: Schema | undefined, command: string): unknown {
  if (schema?.default !== undefined) return schema.default;
  if (Array.isArray(schema?.enum) && schema.enum.length > 0) return schema.enum[0];
  switch (schemaType(schema)) {
    case 'string':
      return /desc|title|summary|reason|explanation/i.test(name) ? `Run: ${command.length > 60 ? `${command.slice(0, 57)}...` : command}` : '';
    case 'integer':
    case 'number':
      return /timeout/i.test(name) ? 120_000 : (schema?.minimum ?? 0);
    case 'boolean':
      return false;
    case 'array':
      return [];
    case 'object':
      return {};
    default:
      return '';
  }
}

function commandValue(tool: ShellTool, command: string): unknown {
  if (tool.commandKind === 'argv') return ['bash', '-lc', command];
  return tool.commandKind === 'list' ? [command] : command;
}

/** Arguments object for a call of the shell tool running `command`, with every other required property filled. */
export function shellArguments(tool: ShellTool, command: string): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  const props = (tool.parameters as Schema).properties ?? {};
  const required = Array.isArray((tool.parameters as Schema).required) ? ((tool.parameters as Schema).required as string[]) : [];
  // Keep the schema's property order, as a model trained on the schema would.
  for (const name of Object.keys(props)) {
    if (name === tool.commandArg) args[name] = commandValue(tool, command);
    else if (required.includes(name)) args[name] = fillValue(name, props[name], command);
  }
  if (!(tool.commandArg in args)) args[tool.commandArg] = commandValue(tool, command);
  for (const name of required) if (!(name in args)) args[name] = fillValue(name, props[name], command);
  return args;
}

/** Where the chat template left the think block at the end of the prompt. */
export type ThinkingState = PromptThinking;

export interface TurnPlan {
  /** The assistant text to sample, in the model family's format (without the token that ends the sample). */
  text: string;
  /** The token that ends the sample when it differs from the tokenizer's first eos (gpt-oss `<|call|>`). */
  end?: string;
  variant: string | null;
  step: number;
  kind: 'tool_call' | 'say' | 'done' | 'default';
}

/** The answer when no script is registered for the task. */
export const DEFAULT_ANSWER = 'Hello! This is the Polar simulator: no behaviour script is registered for this task.';
/** The answer once a variant's steps are exhausted. */
export const DONE_ANSWER = 'Done.';

/**
 * Plan one assistant turn, written the way a model of `family` samples it (tokenization/families.ts `formatSample`).
 * @param toolResults number of tool results already in the conversation (= step index).
 * @param thinking where the rendered prompt left the think block (opened, disabled, or none).
 */
export function planTurn(input: {
  script: BehaviourScript | null;
  sessionId: string;
  toolResults: number;
  tools: readonly ChatTool[];
  thinking: ThinkingState;
  family: ModelFamily;
  /** The variant drawn by the learnable policy (variant-policy.ts); default: `chooseVariant` on the script's weights. */
  variant?: string;
}): TurnPlan {
  const { script, toolResults, thinking, family } = input;
  const write = (think: string | undefined, content: string, toolCalls: SampleParts['toolCalls'] = []) => {
    const parts: SampleParts = { reasoning: think ?? null, content, toolCalls };
    const end = family.sampleEnd?.(parts);
    return { text: family.formatSample(parts, thinking), ...(end !== undefined ? { end } : {}) };
  };
  if (!script) return { ...write(undefined, DEFAULT_ANSWER), variant: null, step: toolResults, kind: 'default' };
  const variant = input.variant ?? chooseVariant(script, input.sessionId);
  const step = script.variants[variant]!.steps[toolResults];
  if (!step) return { ...write(undefined, DONE_ANSWER), variant, step: toolResults, kind: 'done' };
  if ('say' in step) return { ...write(step.think, step.say), variant, step: toolResults, kind: 'say' };
  const tool = findShellTool(input.tools);
  if (!tool) {
    return { ...write(step.think, `I would run this command, but no shell tool is available:\n${step.shell}`), variant, step: toolResults, kind: 'say' };
  }
  return { ...write(step.think, '', [{ name: tool.name, arguments: shellArguments(tool, step.shell) }]), variant, step: toolResults, kind: 'tool_call' };
}
