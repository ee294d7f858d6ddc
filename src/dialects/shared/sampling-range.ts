/**
 * Sampling values outside the range a provider documents: a warning (`out-of-range`, in `x-polar-warnings` and the
 * record's warnings), and the value goes to the engine as sent. The real API would have answered 400; an engine
 * samples with what it can (vLLM and SGLang take any temperature ≥ 0) and refuses the rest itself, which comes back
 * in the caller's error shape. So a hand-written client learns that its request would not work against the provider,
 * and a run that wants such a value on purpose still gets it.
 * Sources: https://docs.anthropic.com/en/api/messages (temperature and top_p 0–1),
 * https://platform.openai.com/docs/api-reference/chat/create (temperature 0–2, top_p 0–1, penalties −2–2),
 * https://platform.openai.com/docs/api-reference/responses/create (temperature 0–2, top_p 0–1),
 * https://ai.google.dev/api/generate-content#generationconfig (temperature 0–2, topP 0–1).
 */
import type { Warning } from '../../core/ir.ts';

/** One field's documented range, inclusive at both ends. */
export interface DocumentedRange {
  /** The field's path in the request, as the caller wrote it (e.g. `generationConfig.topP`). */
  field: string;
  min: number;
  max: number;
}

/**
 * One `out-of-range` warning per value outside its range (values that are absent or not numbers are skipped: the
 * schemas have checked the types already).
 * @param values the request's values by field path.
 * @param api the provider API's name, for the message (e.g. `Anthropic Messages`).
 */
export function outOfRangeWarnings(values: Readonly<Record<string, unknown>>, ranges: readonly DocumentedRange[], api: string): Warning[] {
  const warnings: Warning[] = [];
  for (const { field, min, max } of ranges) {
    const value = values[field];
    if (typeof value !== 'number' || (value >= min && value <= max)) continue;
    warnings.push({ code: 'out-of-range', message: `${field} ${value} is outside the ${api} API's documented range ${min} to ${max}; it was sent to the engine as is` });
  }
  return warnings;
}
