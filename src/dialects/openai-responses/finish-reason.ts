/**
 * Finish reasons ↔ the Responses API's `status` + `incomplete_details.reason`.
 * Source: https://platform.openai.com/docs/api-reference/responses/object (status: completed | failed | in_progress |
 * cancelled | queued | incomplete; incomplete_details.reason: max_output_tokens | content_filter).
 */
import { assertNever } from '../../core/errors.ts';
import type { FinishReason } from '../../core/ir.ts';

export type ResponseStatus = 'completed' | 'incomplete' | 'failed';

/** IR finish → wire status and incomplete details. A turn that ended with tool calls is simply `completed`. */
export function encodeFinishReason(reason: FinishReason): {
  status: ResponseStatus;
  incomplete_details: { reason: 'max_output_tokens' | 'content_filter' } | null;
} {
  switch (reason.unified) {
    case 'length':
      return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
    case 'content-filter':
      return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
    case 'error':
      return { status: 'failed', incomplete_details: null };
    case 'stop':
    case 'tool-calls':
    case 'other':
      return { status: 'completed', incomplete_details: null };
    default:
      return assertNever(reason.unified);
  }
}

/**
 * Wire status (+ incomplete reason) → IR finish. `raw` is the incomplete reason when there is one, else the status.
 * Unknown values map to `other`; never throws.
 * @param hasToolCalls true when the output holds function/custom tool calls (a completed turn then means tool-calls).
 */
export function decodeFinishReason(status: string | null | undefined, incompleteReason: string | null | undefined, hasToolCalls: boolean): FinishReason {
  if (status === 'incomplete') {
    const raw = incompleteReason ?? status;
    if (incompleteReason === 'max_output_tokens') return { unified: 'length', raw };
    if (incompleteReason === 'content_filter') return { unified: 'content-filter', raw };
    return { unified: 'other', raw };
  }
  if (status === 'completed') return { unified: hasToolCalls ? 'tool-calls' : 'stop', raw: status };
  if (status === 'failed') return { unified: 'error', raw: status };
  return { unified: 'other', raw: status ?? undefined };
}
