/**
 * OpenAI Responses request (`POST /v1/responses`) → IR. Input items are folded into chat turns: a run of
 * reasoning / assistant message / function_call / custom_tool_call items is ONE assistant turn (that is how the model
 * produced them); tool outputs become `tool` messages; system and developer messages (and `instructions`) are IR system messages
 * where they stand (the engine encoding places them per `engine.system_messages`).
 * Source: https://platform.openai.com/docs/api-reference/responses/create; docs/protocol-notes.md#openai-responses (Codex, pi).
 */
import type { CodecContext } from '../../core/dialect.ts';
import { GatewayError } from '../../core/errors.ts';
import { IR_VERSION, type IRContentPart, type IRMessage, type IRReasoning, type IRRequest, type Warning } from '../../core/ir.ts';
import { imagePartFromUrl } from '../shared/images.ts';
import { decodeResponsesTextFormat } from '../shared/response-format.ts';
import { parseWire, unknownFieldWarnings } from '../shared/validate.ts';
import { outOfRangeWarnings, type DocumentedRange } from '../shared/sampling-range.ts';
import { decodeReasoningPayload } from './reasoning-payload.ts';
import {
  type ContentPart,
  CustomToolCallItemSchema,
  FunctionCallItemSchema,
  FunctionCallOutputItemSchema,
  IGNORED_REQUEST_FIELDS,
  KNOWN_REQUEST_FIELDS,
  MessageItemSchema,
  ReasoningItemSchema,
  RequestSchema,
} from './schema.ts';
import { argumentsFromCustomInput, decodeToolChoice, decodeTools, NAMESPACE_SEPARATOR } from './tools.ts';

type AssistantMessage = Extract<IRMessage, { role: 'assistant' }>;

/** OpenAI Responses' documented sampling ranges (https://platform.openai.com/docs/api-reference/responses/create). */
const RANGES: readonly DocumentedRange[] = [
  { field: 'temperature', min: 0, max: 2 },
  { field: 'top_p', min: 0, max: 1 },
];

/**
 * Decode a Responses request body.
 * @throws GatewayError('invalid-request') on a malformed body (naming the field), on `previous_response_id` /
 *   `conversation` / `item_reference` (they need server-side state the proxy does not keep).
 */
export function decodeRequest(body: unknown, _ctx: CodecContext): IRRequest {
  const request = parseWire(RequestSchema, body);
  const warnings: Warning[] = unknownFieldWarnings(request, new Set([...KNOWN_REQUEST_FIELDS, ...IGNORED_REQUEST_FIELDS]), 'request');

  if (request.previous_response_id) {
    throw new GatewayError(
      'invalid-request',
      `previous_response_id is not supported: this proxy stores no responses (got "${request.previous_response_id}"); send the full conversation in input with store: false`,
      { param: 'previous_response_id' },
    );
  }
  if (request.conversation != null) {
    throw new GatewayError('invalid-request', 'conversation is not supported: this proxy stores no conversations; send the full input', {
      param: 'conversation',
    });
  }
  if (request.store === true) {
    warnings.push({ code: 'store-ignored', message: 'store: true is ignored; responses are not stored (previous_response_id will not work)' });
  }

  const messages: IRMessage[] = [];
  if (request.instructions) messages.push({ role: 'system', content: [{ type: 'text', text: request.instructions }] });
  if (typeof request.input === 'string') messages.push({ role: 'user', content: [{ type: 'text', text: request.input }] });
  else decodeItems(request.input, messages, warnings);

  const responseFormat = decodeResponsesTextFormat(request.text?.format);
  if (request.text?.verbosity) {
    warnings.push({ code: 'verbosity-ignored', message: `text.verbosity "${request.text.verbosity}" is not supported and was ignored` });
  }

  const tools = decodeTools(request.tools, warnings);
  const toolChoice = decodeToolChoice(request.tool_choice, warnings);
  const effort = request.reasoning?.effort ?? undefined;
  const user = request.user ?? request.safety_identifier ?? undefined;

  warnings.push(...outOfRangeWarnings({ temperature: request.temperature, top_p: request.top_p }, RANGES, 'OpenAI Responses'));
  return {
    version: IR_VERSION,
    model: request.model,
    messages,
    tools,
    ...(toolChoice !== undefined ? { toolChoice } : {}),
    ...(request.parallel_tool_calls != null ? { parallelToolCalls: request.parallel_tool_calls } : {}),
    ...(responseFormat ? { responseFormat } : {}),
    sampling: {
      ...(request.temperature != null ? { temperature: request.temperature } : {}),
      ...(request.top_p != null ? { topP: request.top_p } : {}),
      ...(request.max_output_tokens != null ? { maxTokens: request.max_output_tokens } : {}),
    },
    ...(effort !== undefined ? { reasoning: { enabled: effort !== 'none', effort } } : {}),
    stream: request.stream === true,
    ...(user !== undefined ? { user } : {}),
    warnings,
  };
}

