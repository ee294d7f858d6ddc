/**
 * Tool-call arguments between the IR (raw JSON text, docs/protocol-notes.md#across-dialects: "keep a tool call's raw argument string when it is
 * invalid JSON") and wire formats whose call input is a JSON *object* (Anthropic `tool_use.input`, Gemini `functionCall.args`).
 *
 * Behaviour for text that is not a JSON object (the model produced broken JSON, or a bare array/string): the object
 * `{"_raw": "<the exact text>"}` is sent. It never crashes the client's parser, the harness reports a tool error to the
 * model (the right signal for RL), and when the harness echoes the call back, `argumentsFromToolInput` restores the exact
 * original text, so the re-rendered prompt matches what the model sampled.
 */
import { isRecord } from './validate.ts';

/** Key of the wrapper object that carries invalid argument text. */
export const RAW_ARGUMENTS_KEY = '_raw';

/**
 * IR arguments text → a JSON object for the wire.
 * @param args raw argument text; `""` (a call without arguments) becomes `{}`.
 * @returns the parsed object, or `{_raw: args}` when `args` is not a JSON object.
 */
export function toolInputFromArguments(args: string): Record<string, unknown> {
  if (args.trim() === '') return {};
  const parsed = tryParseJson(args);
  if (isRecord(parsed)) return parsed;
  return { [RAW_ARGUMENTS_KEY]: args };
}

/**
 * Wire JSON object → IR arguments text. Inverse of `toolInputFromArguments`: a `{_raw: text}` wrapper whose text is not
 * itself a JSON object gives back `text` verbatim; anything else is `JSON.stringify`-ed (key order kept).
 */
export function argumentsFromToolInput(input: unknown): string {
  if (input === undefined || input === null) return '{}';
  if (isRecord(input)) {
    const keys = Object.keys(input);
    const raw = input[RAW_ARGUMENTS_KEY];
    if (keys.length === 1 && typeof raw === 'string' && !isRecord(tryParseJson(raw))) return raw;
  }
  return JSON.stringify(input);
}

/** `JSON.parse` that returns `undefined` instead of throwing. */
export function tryParseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
