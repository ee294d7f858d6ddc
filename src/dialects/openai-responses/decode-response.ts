/**
 * Responses API response object → IR (round-trip tests; a Responses upstream). Reasoning items are decoded from our own
 * `encrypted_content` payload, else from `reasoning_text` content; message text parts are joined; function and custom
 * tool calls become IR tool calls (custom input wrapped as `{"input": …}`, namespace members flattened).
 * Source: https://platform.openai.com/docs/api-reference/responses/object
 */
import type { CodecContext } from '../../core/dialect.ts';
import type { IRContentPart, IRReasoning, IRResponse, IRToolCall, Warning } from '../../core/ir.ts';
import { isRecord, parseWire } from '../shared/validate.ts';
import { z } from 'zod';
import { decodeFinishReason } from './finish-reason.ts';
import { decodeReasoningPayload } from './reasoning-payload.ts';
import { argumentsFromCustomInput, NAMESPACE_SEPARATOR } from './tools.ts';
import { decodeUsage } from './usage.ts';

const ResponseObjectSchema = z.looseObject({
  id: z.string(),
  created_at: z.number(),
  model: z.string(),
  status: z.string().nullish(),
  incomplete_details: z.looseObject({ reason: z.string().nullish() }).nullish(),
  output: z.array(z.looseObject({ type: z.string() })),
  usage: z.unknown().optional(),
});

const str = (value: unknown): string => (typeof value === 'string' ? value : '');

/**
 * Decode a response object.
 * @throws GatewayError('invalid-request') when the body is not a response object.
 */
export function decodeResponse(body: unknown, _ctx: CodecContext): IRResponse {
  const response = parseWire(ResponseObjectSchema, body, 'response');
  const content: IRContentPart[] = [];
  const toolCalls: IRToolCall[] = [];
  const warnings: Warning[] = [];
  let reasoning: IRReasoning | undefined;
  for (const item of response.output) {
    switch (item.type) {
      case 'reasoning': {
        const encrypted = str(item.encrypted_content);
        const decoded = encrypted ? decodeReasoningPayload(encrypted) : null;
        const text = Array.isArray(item.content) ? item.content.map((c) => (isRecord(c) ? str(c.text) : '')).join('') : '';
        reasoning = decoded ?? { text, ...(encrypted ? { signature: encrypted } : {}) };
        break;
      }
      case 'message':
        if (Array.isArray(item.content)) {
          const text = item.content.map((c) => (isRecord(c) ? str(c.text) || str(c.refusal) : '')).join('');
          if (text) content.push({ type: 'text', text });
        }
        break;
      case 'function_call':
      case 'custom_tool_call': {
        const namespace = str(item.namespace);
        const name = namespace ? `${namespace}${NAMESPACE_SEPARATOR}${str(item.name)}` : str(item.name);
        const args = item.type === 'custom_tool_call' ? argumentsFromCustomInput(str(item.input)) : str(item.arguments);
        toolCalls.push({ id: str(item.call_id), name, arguments: args });
        break;
      }
      default:
        warnings.push({ code: 'item-dropped', message: `output item type "${item.type}" is not supported and was dropped` });
    }
  }
  return {
    id: response.id,
    model: response.model,
    content,
    ...(reasoning ? { reasoning } : {}),
    toolCalls,
    finishReason: decodeFinishReason(response.status, response.incomplete_details?.reason, toolCalls.length > 0),
    usage: decodeUsage(response.usage),
    warnings,
    createdAt: response.created_at * 1000,
  };
}
