/**
 * Anthropic Messages request → IR. Handles what real clients send (docs/protocol-notes.md#anthropic-messages): system as string or blocks,
 * mid-conversation `{role: "system"}` messages (kept in place as IR system messages), Claude Code's billing-header line
 * (stripped by default), cache_control everywhere (dropped), thinking config and
 * thinking/redacted_thinking history, tool_use/tool_result with string or block content and images, tool_choice,
 * `$schema` in tool schemas, server tools (warned and dropped).
 * Source: https://docs.anthropic.com/en/api/messages
 */
import type { CodecContext } from '../../core/dialect.ts';
import type { IRContentPart, IRMessage, IRRequest, IRTool, IRToolChoice, Warning } from '../../core/ir.ts';
import { IR_VERSION } from '../../core/ir.ts';
import { GatewayError } from '../../core/errors.ts';
import { z } from 'zod';
import { cleanToolSchema } from '../shared/json-schema.ts';
import { decodeAnthropicOutputFormat } from '../shared/response-format.ts';
import { UNKNOWN_IMAGE_MEDIA_TYPE } from '../shared/images.ts';
import { DecodeMemo, decodeTools, type ToolNames, unknownArray, validateRequest } from '../shared/decode-memo.ts';
import { parseWire, unknownFieldWarnings } from '../shared/validate.ts';
import { outOfRangeWarnings, type DocumentedRange } from '../shared/sampling-range.ts';
import { decodeAssistantBlock, type AssistantParts } from './content.ts';
import {
  AnyBlockSchema,
  ImageBlockSchema,
  KNOWN_REQUEST_FIELDS,
  MessageSchema,
  MessagesRequestSchema,
  TextBlockSchema,
  ToolResultBlockSchema,
  ToolSchema,
  type MessagesRequest,
} from './schema.ts';

/** Claude Code's per-request attribution line; it changes every turn, so it would break every prefix. */
export const BILLING_HEADER_PREFIX = 'x-anthropic-billing-header:';

type AnyBlock = z.output<typeof AnyBlockSchema>;
type Message = z.output<typeof MessageSchema>;
type Tool = z.output<typeof ToolSchema>;

/** The request's top level; `messages` and `tools` are checked element by element (decodeRequest). */
const ShallowRequestSchema = MessagesRequestSchema.extend({ messages: unknownArray, tools: unknownArray.optional() });
type RequestTop = z.output<typeof ShallowRequestSchema>;

/** Each raw message's IR messages, and each raw tool's IR tool (null: dropped), by object (decode-memo.ts). */
const messageMemo = new DecodeMemo<IRMessage[]>();
const toolMemo = new DecodeMemo<IRTool | null>();


/**
 * Every request content block type of the Messages API (stable and beta), from @anthropic-ai/sdk's `ContentBlockParam`,
 * `BetaContentBlockParam` and tool_result content. A known type Polar cannot forward is dropped with a warning; a type
 * outside this set is a client bug and a 400 that names it (the API rejects unknown tags too).
 * Source: https://docs.anthropic.com/en/api/messages (messages[].content).
 */
const KNOWN_BLOCK_TYPES: ReadonlySet<string> = new Set([
  'text', 'image', 'document', 'search_result', 'thinking', 'redacted_thinking', 'tool_use', 'tool_result',
  'server_tool_use', 'web_search_tool_result', 'web_fetch_tool_result', 'advisor_tool_result', 'code_execution_tool_result',
  'bash_code_execution_tool_result', 'text_editor_code_execution_tool_result', 'tool_search_tool_result', 'mcp_tool_use',
  'mcp_tool_result', 'mcp_tool_listing', 'container_upload', 'compaction', 'tool_addition', 'tool_removal', 'fallback',
  'tool_reference', 'browser_state',
]);

