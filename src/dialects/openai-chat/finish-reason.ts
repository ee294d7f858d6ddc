/**
 * OpenAI Chat `finish_reason` ↔ unified finish reason, both directions.
 * Source: https://platform.openai.com/docs/api-reference/chat/object (choices[].finish_reason); vLLM adds `abort`.
 */
import type { FinishReason } from '../../core/ir.ts';
import { assertNever } from '../../core/errors.ts';

const unifiedByFinishReason: Readonly<Record<string, FinishReason['unified']>> = {
  stop: 'stop',
  length: 'length',
  tool_calls: 'tool-calls',
  function_call: 'tool-calls',
  content_filter: 'content-filter',
};

/** Wire `finish_reason` → `{unified, raw}`; unknown or missing values give `other` and never throw. */
export function decodeFinishReason(raw: string | null | undefined): FinishReason {
  const unified = raw != null && Object.hasOwn(unifiedByFinishReason, raw) ? unifiedByFinishReason[raw]! : 'other';
  return raw == null ? { unified } : { unified, raw };
}

/**
 * Unified finish reason → wire `finish_reason`. A reply with tool calls that stopped normally is `tool_calls` (clients
 * run tools only then). Each other unified value has exactly one wire value, so same-dialect round trips are lossless.
 * @param hasToolCalls whether the reply carries at least one tool call.
 */
export function encodeFinishReason(reason: FinishReason, hasToolCalls: boolean): string {
  const natural = reason.unified === 'stop' || reason.unified === 'tool-calls' || reason.unified === 'other';
  if (hasToolCalls && natural) return 'tool_calls';
  switch (reason.unified) {
    case 'length':
      return 'length';
    case 'content-filter':
      return 'content_filter';
    case 'tool-calls':
    case 'stop':
    case 'error':
    case 'other':
      return 'stop';
    default:
      return assertNever(reason.unified);
  }
}
