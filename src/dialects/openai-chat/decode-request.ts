/**
 * OpenAI Chat Completions request → IR (docs/protocol-notes.md#openai-chat): system and developer messages as IR system messages
 * where they stand (the engine encoding places them per `engine.system_messages`); user text/image parts; assistant tool_calls with raw argument text and reasoning_content/reasoning;
 * tool messages with string or text-part content; max_completion_tokens / max_tokens; include_usage; n > 1 rejected.
 * Source: https://platform.openai.com/docs/api-reference/chat/create
 */
import type { CodecContext } from '../../core/dialect.ts';
import { GatewayError } from '../../core/errors.ts';
import type { IRContentPart, IRMessage, IRRequest, IRTool, IRToolCall, IRToolChoice, Warning } from '../../core/ir.ts';
import { IR_VERSION } from '../../core/ir.ts';
import { imagePartFromUrl } from '../shared/images.ts';
import { cleanToolSchema } from '../shared/json-schema.ts';
import { decodeChatResponseFormat } from '../shared/response-format.ts';
import { DecodeMemo, decodeTools, type ToolNames, unknownArray, validateRequest } from '../shared/decode-memo.ts';
import { parseWire, unknownFieldWarnings } from '../shared/validate.ts';
import { outOfRangeWarnings, type DocumentedRange } from '../shared/sampling-range.ts';
import { z } from 'zod';
import {
  AnyPartSchema,
  ChatRequestSchema,
  ImagePartSchema,
  KNOWN_REQUEST_FIELDS,
  MessageSchema,
  TextPartSchema,
  ToolSchema,
  type ChatMessage,
  type ChatRequest,
} from './schema.ts';

type AnyPart = z.output<typeof AnyPartSchema>;
type Tool = z.output<typeof ToolSchema>;

/** The request's top level; `messages` and `tools` are checked element by element (decodeRequest). */
const ShallowRequestSchema = ChatRequestSchema.extend({ messages: unknownArray, tools: unknownArray.nullable().optional() });
type RequestTop = z.output<typeof ShallowRequestSchema>;

/** Each raw message's IR message, and each raw tool's IR tool (null: dropped), by object (decode-memo.ts). */
const messageMemo = new DecodeMemo<IRMessage>();
const toolMemo = new DecodeMemo<IRTool | null>();

/**
 * Decode a `POST /v1/chat/completions` body.
 * @returns IR request; lossy or unsupported features (logprobs, unknown fields) are in `warnings`;
 *   `response_format` becomes `responseFormat` (guided decoding).
 * @throws GatewayError('invalid-request') naming the failing path (also `response_format.type` when unknown); `n` > 1 is rejected with `details.param = "n"`.
 */
export function decodeRequest(body: unknown, _ctx: CodecContext): IRRequest {
  // Messages and tools decoded at the same index in an earlier call are not validated again (decode-memo.ts).
  const { top: wire, messagesIn, toolsIn } = validateRequest(body, { shallow: ShallowRequestSchema, whole: ChatRequestSchema, message: MessageSchema, tool: ToolSchema }, { messages: messageMemo, tools: toolMemo });
  const warnings: Warning[] = unknownFieldWarnings(wire, KNOWN_REQUEST_FIELDS, 'request');
  if (wire.n != null && wire.n > 1) {
    throw new GatewayError('invalid-request', `n: only n=1 is supported (got ${wire.n}); send ${wire.n} requests instead`, { param: 'n' });
  }
  const responseFormat = decodeChatResponseFormat(wire.response_format);
  if (wire.logprobs === true || wire.top_logprobs != null) {
    warnings.push({ code: 'unsupported-field', message: 'logprobs are captured for training but not returned to clients' });
  }

  const toolNames = new Map<string, string>();
  const decoded: IRMessage[] = messageMemo.decodeAll(
    wire.messages,
    toolNames,
    warnings,
    (raw, i, names, own) => decodeMessage(messagesIn[i] ?? parseWire(MessageSchema, raw, `messages[${i}]`), `messages[${i}]`, names, own),
    (message) => [message],
  );
  const messages = decoded;

  const tools = decodeTools(wire.tools ?? [], toolsIn, ToolSchema, toolMemo, warnings, decodeTool);
  const request: IRRequest = {
    version: IR_VERSION,
    model: wire.model,
    messages,
    tools,
    sampling: decodeSampling(wire, warnings),
    stream: wire.stream === true,
    warnings,
  };
  const toolChoice = decodeToolChoice(wire.tool_choice, tools.length > 0, warnings);
  if (toolChoice !== undefined) request.toolChoice = toolChoice;
  if (wire.parallel_tool_calls != null) request.parallelToolCalls = wire.parallel_tool_calls;
  if (request.stream && wire.stream_options?.include_usage != null) request.streamUsage = wire.stream_options.include_usage;
  if (wire.user != null) request.user = wire.user;
  if (responseFormat) request.responseFormat = responseFormat;
  const reasoning = decodeReasoning(wire, warnings);
  if (reasoning) request.reasoning = reasoning;
  return request;
}