/** Warn about a known block type that is dropped; throw on a type the API does not have. */
function dropBlock(block: AnyBlock, at: string, where: string, warnings: Warning[]): void {
  if (!KNOWN_BLOCK_TYPES.has(block.type)) {
    throw new GatewayError('invalid-request', `${at}.type: unknown block type ${JSON.stringify(block.type)}`, { param: `${at}.type` });
  }
  warnings.push({ code: 'unsupported-content', message: `${at} of type ${block.type}${where} was dropped` });
}

/**
 * Decode a `POST /v1/messages` body.
 * @param body parsed JSON body.
 * @param ctx `ctx.options.stripBillingHeader` (default true) removes Claude Code's billing-header line.
 * @returns IR request; lossy or unsupported features are listed in `warnings`.
 * @throws GatewayError('invalid-request') naming the failing path (e.g. `messages[1].content[0].tool_use_id: ...`,
 *   `messages[0].content[0].type: unknown block type "weird"`), also for a `system` message that does not follow a
 *   user turn (the API's placement rule) and for a conversation left empty once unsupported blocks are dropped.
 */
export function decodeRequest(body: unknown, ctx: CodecContext): IRRequest {
  // Messages and tools decoded at the same index in an earlier call are not validated again (decode-memo.ts).
  const { top: wire, messagesIn, toolsIn } = validateRequest(body, { shallow: ShallowRequestSchema, whole: MessagesRequestSchema, message: MessageSchema, tool: ToolSchema }, { messages: messageMemo, tools: toolMemo });
  const warnings: Warning[] = unknownFieldWarnings(wire, KNOWN_REQUEST_FIELDS, 'request');
  decodeContextManagement(wire.context_management, warnings);
  const responseFormat = decodeOutputConfig(wire.output_config, warnings);

  const messages: IRMessage[] = [];
  const system = decodeSystem(wire.system, ctx.options?.stripBillingHeader !== false, warnings);
  if (system.length > 0) messages.push({ role: 'system', content: system });
  const toolNames = new Map<string, string>();
  const decoded = messageMemo.decodeAll(
    wire.messages,
    toolNames,
    warnings,
    (raw, i, names, own) => decodeMessage(messagesIn[i] ?? parseWire(MessageSchema, raw, `messages[${i}]`), `messages[${i}]`, names, own),
    (list) => list,
    // The placement rule reads the message before, so it is checked on every call that does not share both.
    (raw, i) => {
      if ((raw as { role: string }).role === 'system') checkSystemPlacement(wire.messages as readonly { role: string }[], i);
    },
  );
  for (const message of decoded) messages.push(message);

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
  const choice = decodeToolChoice(wire, tools.length > 0, warnings);
  if (choice.toolChoice !== undefined) request.toolChoice = choice.toolChoice;
  if (choice.parallelToolCalls !== undefined) request.parallelToolCalls = choice.parallelToolCalls;
  if (wire.thinking) {
    request.reasoning =
      wire.thinking.type === 'disabled'
        ? { enabled: false }
        : wire.thinking.budget_tokens !== undefined && wire.thinking.type === 'enabled'
          ? { enabled: true, budgetTokens: wire.thinking.budget_tokens }
          : { enabled: true };
  }
  const user = wire.metadata?.user_id;
  if (typeof user === 'string') request.user = user;
  if (responseFormat) request.responseFormat = responseFormat;
  if (!messages.some((m) => m.role !== 'system')) {
    // Without this an engine gets an empty conversation and answers with an error that hides the cause.
    const dropped = warnings.filter((w) => w.code === 'unsupported-content').map((w) => w.message);
    throw new GatewayError(
      'invalid-request',
      wire.messages.length === 0
        ? 'messages: at least one message is required'
        : `messages: nothing left to send${dropped.length > 0 ? ` after dropping unsupported content (${dropped.join('; ')})` : ': every message is empty'}`,
      { param: 'messages' },
    );
  }
  return request;
}

/** Anthropic's documented sampling ranges (https://docs.anthropic.com/en/api/messages). */
const RANGES: readonly DocumentedRange[] = [
  { field: 'temperature', min: 0, max: 1 },
  { field: 'top_p', min: 0, max: 1 },
];

