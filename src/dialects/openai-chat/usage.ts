/**
 * OpenAI Chat usage ↔ IR usage (same semantics: `prompt_tokens` includes cached tokens).
 * Source: https://platform.openai.com/docs/api-reference/chat/object (usage).
 */
import type { IRUsage } from '../../core/ir.ts';

/** OpenAI Chat `usage`, in tokens. */
export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
  completion_tokens_details: { reasoning_tokens: number };
}

/** IR usage → wire usage; total = prompt + completion. */
export function encodeUsage(usage: IRUsage): ChatUsage {
  return {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.inputTokens + usage.outputTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedInputTokens },
    completion_tokens_details: { reasoning_tokens: usage.reasoningTokens },
  };
}

/** Wire usage (any field may be missing or null) → IR usage. */
export function decodeUsage(
  usage:
    | {
        prompt_tokens?: number;
        completion_tokens?: number;
        prompt_tokens_details?: { cached_tokens?: number | null } | null;
        completion_tokens_details?: { reasoning_tokens?: number | null } | null;
      }
    | null
    | undefined,
): IRUsage {
  return {
    inputTokens: usage?.prompt_tokens ?? 0,
    outputTokens: usage?.completion_tokens ?? 0,
    cachedInputTokens: usage?.prompt_tokens_details?.cached_tokens ?? 0,
    reasoningTokens: usage?.completion_tokens_details?.reasoning_tokens ?? 0,
  };
}