function decodeItems(items: readonly { type?: string; role?: string }[], messages: IRMessage[], warnings: Warning[]): void {
  // The assistant turn being assembled; closed by any user/system message or tool output.
  let assistant: AssistantMessage | null = null;
  const openAssistant = (): AssistantMessage => {
    const message: AssistantMessage = { role: 'assistant', content: [] };
    messages.push(message);
    assistant = message;
    return message;
  };
  const callNames = new Map<string, string>();

  items.forEach((item, index) => {
    const where = `input[${index}]`;
    const type = item.type ?? (item.role !== undefined ? 'message' : undefined);
    switch (type) {
      case 'message': {
        const message = parseWire(MessageItemSchema, item, where);
        const content = decodeContent(message.content, `${where}.content`, warnings);
        if (message.role === 'assistant') {
          const current: AssistantMessage | null = assistant;
          const target = current && !current.toolCalls?.length ? current : openAssistant();
          target.content.push(...content);
        } else {
          assistant = null;
          messages.push({ role: message.role === 'user' ? 'user' : 'system', content });
        }
        break;
      }
      case 'reasoning': {
        const reasoning = decodeReasoningItem(parseWire(ReasoningItemSchema, item, where), where, warnings);
        if (!reasoning) break;
        const current: AssistantMessage | null = assistant;
        const target = current && !current.reasoning && current.content.length === 0 && !current.toolCalls?.length ? current : openAssistant();
        target.reasoning = reasoning;
        break;
      }
      case 'function_call': {
        const call = parseWire(FunctionCallItemSchema, item, where);
        const name = call.namespace ? `${call.namespace}${NAMESPACE_SEPARATOR}${call.name}` : call.name;
        const target: AssistantMessage = assistant ?? openAssistant();
        (target.toolCalls ??= []).push({ id: call.call_id, name, arguments: call.arguments });
        callNames.set(call.call_id, name);
        break;
      }
      case 'custom_tool_call': {
        const call = parseWire(CustomToolCallItemSchema, item, where);
        const name = call.namespace ? `${call.namespace}${NAMESPACE_SEPARATOR}${call.name}` : call.name;
        const target: AssistantMessage = assistant ?? openAssistant();
        (target.toolCalls ??= []).push({ id: call.call_id, name, arguments: argumentsFromCustomInput(call.input) });
        callNames.set(call.call_id, name);
        break;
      }
      case 'function_call_output':
      case 'custom_tool_call_output': {
        const output = parseWire(FunctionCallOutputItemSchema, item, where);
        assistant = null;
        const name = callNames.get(output.call_id);
        if (name === undefined) {
          warnings.push({ code: 'orphan-tool-output', message: `${where}: no earlier call has call_id "${output.call_id}"` });
        }
        messages.push({
          role: 'tool',
          toolCallId: output.call_id,
          ...(name !== undefined ? { name } : {}),
          content: decodeContent(output.output, `${where}.output`, warnings),
        });
        break;
      }
      case 'item_reference':
        throw new GatewayError('invalid-request', `${where}: item_reference is not supported: this proxy stores no items; send the item itself`, {
          param: where,
        });
      default:
        warnings.push({ code: 'item-dropped', message: `${where}: input item type "${type ?? '(none)'}" is not supported and was dropped` });
    }
  });
}

function decodeContent(content: string | readonly ContentPart[], where: string, warnings: Warning[]): IRContentPart[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  const parts: IRContentPart[] = [];
  content.forEach((part, index) => {
    switch (part.type) {
      case 'input_text':
      case 'output_text':
      case 'text':
        parts.push({ type: 'text', text: part.text ?? '' });
        break;
      case 'refusal':
        parts.push({ type: 'text', text: part.refusal ?? '' });
        break;
      case 'input_image':
        if (part.image_url) parts.push(imagePartFromUrl(part.image_url));
        else warnings.push({ code: 'image-dropped', message: `${where}[${index}]: image by file_id cannot be resolved locally and was dropped` });
        break;
      default:
        warnings.push({ code: 'content-dropped', message: `${where}[${index}]: content type "${part.type}" is not supported and was dropped` });
    }
  });
  return parts;
}

/**
 * A reasoning item → IR reasoning. Ours (encrypted_content we minted) gives back the exact text; plain `reasoning_text`
 * content (open-weight clients) is used as is; anything else (a foreign encrypted payload, summaries only) is dropped
 * with a warning, because a summary is not what the model sampled.
 */
function decodeReasoningItem(item: ReturnType<typeof ReasoningItemSchema.parse>, where: string, warnings: Warning[]): IRReasoning | null {
  if (item.encrypted_content) {
    const ours = decodeReasoningPayload(item.encrypted_content);
    if (ours) return ours;
  }
  const text = (item.content ?? []).filter((c) => c.type === 'reasoning_text').map((c) => c.text).join('');
  if (text) return { text };
  if (item.encrypted_content) {
    warnings.push({ code: 'reasoning-dropped', message: `${where}: reasoning encrypted_content was not produced by this proxy and was dropped` });
  } else if (item.summary?.length) {
    warnings.push({ code: 'reasoning-dropped', message: `${where}: reasoning with only a summary was dropped (the summary is not the sampled text)` });
  }
  return null;
}