function decodeSampling(wire: RequestTop, warnings: Warning[]): IRRequest['sampling'] {
  const sampling: IRRequest['sampling'] = {};
  warnings.push(...outOfRangeWarnings({ temperature: wire.temperature, top_p: wire.top_p }, RANGES, 'Anthropic Messages'));
  if (wire.max_tokens === undefined) {
    warnings.push({ code: 'missing-field', message: "max_tokens is required by the Anthropic Messages API and was not sent; the engine's own limit applies" });
  }
  if (wire.max_tokens !== undefined) sampling.maxTokens = wire.max_tokens;
  if (wire.temperature !== undefined) sampling.temperature = wire.temperature;
  if (wire.top_p !== undefined) sampling.topP = wire.top_p;
  if (wire.top_k !== undefined) sampling.topK = wire.top_k;
  if (wire.stop_sequences !== undefined && wire.stop_sequences.length > 0) sampling.stop = [...wire.stop_sequences];
  return sampling;
}

function decodeSystem(system: MessagesRequest['system'], stripBilling: boolean, warnings: Warning[]): IRContentPart[] {
  if (system === undefined) return [];
  const texts: string[] = [];
  if (typeof system === 'string') texts.push(system);
  else {
    system.forEach((block, i) => {
      if (block.type !== 'text') return dropBlock(block, `system[${i}]`, '', warnings);
      texts.push(parseWire(TextBlockSchema, block, `system[${i}]`).text);
    });
  }
  if (stripBilling && texts.length > 0 && texts[0]!.startsWith(BILLING_HEADER_PREFIX)) {
    const first = texts[0]!;
    const newline = first.indexOf('\n');
    const remainder = newline === -1 ? '' : first.slice(newline + 1);
    if (remainder === '') texts.shift();
    else texts[0] = remainder;
    warnings.push({ code: 'billing-header-stripped', message: 'removed the x-anthropic-billing-header system line' });
  }
  return texts.filter((text) => text !== '').map((text) => ({ type: 'text', text }));
}

/** One `messages[i]` entry as IR messages (none, one, or several: a user turn's tool results become tool messages). */
function decodeMessage(message: Message, where: string, toolNames: ToolNames, warnings: Warning[]): IRMessage[] {
  const blocks: AnyBlock[] = typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content;
  if (message.role === 'assistant') return [decodeAssistant(blocks, where, toolNames, warnings)];
  if (message.role === 'system') {
    const content = decodeSystemMessage(blocks, where, warnings);
    return content.length > 0 ? [{ role: 'system', content }] : [];
  }
  return decodeUser(blocks, where, toolNames, warnings);
}

/**
 * Placement rule of the API: a system entry follows a user turn, so it is never first and never sits between a
 * tool_use and its tool_result.
 * @throws GatewayError('invalid-request') naming `messages[i].role`.
 */
function checkSystemPlacement(messages: readonly { role: string }[], i: number): void {
  if (messages[i - 1]?.role === 'user') return;
  throw new GatewayError(
    'invalid-request',
    `messages[${i}].role: a "system" message must follow a "user" turn (${i === 0 ? 'it cannot be the first message; put leading instructions in the top-level system field' : `it follows a "${messages[i - 1]!.role}" message`})`,
    { param: `messages[${i}].role` },
  );
}

/**
 * A mid-conversation `{role: "system"}` message: kept as an IR system message at its position (the engine decides how
 * its template renders it). Only text blocks are allowed there; anything else is dropped with a warning, and a message
 * left without text is dropped with one too.
 */
function decodeSystemMessage(blocks: AnyBlock[], where: string, warnings: Warning[]): IRContentPart[] {
  const content: IRContentPart[] = [];
  blocks.forEach((block, j) => {
    const at = `${where}.content[${j}]`;
    if (block.type !== 'text') return dropBlock(block, at, ' in a system message', warnings);
    const text = parseWire(TextBlockSchema, block, at).text;
    if (text !== '') content.push({ type: 'text', text });
  });
  if (content.length === 0) warnings.push({ code: 'unsupported-content', message: `${where}: a system message without text was dropped` });
  return content;
}

