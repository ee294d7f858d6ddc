/**
 * Finish reasons ↔ Gemini `candidates[].finishReason`. Gemini has no tool-call reason: a turn ending in function
 * calls is `STOP`. Source: https://ai.google.dev/api/generate-content#FinishReason
 */
import { assertNever } from '../../core/errors.ts';
import type { FinishReason } from '../../core/ir.ts';

const unifiedByFinishReason: Readonly<Record<string, FinishReason['unified']>> = {
  STOP: 'stop',
  MAX_TOKENS: 'length',
  SAFETY: 'content-filter',
  RECITATION: 'content-filter',
  BLOCKLIST: 'content-filter',
  PROHIBITED_CONTENT: 'content-filter',
  SPII: 'content-filter',
  IMAGE_SAFETY: 'content-filter',
  LANGUAGE: 'other',
  OTHER: 'other',
  FINISH_REASON_UNSPECIFIED: 'other',
  MALFORMED_FUNCTION_CALL: 'error',
  UNEXPECTED_TOOL_CALL: 'error',
  TOO_MANY_TOOL_CALLS: 'error',
  MISSING_THOUGHT_SIGNATURE: 'error',
};

/**
 * Wire finishReason → IR. Unknown values map to `other`; never throws.
 * @param hasToolCalls true when the candidate holds functionCall parts (`STOP` then means tool-calls).
 */
export function decodeFinishReason(raw: string | null | undefined, hasToolCalls: boolean): FinishReason {
  const unified = raw != null && Object.hasOwn(unifiedByFinishReason, raw) ? unifiedByFinishReason[raw]! : 'other';
  return { unified: unified === 'stop' && hasToolCalls ? 'tool-calls' : unified, raw: raw ?? undefined };
}

/** IR finish → wire finishReason; a Gemini raw value is kept (same-dialect round trips are lossless). */
export function encodeFinishReason(reason: FinishReason): string {
  if (reason.raw !== undefined && Object.hasOwn(unifiedByFinishReason, reason.raw)) {
    const rawUnified = unifiedByFinishReason[reason.raw];
    if (rawUnified === reason.unified || (rawUnified === 'stop' && reason.unified === 'tool-calls')) return reason.raw;
  }
  switch (reason.unified) {
    case 'stop':
    case 'tool-calls':
      return 'STOP';
    case 'length':
      return 'MAX_TOKENS';
    case 'content-filter':
      return 'SAFETY';
    case 'error':
    case 'other':
      return 'OTHER';
    default:
      return assertNever(reason.unified);
  }
}
