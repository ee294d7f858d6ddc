/**
 * Parsers for sampled text, behaving like vLLM's `qwen3` reasoning parser followed by its `hermes` tool parser.
 * Sources: vLLM vllm/reasoning/qwen3_reasoning_parser.py, vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py.
 */
import { pythonJsonDumps } from './json.ts';

/** One tool call parsed from `<tool_call>{json}</tool_call>`. */
export interface ParsedToolCall {
  name: string;
  /** Arguments as JSON text (Python `json.dumps` form); for a malformed call, the raw text inside the tags. */
  arguments: string;
  /** Set when the call's JSON was malformed or lacked name/arguments: the training filter gives it reward 0. */
  parserInvalid?: boolean;
}

export interface ParsedOutput {
  /**
   * Text after reasoning and before the first `<tool_call>` (vLLM's content). When any call is malformed, the whole
   * post-reasoning text, tool-call markup included, as vLLM returns it.
   */
  content: string;
  /** Text between `<think>` and `</think>` (newlines kept, as vLLM returns it), or null when there was none. */
  reasoning: string | null;
  toolCalls: ParsedToolCall[];
}

export interface ParseOptions {
  /**
   * The prompt already ended with an opening `<think>` (thinking templates that open the block for the model): text
   * with no `</think>` is then all reasoning (it was cut off while thinking). vLLM treats it as content.
   */
  promptOpenedThinking?: boolean;
  /**
   * The answer was cut off (finish `length`): a think block the text opened and never closed is then reasoning, as
   * vLLM's streaming parser sends it (its whole-answer parser returns it as content, which it stays otherwise).
   */
  truncated?: boolean;
}

const THINK_START = '<think>';
const THINK_END = '</think>';
const TOOL_START = '<tool_call>';
const TOOL_CALL_RE = /<tool_call>([\s\S]*?)<\/tool_call>|<tool_call>([\s\S]*)/g;

/**
 * Split reasoning from the rest, as vLLM's qwen3 reasoning parser does (opening tag optional). Differences: a think
 * block the prompt opened and the text never closed is reasoning, and so is one the text opened (at its start) when
 * the answer was cut off (`truncated`), as vLLM's streaming parser sends them; vLLM's whole-answer parser returns
 * both as content. So a streamed reply (token-stream.ts) and the record agree on an answer cut off while thinking.
 */
export function splitQwen3Reasoning(text: string, options: ParseOptions = {}): { reasoning: string | null; rest: string } {
  if (options.promptOpenedThinking) {
    // The text starts inside the block: a `<think>` in it is literal (one right at the start, re-opening, is dropped).
    const lead = text.indexOf(THINK_START);
    const body = lead >= 0 && text.slice(0, lead).trim() === '' ? text.slice(lead + THINK_START.length) : text;
    const close = body.indexOf(THINK_END);
    return close < 0 ? { reasoning: body, rest: '' } : { reasoning: body.slice(0, close), rest: body.slice(close + THINK_END.length) };
  }
  const start = text.indexOf(THINK_START);
  const afterStart = start >= 0 ? text.slice(start + THINK_START.length) : text;
  const end = afterStart.indexOf(THINK_END);
  if (end < 0) {
    if (start >= 0 && options.truncated === true && text.slice(0, start).trim() === '') return { reasoning: afterStart, rest: '' };
    return { reasoning: null, rest: afterStart };
  }
  return { reasoning: afterStart.slice(0, end), rest: afterStart.slice(end + THINK_END.length) };
}

/** Extract hermes-style tool calls (parallel calls allowed; an unterminated last call is parsed to the end). */
export function parseHermesToolCalls(text: string): { content: string; toolCalls: ParsedToolCall[] } {
  const first = text.indexOf(TOOL_START);
  if (first < 0) return { content: text, toolCalls: [] };
  const toolCalls: ParsedToolCall[] = [];
  let invalid = false;
  for (const match of text.matchAll(TOOL_CALL_RE)) {
    const raw = match[1] ?? match[2] ?? '';
    const call = parseOneCall(raw);
    if (call.parserInvalid) invalid = true;
    toolCalls.push(call);
  }
  // vLLM's hermes parser returns the whole text as content when any call fails to parse.
  return { content: invalid ? text : text.slice(0, first), toolCalls };
}

function parseOneCall(raw: string): ParsedToolCall {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return { name: /"name"\s*:\s*"([^"]*)"/.exec(raw)?.[1] ?? '', arguments: raw.trim(), parserInvalid: true };
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) return { name: '', arguments: raw.trim(), parserInvalid: true };
  const { name, arguments: args } = value as { name?: unknown; arguments?: unknown };
  if (typeof name !== 'string' || args === undefined) return { name: typeof name === 'string' ? name : '', arguments: raw.trim(), parserInvalid: true };
  return { name, arguments: pythonJsonDumps(args) };
}

/**
 * Parse Qwen3 output text: `<think>…</think>` reasoning (the opening tag may have been in the prompt), then hermes
 * `<tool_call>{"name": …, "arguments": {…}}</tool_call>` calls in the rest. Tool calls inside reasoning stay reasoning.
 * Never throws: malformed calls are kept as text and flagged `parserInvalid`.
 * @param text decoded sampled text, special tokens kept (e.g. without the trailing `<|im_end|>`; it is stripped if present).
 */