function decodeImage(block: AnyBlock, where: string): IRContentPart {
  const image = parseWire(ImageBlockSchema, block, where);
  return image.source.type === 'base64'
    ? { type: 'image', mediaType: image.source.media_type, data: image.source.data }
    : { type: 'image', mediaType: UNKNOWN_IMAGE_MEDIA_TYPE, url: image.source.url };
}

function decodeUser(blocks: AnyBlock[], where: string, toolNames: ToolNames, warnings: Warning[]): IRMessage[] {
  const out: IRMessage[] = [];
  let pending: IRContentPart[] = [];
  const flush = () => {
    if (pending.length > 0) out.push({ role: 'user', content: pending });
    pending = [];
  };
  blocks.forEach((block, j) => {
    const at = `${where}.content[${j}]`;
    switch (block.type) {
      case 'text':
        pending.push({ type: 'text', text: parseWire(TextBlockSchema, block, at).text });
        break;
      case 'image':
        pending.push(decodeImage(block, at));
        break;
      case 'tool_result': {
        flush();
        const result = parseWire(ToolResultBlockSchema, block, at);
        const content: IRContentPart[] = [];
        if (typeof result.content === 'string') content.push({ type: 'text', text: result.content });
        else {
          (result.content ?? []).forEach((inner, k) => {
            const innerAt = `${at}.content[${k}]`;
            if (inner.type === 'text') content.push({ type: 'text', text: parseWire(TextBlockSchema, inner, innerAt).text });
            else if (inner.type === 'image') content.push(decodeImage(inner, innerAt));
            else dropBlock(inner, innerAt, '', warnings);
          });
        }
        const message: Extract<IRMessage, { role: 'tool' }> = { role: 'tool', toolCallId: result.tool_use_id, content };
        const name = toolNames.get(result.tool_use_id);
        if (name !== undefined) message.name = name;
        if (result.is_error === true) message.isError = true;
        out.push(message);
        break;
      }
      default:
        dropBlock(block, at, ' in a user message', warnings);
    }
  });
  flush();
  return out;
}

function decodeAssistant(blocks: AnyBlock[], where: string, toolNames: ToolNames, warnings: Warning[]): IRMessage {
  const parts: AssistantParts = { content: [], toolCalls: [] };
  blocks.forEach((block, j) => {
    const at = `${where}.content[${j}]`;
    const merging = block.type === 'thinking' && parts.reasoning !== undefined;
    const decoded = decodeAssistantBlock(block, at, parts);
    if (decoded === false) dropBlock(block, at, ' in an assistant message', warnings);
    else if (decoded !== true) toolNames.set(decoded.id, decoded.name);
    if (merging) warnings.push({ code: 'merged-reasoning', message: `${at}: several thinking blocks in one turn were joined; the last signature is kept` });
  });
  const message: Extract<IRMessage, { role: 'assistant' }> = { role: 'assistant', content: parts.content };
  if (parts.reasoning) message.reasoning = parts.reasoning;
  if (parts.toolCalls.length > 0) message.toolCalls = parts.toolCalls;
  return message;
}

/** `tools[i]` as an IR tool, or null when it is not a client tool with an input_schema (dropped with a warning). */
function decodeTool(tool: Tool, i: number, warnings: Warning[]): IRTool | null {
  const isClientTool = tool.type === undefined || tool.type === 'custom';
  if (!isClientTool || tool.input_schema === undefined) {
    warnings.push({ code: 'unsupported-tool', message: `tools[${i}] ${tool.name} (type ${tool.type ?? 'custom'}) is not a client tool with an input_schema and was dropped` });
    return null;
  }
  const ir: IRTool = { name: tool.name, parameters: cleanToolSchema(tool.input_schema), origin: { kind: 'function' } };
  if (tool.description !== undefined) ir.description = tool.description;
  if (tool.eager_input_streaming !== undefined) ir.origin.extra = { eager_input_streaming: tool.eager_input_streaming };
  return ir;
}

