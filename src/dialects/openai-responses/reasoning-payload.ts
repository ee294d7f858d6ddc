/**
 * Our opaque `encrypted_content` for reasoning items. Clients such as Codex ask for
 * `include: ["reasoning.encrypted_content"]` and replay the reasoning item verbatim on the next turn; we need the
 * reasoning text back to re-render the prompt the model actually saw.
 *
 * Format (version 1): base64url (RFC 4648 §5, no padding) of the UTF-8 JSON `{"v":1,"text":"<reasoning>"}`, plus
 * `"sig":"<signature>"` when the engine produced a reasoning signature. It is not encrypted (nothing secret: the text is
 * the model's own output) and not authenticated. A payload that does not decode to that shape (e.g. a real OpenAI
 * Fernet token) is "foreign": the decoder returns null and the caller drops the reasoning with a warning.
 * Source: https://platform.openai.com/docs/guides/reasoning#encrypted-reasoning-items (the field is opaque to clients).
 */
import type { IRReasoning } from '../../core/ir.ts';

/** Current payload version. */
export const REASONING_PAYLOAD_VERSION = 1;

/** IR reasoning → `encrypted_content` string. */
export function encodeReasoningPayload(reasoning: IRReasoning): string {
  const payload: { v: number; text: string; sig?: string } = { v: REASONING_PAYLOAD_VERSION, text: reasoning.text };
  if (reasoning.signature) payload.sig = reasoning.signature;
  return Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url');
}

/**
 * `encrypted_content` → IR reasoning, or null when the payload is not ours (foreign or corrupt). Never throws.
 * The returned `signature` is the engine's original signature (absent when it had none), not the payload itself.
 */
export function decodeReasoningPayload(encrypted: string): IRReasoning | null {
  if (!/^[A-Za-z0-9_-]+$/.test(encrypted)) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(encrypted, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null) return null;
  const { v, text, sig } = parsed as Record<string, unknown>;
  if (v !== REASONING_PAYLOAD_VERSION || typeof text !== 'string') return null;
  return typeof sig === 'string' ? { text, signature: sig } : { text };
}
