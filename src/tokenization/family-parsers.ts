/**
 * Output parsers of the model families beyond Qwen, each behaving like the vLLM/SGLang parser for that family:
 * Llama 3.x JSON tool calls (vLLM `llama3_json`), DeepSeek-V3/V3.1 tool-call markers (vLLM `deepseek_v3`,
 * `deepseek_v31`), gpt-oss harmony messages (vLLM `openai` tool parser over openai-harmony), and plain text (Gemma 3,
 * whose template has no tool calls). Pure functions, never throw: malformed calls are kept as text and flagged
 * `parserInvalid`.
 * Sources: https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/openai/tool_parsers/llama_tool_parser.py,
 * .../deepseekv3_tool_parser.py, .../deepseekv31_tool_parser.py, https://github.com/openai/harmony (format),
 * https://cookbook.openai.com/articles/openai-harmony, https://github.com/sgl-project/sglang/tree/main/python/sglang/srt/function_call.
 */
import { pythonJsonDumps } from './json.ts';
import { splitQwen3Reasoning, type ParsedOutput, type ParsedToolCall } from './parsers.ts';

/** Strip one trailing stop token (any of `stops`) from decoded text. */
export function stripTrailing(text: string, stops: readonly string[]): string {
  for (const stop of stops) if (stop !== '' && text.endsWith(stop)) return text.slice(0, -stop.length);
  return text;
}

/** End index (exclusive) of the JSON object starting at `start` (`text[start] === '{'`), or -1 when unbalanced. */
export function jsonObjectEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return i + 1;
  }
  return -1;
}

/** JSON text → Python `json.dumps` form, or null when it is not valid JSON. */
function normalisedJson(raw: string): string | null {
  try {
    return pythonJsonDumps(JSON.parse(raw));
  } catch {
    return null;
  }
}

/**
 * Llama 3.1/3.2 output: an answer, or JSON tool calls `{"name": …, "parameters": {…}}` (`"arguments"` also accepted),
 * optionally after `<|python_tag|>`, several separated by `;` (vLLM `llama3_json`). Output that does not start with a
 * call is content. Llama has no reasoning block.
 */
export function parseLlama3Output(text: string, stops: readonly string[]): ParsedOutput {
  const body = stripTrailing(text, stops);
  let rest = body.trimStart();
  if (rest.startsWith('<|python_tag|>')) rest = rest.slice('<|python_tag|>'.length).trimStart();
  else if (!rest.startsWith('{')) return { content: body, reasoning: null, toolCalls: [] };
  const toolCalls: ParsedToolCall[] = [];
  let at = 0;
  while (at < rest.length) {
    if (rest[at] !== '{') return invalidCall(body, toolCalls, rest.slice(at));
    const end = jsonObjectEnd(rest, at);
    if (end < 0) return invalidCall(body, toolCalls, rest.slice(at));
    let value: unknown;
    try {
      value = JSON.parse(rest.slice(at, end));
    } catch {
      return invalidCall(body, toolCalls, rest.slice(at, end));
    }
    const { name, parameters, arguments: args } = (value ?? {}) as { name?: unknown; parameters?: unknown; arguments?: unknown };
    const params = args !== undefined ? args : parameters;
    if (typeof name !== 'string' || params === undefined) {
      // A JSON answer that is not a call (no name/parameters) is content, as vLLM returns it.
      if (toolCalls.length === 0) return { content: body, reasoning: null, toolCalls: [] };
      return invalidCall(body, toolCalls, rest.slice(at, end));
    }
    toolCalls.push({ name, arguments: pythonJsonDumps(params) });
    at = end;
    const sep = /^\s*;?\s*/.exec(rest.slice(at))![0];
    at += sep.length;
  }
  return { content: '', reasoning: null, toolCalls };
}