/** OpenAI Chat's documented sampling ranges (https://platform.openai.com/docs/api-reference/chat/create). */
const RANGES: readonly DocumentedRange[] = [
  { field: 'temperature', min: 0, max: 2 },
  { field: 'top_p', min: 0, max: 1 },
  { field: 'presence_penalty', min: -2, max: 2 },
  { field: 'frequency_penalty', min: -2, max: 2 },
];

function decodeSampling(wire: RequestTop, warnings: Warning[]): IRRequest['sampling'] {
  const s: IRRequest['sampling'] = {};
  warnings.push(
    ...outOfRangeWarnings({ temperature: wire.temperature, top_p: wire.top_p, presence_penalty: wire.presence_penalty, frequency_penalty: wire.frequency_penalty }, RANGES, 'OpenAI Chat'),
  );
  const cap = wire.max_completion_tokens ?? wire.max_tokens;
  if (wire.max_completion_tokens != null && wire.max_tokens != null && wire.max_completion_tokens !== wire.max_tokens) {
    warnings.push({
      code: 'conflicting-fields',
      message: `max_completion_tokens (${wire.max_completion_tokens}) and max_tokens (${wire.max_tokens}) differ; max_completion_tokens is used`,
    });
  }
  if (cap != null) s.maxTokens = cap;
  if (wire.temperature != null) s.temperature = wire.temperature;
  if (wire.top_p != null) s.topP = wire.top_p;
  if (wire.top_k != null) s.topK = wire.top_k;
  if (wire.min_p != null) s.minP = wire.min_p;
  if (wire.seed != null) s.seed = wire.seed;
  if (wire.presence_penalty != null) s.presencePenalty = wire.presence_penalty;
  if (wire.frequency_penalty != null) s.frequencyPenalty = wire.frequency_penalty;
  if (wire.stop != null) {
    const stop = typeof wire.stop === 'string' ? [wire.stop] : wire.stop;
    if (stop.length > 0) s.stop = [...stop];
  }
  return s;
}

function decodeReasoning(wire: RequestTop, warnings: Warning[]): IRRequest['reasoning'] {
  const kwargs = wire.chat_template_kwargs ?? {};
  for (const key of Object.keys(kwargs)) {
    if (key !== 'enable_thinking') warnings.push({ code: 'unknown-field', message: `chat_template_kwargs.${key} is not supported and was ignored` });
  }
  const enable = kwargs.enable_thinking;
  if (wire.reasoning_effort != null) {
    return { enabled: typeof enable === 'boolean' ? enable : wire.reasoning_effort !== 'none', effort: wire.reasoning_effort };
  }
  if (typeof enable === 'boolean') return { enabled: enable };
  return undefined;
}

