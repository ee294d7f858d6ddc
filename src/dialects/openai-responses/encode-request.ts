/**
 * IR request → Responses API request body (round-trip tests; a Responses upstream). System messages become `developer`
 * message items (as Codex sends them); assistant turns become reasoning (our encrypted payload) / message /
 * function_call or custom_tool_call items; tool messages become `function_call_output` or `custom_tool_call_output`.
 * Always `store: false` with `include: ["reasoning.encrypted_content"]`, so replays carry the reasoning back.
 * Source: https://platform.openai.com/docs/api-reference/responses/create
 */
import type { IRContentPart, IRRequest } from '../../core/ir.ts';
import { imagePartToUrl } from '../shared/images.ts';
import { encodeReasoningPayload } from './reasoning-payload.ts';
import { customInputFromArguments, encodeToolChoice, encodeTools, resolveCallTarget } from './tools.ts';

function inputContent(parts: readonly IRContentPart[], textType: 'input_text' | 'output_text'): unknown[] {
  return parts.map((part) =>
    part.type === 'text'
      ? textType === 'output_text'
        ? { type: 'output_text', text: part.text, annotations: [] }
        : { type: 'input_text', text: part.text }
      : { type: 'input_image', image_url: imagePartToUrl(part), detail: 'auto' },
  );
}

/** Encode an IR request as a Responses body (`stream` as in the IR). */
export function encodeRequest(request: IRRequest): Record<string, unknown> {
  const input: unknown[] = [];
  const customCalls = new Set<string>();
  for (const message of request.messages) {
    switch (message.role) {
      case 'system':
        input.push({ type: 'message', role: 'developer', content: inputContent(message.content, 'input_text') });
        break;
      case 'user':
        input.push({ type: 'message', role: 'user', content: inputContent(message.content, 'input_text') });
        break;
      case 'assistant': {
        if (message.reasoning) {
          input.push({
            type: 'reasoning',
            summary: [],
            ...(message.reasoning.text ? { content: [{ type: 'reasoning_text', text: message.reasoning.text }] } : {}),
            encrypted_content: encodeReasoningPayload(message.reasoning),
          });
        }
        if (message.content.length > 0) {
          input.push({ type: 'message', role: 'assistant', content: inputContent(message.content, 'output_text') });
        }
        for (const call of message.toolCalls ?? []) {
          const target = resolveCallTarget(call.name, request.tools);
          const ns = target.namespace ? { namespace: target.namespace } : {};
          if (target.kind === 'custom') {
            customCalls.add(call.id);
            input.push({ type: 'custom_tool_call', call_id: call.id, name: target.name, ...ns, input: customInputFromArguments(call.arguments) });
          } else {
            input.push({ type: 'function_call', call_id: call.id, name: target.name, ...ns, arguments: call.arguments });
          }
        }
        break;
      }
      case 'tool': {
        const onlyText = message.content.every((part) => part.type === 'text');
        const output = onlyText ? message.content.map((part) => (part.type === 'text' ? part.text : '')).join('') : inputContent(message.content, 'input_text');
        input.push({ type: customCalls.has(message.toolCallId) ? 'custom_tool_call_output' : 'function_call_output', call_id: message.toolCallId, output });
        break;
      }
    }
  }
  const toolChoice = encodeToolChoice(request.toolChoice);
  return {
    model: request.model,
    input,
    ...(request.tools.length > 0 ? { tools: encodeTools(request.tools) } : {}),
    ...(toolChoice !== undefined ? { tool_choice: toolChoice } : {}),
    ...(request.parallelToolCalls !== undefined ? { parallel_tool_calls: request.parallelToolCalls } : {}),
    ...(request.sampling.temperature !== undefined ? { temperature: request.sampling.temperature } : {}),
    ...(request.sampling.topP !== undefined ? { top_p: request.sampling.topP } : {}),
    ...(request.sampling.maxTokens !== undefined ? { max_output_tokens: request.sampling.maxTokens } : {}),
    ...(request.reasoning ? { reasoning: { effort: request.reasoning.effort ?? (request.reasoning.enabled ? 'medium' : 'none') } } : {}),
    ...(request.user !== undefined ? { user: request.user } : {}),
    ...(request.responseFormat?.type === 'json_object' ? { text: { format: { type: 'json_object' } } } : {}),
    ...(request.responseFormat?.type === 'json_schema'
      ? { text: { format: { type: 'json_schema', name: request.responseFormat.name ?? 'response', schema: request.responseFormat.schema, ...(request.responseFormat.strict !== undefined ? { strict: request.responseFormat.strict } : {}) } } }
      : {}),
    stream: request.stream,
    store: false,
    include: ['reasoning.encrypted_content'],
  };
}