function decodeToolChoice(
  wire: RequestTop,
  hasTools: boolean,
  warnings: Warning[],
): { toolChoice?: IRToolChoice; parallelToolCalls?: boolean } {
  const choice = wire.tool_choice;
  if (!choice) return {};
  if (!hasTools) {
    if (choice.type === 'any' || choice.type === 'tool') {
      warnings.push({ code: 'tool-choice-dropped', message: `tool_choice ${choice.type} was dropped: the request has no tools` });
    }
    return {};
  }
  const out: { toolChoice?: IRToolChoice; parallelToolCalls?: boolean } = {};
  switch (choice.type) {
    case 'auto':
      out.toolChoice = 'auto';
      break;
    case 'any':
      out.toolChoice = 'required';
      break;
    case 'none':
      out.toolChoice = 'none';
      break;
    case 'tool':
      if (!choice.name) throw new GatewayError('invalid-request', 'tool_choice.name: required when tool_choice.type is "tool"', { param: 'tool_choice.name' });
      out.toolChoice = { name: choice.name };
      break;
  }
  if (choice.disable_parallel_tool_use !== undefined) out.parallelToolCalls = !choice.disable_parallel_tool_use;
  return out;
}

/**
 * `output_config`: `format` (structured outputs, `{type: "json_schema", schema}`) becomes the IR response format;
 * `effort` has no engine equivalent and is reported. Other keys are reported as unknown.
 * @throws GatewayError('invalid-request') naming `output_config…` for a malformed value.
 */
function decodeOutputConfig(value: unknown, warnings: Warning[]): IRRequest['responseFormat'] {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new GatewayError('invalid-request', 'output_config: must be an object', { param: 'output_config' });
  }
  const config = value as Record<string, unknown>;
  warnings.push(...unknownFieldWarnings(config, new Set(['format', 'effort']), 'output_config'));
  if (config.effort != null) warnings.push({ code: 'unsupported-field', message: `output_config.effort "${String(config.effort)}" has no engine equivalent and was ignored` });
  return decodeAnthropicOutputFormat(config.format);
}

/**
 * `context_management` (server-side context editing, https://docs.anthropic.com/en/docs/build-with-claude/context-editing):
 * the proxy never edits a history, because the engine must see what the harness sent and token prefixes must stay
 * intact. `clear_thinking` with `keep: "all"` (what Claude Code sends) clears nothing, so it is honoured as is; any
 * other edit is not applied and reported with a `context-management-not-applied` warning naming the edit types.
 * @throws GatewayError('invalid-request') naming `context_management.edits` when it is not a list of typed edits.
 */
function decodeContextManagement(value: unknown, warnings: Warning[]): void {
  if (value === undefined || value === null) return;
  const edits = (value as { edits?: unknown }).edits;
  if (typeof value !== 'object' || Array.isArray(value) || (edits !== undefined && !Array.isArray(edits))) {
    throw new GatewayError('invalid-request', 'context_management.edits: must be a list of edits', { param: 'context_management.edits' });
  }
  const list = (edits ?? []) as unknown[];
  list.forEach((edit, i) => {
    if (typeof edit !== 'object' || edit === null || typeof (edit as { type?: unknown }).type !== 'string') {
      throw new GatewayError('invalid-request', `context_management.edits[${i}].type: must be a string`, { param: `context_management.edits[${i}].type` });
    }
  });
  const applied = list.filter((edit) => {
    const e = edit as { type: string; keep?: unknown };
    return !(e.type.startsWith('clear_thinking') && e.keep === 'all');
  });
  if (applied.length > 0) {
    const types = applied.map((e) => (e as { type: string }).type).join(', ');
    warnings.push({
      code: 'context-management-not-applied',
      message: `context_management edits (${types}) were not applied: the engine sees the history exactly as sent (the proxy never edits a conversation, so its token prefixes stay mergeable)`,
    });
  }
}