/** Content as IR parts; `allowImages` is false for system/tool/assistant content (text only on the wire). */
function decodeContent(content: ChatMessage['content'], where: string, allowImages: boolean, warnings: Warning[]): IRContentPart[] {
  if (content == null) return [];
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }];
  const parts: IRContentPart[] = [];
  content.forEach((part: AnyPart, j) => {
    const at = `${where}.content[${j}]`;
    if (part.type === 'text') parts.push({ type: 'text', text: parseWire(TextPartSchema, part, at).text });
    else if (part.type === 'image_url' && allowImages) {
      const image = parseWire(ImagePartSchema, part, at).image_url;
      parts.push(imagePartFromUrl(typeof image === 'string' ? image : image.url));
    } else if (part.type === 'refusal' && typeof part.refusal === 'string') parts.push({ type: 'text', text: part.refusal });
    else warnings.push({ code: 'unsupported-content', message: `${at} of type ${part.type} was dropped` });
  });
  return parts;
}

function decodeMessage(message: ChatMessage, where: string, toolNames: ToolNames, warnings: Warning[]): IRMessage {
  switch (message.role) {
    case 'system':
    case 'developer':
      return { role: 'system', content: decodeContent(message.content, where, false, warnings) };
    case 'user':
      return { role: 'user', content: decodeContent(message.content, where, true, warnings) };
    case 'assistant': {
      const out: Extract<IRMessage, { role: 'assistant' }> = {
        role: 'assistant',
        content: decodeContent(message.content, where, false, warnings),
      };
      const reasoning = message.reasoning_content ?? message.reasoning;
      if (reasoning != null && reasoning !== '') out.reasoning = { text: reasoning };
      const calls: IRToolCall[] = [];
      (message.tool_calls ?? []).forEach((call, k) => {
        if (call.type !== undefined && call.type !== 'function') {
          warnings.push({ code: 'unsupported-content', message: `${where}.tool_calls[${k}] of type ${call.type} was dropped` });
          return;
        }
        toolNames.set(call.id, call.function.name);
        calls.push({ id: call.id, name: call.function.name, arguments: call.function.arguments ?? '' });
      });
      if (calls.length > 0) out.toolCalls = calls;
      return out;
    }
    case 'tool': {
      const out: Extract<IRMessage, { role: 'tool' }> = {
        role: 'tool',
        toolCallId: message.tool_call_id,
        content: decodeContent(message.content, where, true, warnings),
      };
      const name = toolNames.get(message.tool_call_id);
      if (name !== undefined) out.name = name;
      return out;
    }
  }
}

/** `tools[i]` as an IR tool, or null when it is not a function tool (dropped with a warning). */
function decodeTool(tool: Tool, i: number, warnings: Warning[]): IRTool | null {
  if (tool.type !== 'function' || !tool.function) {
    warnings.push({ code: 'unsupported-tool', message: `tools[${i}] of type ${tool.type} is not a function tool and was dropped` });
    return null;
  }
  const fn = tool.function;
  const ir: IRTool = { name: fn.name, parameters: cleanToolSchema(fn.parameters), origin: { kind: 'function' } };
  if (fn.description !== undefined) ir.description = fn.description;
  if (fn.strict != null) ir.origin.extra = { strict: fn.strict };
  return ir;
}

function decodeToolChoice(choice: ChatRequest['tool_choice'], hasTools: boolean, warnings: Warning[]): IRToolChoice | undefined {
  if (choice == null) return undefined;
  if (!hasTools) {
    if (choice !== 'auto' && choice !== 'none') {
      warnings.push({ code: 'tool-choice-dropped', message: 'tool_choice was dropped: the request has no tools' });
    }
    return undefined;
  }
  if (typeof choice === 'string') return choice;
  const named = (choice as { function?: { name?: unknown } }).function?.name;
  if (choice.type === 'function' && typeof named === 'string') return { name: named };
  warnings.push({ code: 'unsupported-field', message: `tool_choice of type ${choice.type} is not supported; auto is used` });
  return undefined;
}