function invalidCall(body: string, calls: ParsedToolCall[], raw: string): ParsedOutput {
  return { content: body, reasoning: null, toolCalls: [...calls, { name: /"name"\s*:\s*"([^"]*)"/.exec(raw)?.[1] ?? '', arguments: raw.trim(), parserInvalid: true }] };
}

const DS_CALLS_BEGIN = '<｜tool▁calls▁begin｜>';
const DS_CALLS_END = '<｜tool▁calls▁end｜>';
const DS_CALL_RE = /<｜tool▁call▁begin｜>([\s\S]*?)(?:<｜tool▁call▁end｜>|$)/g;
const DS_SEP = '<｜tool▁sep｜>';

/**
 * DeepSeek-V3 / V3.1 / R1 output: `<think>…</think>` reasoning (the opening tag usually in the prompt), content, then
 * `<｜tool▁calls▁begin｜>` calls: V3 `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>`,
 * V3.1 `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>`; both forms are read.
 */
export function parseDeepSeekOutput(text: string, options: { promptOpenedThinking: boolean; truncated?: boolean; stops: readonly string[] }): ParsedOutput {
  const trimmed = stripTrailing(text, options.stops);
  const { reasoning, rest } = splitQwen3Reasoning(trimmed, { promptOpenedThinking: options.promptOpenedThinking, truncated: options.truncated === true });
  const first = rest.indexOf(DS_CALLS_BEGIN);
  const firstCall = rest.indexOf('<｜tool▁call▁begin｜>');
  const start = first >= 0 ? first : firstCall;
  if (start < 0) return { content: rest, reasoning, toolCalls: [] };
  const region = rest.slice(start);
  const toolCalls: ParsedToolCall[] = [];
  let invalid = false;
  for (const match of region.matchAll(DS_CALL_RE)) {
    const call = parseDeepSeekCall(match[1]!);
    if (call.parserInvalid) invalid = true;
    toolCalls.push(call);
  }
  const tail = region.slice(region.lastIndexOf('<｜tool▁call▁end｜>') + '<｜tool▁call▁end｜>'.length).replace(DS_CALLS_END, '').trim();
  if (toolCalls.length === 0 || tail !== '') invalid = true;
  return { content: invalid ? rest : rest.slice(0, start), reasoning, toolCalls: toolCalls.length === 0 ? [{ name: '', arguments: region.trim(), parserInvalid: true }] : toolCalls };
}

function parseDeepSeekCall(raw: string): ParsedToolCall {
  const sep = raw.indexOf(DS_SEP);
  if (sep < 0) return { name: '', arguments: raw.trim(), parserInvalid: true };
  const head = raw.slice(0, sep);
  const after = raw.slice(sep + DS_SEP.length);
  // V3: "function<｜tool▁sep｜>NAME\n```json\nARGS\n```"
  const fenced = /^([^\n]+)\n```(?:json)?\n([\s\S]*?)\n```\s*$/.exec(after);
  if (head.trim() === 'function' && fenced) {
    const args = normalisedJson(fenced[2]!);
    return args === null ? { name: fenced[1]!.trim(), arguments: fenced[2]!.trim(), parserInvalid: true } : { name: fenced[1]!.trim(), arguments: args };
  }
  const name = head.trim();
  const args = normalisedJson(after.trim());
  if (name === '' || args === null) return { name, arguments: after.trim(), parserInvalid: true };
  return { name, arguments: args };
}

/** One harmony message of sampled text. */
interface HarmonyMessage {
  channel: string | null;
  recipient: string | null;
  body: string;
  /** The token that ended it (`<|end|>`, `<|call|>`, `<|return|>`) or null when the text ended first. */
  end: string | null;
}

const HARMONY_ENDS = ['<|end|>', '<|call|>', '<|return|>'];

/** Split sampled harmony text into messages; the first header follows the prompt's `<|start|>assistant`. */
export function splitHarmony(text: string): HarmonyMessage[] {
  const out: HarmonyMessage[] = [];
  let at = 0;
  while (at < text.length) {
    if (text.startsWith('<|start|>', at)) at += '<|start|>'.length;
    const headerEnd = text.indexOf('<|message|>', at);
    if (headerEnd < 0) {
      // A header without a body (cut off): nothing to return from it.
      break;
    }
    const header = text.slice(at, headerEnd);
    const bodyStart = headerEnd + '<|message|>'.length;
    let end = -1;
    let endToken: string | null = null;
    for (const token of HARMONY_ENDS) {
      const i = text.indexOf(token, bodyStart);
      if (i >= 0 && (end < 0 || i < end)) {
        end = i;
        endToken = token;
      }
    }
    const body = text.slice(bodyStart, end < 0 ? text.length : end);
    const channel = /<\|channel\|>\s*([A-Za-z_]+)/.exec(header)?.[1] ?? null;
    const recipient = /\bto=([^\s<]+)/.exec(header)?.[1] ?? null;
    out.push({ channel, recipient, body, end: endToken });
    if (end < 0) break;
    at = end + endToken!.length;
  }
  return out;
}

/**
 * gpt-oss (harmony) output: `analysis` messages are reasoning, `final` (and `commentary` without a recipient, the
 * preambles) are content, `commentary` messages addressed `to=functions.NAME` are tool calls whose body is the JSON
 * arguments. Text without any harmony header is content.
 */
export function parseHarmonyOutput(text: string): ParsedOutput {
  const messages = splitHarmony(text);
  if (messages.length === 0) return { content: stripTrailing(text, HARMONY_ENDS), reasoning: null, toolCalls: [] };
  const reasoning: string[] = [];
  const content: string[] = [];
  const toolCalls: ParsedToolCall[] = [];
  let invalid = false;
  for (const message of messages) {
    if (message.recipient !== null && message.recipient !== 'assistant') {
      const name = message.recipient.startsWith('functions.') ? message.recipient.slice('functions.'.length) : message.recipient;
      const args = normalisedJson(message.body.trim() === '' ? '{}' : message.body.trim());
      if (args === null) {
        invalid = true;
        toolCalls.push({ name, arguments: message.body.trim(), parserInvalid: true });
      } else toolCalls.push({ name, arguments: args });
    } else if (message.channel === 'analysis') reasoning.push(message.body);
    else content.push(message.body);
  }
  return {
    content: invalid ? stripTrailing(text, HARMONY_ENDS) : content.join('\n'),
    reasoning: reasoning.length > 0 ? reasoning.join('\n') : null,
    toolCalls,
  };
}

/** Plain text output (no reasoning, no tool calls): templates without a tool-call format (Gemma 3). */
export function parsePlainOutput(text: string, stops: readonly string[]): ParsedOutput {
  return { content: stripTrailing(text, stops), reasoning: null, toolCalls: [] };
}
