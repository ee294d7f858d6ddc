/**
 * Usage ↔ the Responses API `usage` object. Codex reports "stream disconnected" when `response.completed` lacks any of
 * these fields, so every field is always present (docs/protocol-notes.md#openai-responses).
 * Source: https://platform.openai.com/docs/api-reference/responses/object#responses/object-usage
 */
import type { IRUsage } from '../../core/ir.ts';

export interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  /** Includes reasoning tokens. */
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

/** IR usage (tokens) → wire usage, all fields present. */
export function encodeUsage(usage: IRUsage): ResponsesUsage {
  return {
    input_tokens: usage.inputTokens,
    input_tokens_details: { cached_tokens: usage.cachedInputTokens },
    output_tokens: usage.outputTokens,
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens },
    total_tokens: usage.inputTokens + usage.outputTokens,
  };
}

/** Wire usage → IR usage; missing fields count as 0. */
export function decodeUsage(usage: unknown): IRUsage {
  const u = (typeof usage === 'object' && usage !== null ? usage : {}) as Partial<Record<string, unknown>>;
  const num = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) ? value : 0);
  const details = (value: unknown, key: string) => (typeof value === 'object' && value !== null ? num((value as Record<string, unknown>)[key]) : 0);
  return {
    inputTokens: num(u.input_tokens),
    outputTokens: num(u.output_tokens),
    cachedInputTokens: details(u.input_tokens_details, 'cached_tokens'),
    reasoningTokens: details(u.output_tokens_details, 'reasoning_tokens'),
  };
}
