/**
 * Token counts of a context-overflow error, read from the engine's message so each dialect can render its provider's
 * own overflow error (Anthropic "prompt is too long: N tokens > M maximum", OpenAI `context_length_exceeded`).
 */
import type { GatewayError } from '../../core/errors.ts';

export interface OverflowCounts {
  /** Prompt length the engine measured, in tokens. */
  promptTokens: number;
  /** The engine's context window, in tokens. */
  maxTokens: number;
}

// Engine wordings seen in public code: vLLM serving_engine.py, SGLang tokenizer_manager.py, Anthropic, OpenAI.
const patterns: ReadonlyArray<{ re: RegExp; prompt: number; max: number }> = [
  { re: /(\d+)\s*tokens?\s*>\s*(\d+)\s*maximum/i, prompt: 1, max: 2 }, // Anthropic
  { re: /maximum context length is (\d+) tokens?[^]*?(?:request has|requested|resulted in) (\d+)/i, prompt: 2, max: 1 }, // vLLM, OpenAI
  { re: /input \((\d+) tokens?\) is longer than the model's context length \((\d+) tokens?\)/i, prompt: 1, max: 2 }, // SGLang
];

/** The counts in `error.message` or its upstream body, or null when no known wording matches. */
export function contextOverflowCounts(error: GatewayError): OverflowCounts | null {
  for (const text of [error.message, error.details.upstream?.body ?? '']) {
    for (const { re, prompt, max } of patterns) {
      const match = re.exec(text);
      if (match) return { promptTokens: Number(match[prompt]), maxTokens: Number(match[max]) };
    }
  }
  return null;
}
