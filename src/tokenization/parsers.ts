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
}

const THINK_START = '<think>';
const THINK_END = '</think>';
const TOOL_START = '<tool_call>';
const TOOL_CALL_RE = /<tool_call>([\s\S]*?)<\/tool_call>|<tool_call>([\s\S]*)/g;

/** Split reasoning from the rest, as vLLM's qwen3 reasoning parser does (opening tag optional). */
export function splitQwen3Reasoning(text: string, options: ParseOptions = {}): { reasoning: string | null; rest: string } {
  const start = text.indexOf(THINK_START);
  const afterStart = start >= 0 ? text.slice(start + THINK_START.length) : text;
  const end = afterStart.indexOf(THINK_END);
  if (end < 0) {
    if (options.promptOpenedThinking && start < 0) return { reasoning: afterStart, rest: '' };
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