export function parseQwen3Output(text: string, options: ParseOptions = {}): ParsedOutput {
  const trimmed = stripEndOfTurn(text);
  const { reasoning, rest } = splitQwen3Reasoning(trimmed, options);
  const { content, toolCalls } = parseHermesToolCalls(rest);
  return { content, reasoning, toolCalls };
}

function stripEndOfTurn(text: string): string {
  for (const eot of ['<|im_end|>', '<|endoftext|>']) if (text.endsWith(eot)) return text.slice(0, -eot.length);
  return text;
}

/** Options of the Qwen3.5 (XML tool-call) parser. */
export interface Qwen35ParseOptions extends ParseOptions {
  /** The request's tools: a parameter's JSON-schema type decides how its text value is converted (as vLLM does). */
  tools?: readonly { function: { name: string; parameters?: Record<string, unknown> } }[];
}

const FUNCTION_RE = /^\s*<function=([^>\n]+)>([\s\S]*?)<\/function>\s*$/;
const PARAMETER_RE = /<parameter=([^>\n]+)>([\s\S]*?)<\/parameter>/g;

/** Schema type of one parameter of one tool, or undefined when the tool or the parameter is unknown. */
function parameterType(tools: Qwen35ParseOptions['tools'], fn: string, param: string): string | undefined {
  const tool = tools?.find((t) => t.function.name === fn);
  const properties = tool?.function.parameters?.properties;
  if (!properties || typeof properties !== 'object') return undefined;
  const schema = (properties as Record<string, unknown>)[param];
  if (!schema || typeof schema !== 'object') return undefined;
  const type = (schema as { type?: unknown }).type;
  if (typeof type === 'string') return type;
  if (Array.isArray(type)) return type.find((t): t is string => typeof t === 'string' && t !== 'null');
  return undefined;
}

/**
 * A parameter's text → JSON value by its schema type (vLLM qwen3coder parser: strings stay text; integer/number/
 * boolean/object/array are converted, falling back to the text when conversion fails; unknown parameters stay text).
 */
function convertParameter(raw: string, type: string | undefined): unknown {
  const text = raw.replace(/^\n/, '').replace(/\n$/, '');
  if (type === undefined || type === 'string') return text;
  const trimmed = text.trim();
  if (trimmed.toLowerCase() === 'null') return null;
  if (type === 'integer' || type === 'number') {
    const n = Number(trimmed);
    if (trimmed !== '' && Number.isFinite(n) && (type === 'number' || Number.isInteger(n))) return n;
    return text;
  }
  if (type === 'boolean') {
    if (trimmed.toLowerCase() === 'true') return true;
    if (trimmed.toLowerCase() === 'false') return false;
    return text;
  }
  try {
    return JSON.parse(trimmed);
  } catch {
    return text;
  }
}

/** One XML call body (the text between `<tool_call>` and `</tool_call>`). */
function parseXmlCall(raw: string, tools: Qwen35ParseOptions['tools']): ParsedToolCall {
  const match = FUNCTION_RE.exec(raw);
  if (!match) {
    const name = /<function=([^>\n]+)>/.exec(raw)?.[1]?.trim() ?? '';
    return { name, arguments: raw.trim(), parserInvalid: true };
  }
  const name = match[1]!.trim();
  const body = match[2]!;
  const args: Record<string, unknown> = {};
  for (const param of body.matchAll(PARAMETER_RE)) {
    const key = param[1]!.trim();
    args[key] = convertParameter(param[2]!, parameterType(tools, name, key));
  }
  // Text left outside <parameter> blocks (other than whitespace) means the call is not well-formed.
  if (body.replace(PARAMETER_RE, '').trim() !== '') return { name, arguments: raw.trim(), parserInvalid: true };
  return { name, arguments: pythonJsonDumps(args) };
}

/**
 * Parse Qwen3.5 output text: `<think>…</think>` reasoning (opening tag optionally in the prompt), then XML tool calls
 * `<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>` (parallel calls
 * allowed). Tool calls inside reasoning stay reasoning. A malformed call (no complete `<function=…>…</function>`, stray
 * text) is flagged `parserInvalid` and the whole post-reasoning text is returned as content, as for Qwen3.
 * Never throws. Source: vLLM vllm/entrypoints/openai/tool_parsers/qwen3coder_tool_parser.py.
 * @param text decoded sampled text, special tokens kept (a trailing `<|im_end|>` / `<|endoftext|>` is stripped).
 */
export function parseQwen35Output(text: string, options: Qwen35ParseOptions = {}): ParsedOutput {
  const trimmed = stripEndOfTurn(text);
  const { reasoning, rest } = splitQwen3Reasoning(trimmed, options);
  const first = rest.indexOf(TOOL_START);
  if (first < 0) return { content: rest, reasoning, toolCalls: [] };
  const toolCalls: ParsedToolCall[] = [];
  let invalid = false;
  for (const match of rest.matchAll(TOOL_CALL_RE)) {
    // An unterminated last call (cut before `</tool_call>`) is still parsed when its function block is complete.
    const call = parseXmlCall(match[1] ?? match[2] ?? '', options.tools);
    if (call.parserInvalid) invalid = true;
    toolCalls.push(call);
  }
  return { content: invalid ? rest : rest.slice(0, first), reasoning, toolCalls };
}
