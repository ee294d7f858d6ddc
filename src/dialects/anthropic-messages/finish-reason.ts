/**
 * Anthropic `stop_reason` ↔ unified finish reason, both directions.
 * Source: https://docs.anthropic.com/en/api/messages (stop_reason values).
 */
import type { FinishReason } from '../../core/ir.ts';
import { assertNever } from '../../core/errors.ts';

const unifiedByStopReason: Readonly<Record<string, FinishReason['unified']>> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  pause_turn: 'stop',
  max_tokens: 'length',
  model_context_window_exceeded: 'length',
  tool_use: 'tool-calls',
  refusal: 'content-filter',
};

/** The `stop_sequence` field: the matched stop string when the turn ended on one, else null. */
export function encodeStopSequence(reason: FinishReason, hasToolUse: boolean): string | null {
  return encodeStopReason(reason, hasToolUse) === 'stop_sequence' ? (reason.stopSequence ?? null) : null;
}

/** Wire `stop_reason` → `{unified, raw}`; unknown or missing values give `other` and never throw. */
export function decodeStopReason(raw: string | null | undefined): FinishReason {
  const unified = raw != null && Object.hasOwn(unifiedByStopReason, raw) ? unifiedByStopReason[raw]! : 'other';
  return raw == null ? { unified } : { unified, raw };
}

/**
 * Unified finish reason → wire `stop_reason`. A raw Anthropic value is kept (lossless same-dialect round trip), except
 * that a turn that emitted tool_use blocks and stopped normally is always `tool_use` (Claude Code only runs tools then).
 * @param hasToolUse whether the reply contains at least one tool_use block.
 */
export function encodeStopReason(reason: FinishReason, hasToolUse: boolean): string {
  if (reason.stopSequence !== undefined && !hasToolUse) return 'stop_sequence';
  const natural = reason.unified === 'stop' || reason.unified === 'tool-calls' || reason.unified === 'other';
  if (hasToolUse && natural) return 'tool_use';
  if (reason.raw !== undefined && Object.hasOwn(unifiedByStopReason, reason.raw) && unifiedByStopReason[reason.raw] === reason.unified) {
    if (reason.raw !== 'tool_use') return reason.raw; // tool_use without a tool_use block would stall the client
  }
  switch (reason.unified) {
    case 'length':
      return 'max_tokens';
    case 'tool-calls':
      return hasToolUse ? 'tool_use' : 'end_turn';
    case 'content-filter':
      return 'refusal';
    case 'stop':
    case 'error':
    case 'other':
      return 'end_turn';
    default:
      return assertNever(reason.unified);
  }
}
