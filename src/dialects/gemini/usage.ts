/**
 * Usage ↔ Gemini `usageMetadata`. Gemini counts thoughts apart from candidates:
 * totalTokenCount = promptTokenCount + candidatesTokenCount + thoughtsTokenCount, while IR `outputTokens` includes reasoning.
 * Source: https://ai.google.dev/api/generate-content#UsageMetadata
 */
import type { IRUsage } from '../../core/ir.ts';

export interface UsageMetadata {
  promptTokenCount: number;
  candidatesTokenCount: number;
  totalTokenCount: number;
  thoughtsTokenCount: number;
  cachedContentTokenCount: number;
}

/** IR usage (tokens) → usageMetadata, every field present. */
export function encodeUsage(usage: IRUsage): UsageMetadata {
  const thoughts = Math.min(usage.reasoningTokens, usage.outputTokens);
  return {
    promptTokenCount: usage.inputTokens,
    candidatesTokenCount: usage.outputTokens - thoughts,
    totalTokenCount: usage.inputTokens + usage.outputTokens,
    thoughtsTokenCount: thoughts,
    cachedContentTokenCount: usage.cachedInputTokens,
  };
}

/** usageMetadata → IR usage; missing fields count as 0. */
export function decodeUsage(metadata: unknown): IRUsage {
  const m = (typeof metadata === 'object' && metadata !== null ? metadata : {}) as Partial<Record<string, unknown>>;
  const num = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) ? value : 0);
  const thoughts = num(m.thoughtsTokenCount);
  return {
    inputTokens: num(m.promptTokenCount),
    outputTokens: num(m.candidatesTokenCount) + thoughts,
    cachedInputTokens: num(m.cachedContentTokenCount),
    reasoningTokens: thoughts,
  };
}
