/**
 * Anthropic usage ↔ IR usage. Anthropic's `input_tokens` EXCLUDES cached tokens (total prompt = input_tokens +
 * cache_read_input_tokens + cache_creation_input_tokens), while IR `inputTokens` is the whole prompt, as in OpenAI.
 * Source: https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching#tracking-cache-performance
 */
import type { IRUsage } from '../../core/ir.ts';

/** Anthropic `usage` object, in tokens. */
export interface AnthropicUsage {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens: number;
  cache_creation_input_tokens: number;
}

/** IR usage → wire usage: the engine's prefix-cache hits are reported as `cache_read_input_tokens`. */
export function encodeUsage(usage: IRUsage): AnthropicUsage {
  const cached = Math.min(usage.cachedInputTokens, usage.inputTokens);
  return {
    input_tokens: usage.inputTokens - cached,
    output_tokens: usage.outputTokens,
    cache_read_input_tokens: cached,
    cache_creation_input_tokens: 0,
  };
}

/** Wire usage (fields may be missing or null) → IR usage; reasoning tokens are not reported by Anthropic (0). */
export function decodeUsage(usage: Partial<Record<keyof AnthropicUsage, number | null>> | null | undefined): IRUsage {
  const read = usage?.cache_read_input_tokens ?? 0;
  const created = usage?.cache_creation_input_tokens ?? 0;
  return {
    inputTokens: (usage?.input_tokens ?? 0) + read + created,
    outputTokens: usage?.output_tokens ?? 0,
    cachedInputTokens: read,
    reasoningTokens: 0,
  };
}
