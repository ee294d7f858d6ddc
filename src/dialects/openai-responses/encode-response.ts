/**
 * IR response → the Responses API response object (non-streaming). Built by running the stream state machine over the
 * response's events, so a streamed reply reassembles to exactly this object (same item ids, same order).
 * Output items: reasoning `{id, type, summary: [], content: [reasoning_text], encrypted_content}` (our payload,
 * reasoning-payload.ts), message `{id, type, role, status, content: [output_text]}`, function_call
 * `{id, type, call_id, name, arguments, status}` and custom_tool_call `{id, type, call_id, name, input}`.
 * Source: https://platform.openai.com/docs/api-reference/responses/object
 */
import type { CodecContext } from '../../core/dialect.ts';
import type { IRResponse } from '../../core/ir.ts';
import { responseToStreamEvents } from '../../core/stream.ts';
import { ResponseAssembler, type ResponseBody } from './encode-stream.ts';

/** IR response → response object; ids of output items come from `ctx.newId` (`rs_`, `msg_`, `fc_`, `ctc_`). */
export function encodeResponse(response: IRResponse, ctx: CodecContext): ResponseBody {
  const assembler = new ResponseAssembler(ctx);
  assembler.push({ type: 'start', id: response.id, model: response.model, createdAt: response.createdAt, inputTokens: response.usage.inputTokens });
  for (const event of responseToStreamEvents(response)) assembler.push(event);
  // `finish` is always the last event, so `final` is set; a missing one is a bug in this module.
  if (!assembler.final) throw new Error('responses assembler did not finish');
  return assembler.final;
}
