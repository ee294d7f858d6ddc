/**
 * Opaque reasoning signatures. Claude Code discards a thinking block whose stream carries no non-empty `signature_delta`
 * (docs/protocol-notes.md#anthropic-messages), and local engines produce none, so the proxy mints one. It is deterministic in the reasoning text
 * (same text → same signature, so replays and snapshots are stable) and carries no secret.
 */

/** Prefix of every signature minted by Polar (`polar1.` + 16 hex digits). */
export const MINTED_SIGNATURE_PREFIX = 'polar1.';

/**
 * A deterministic opaque signature for `text`: `polar1.<64-bit FNV-1a of the UTF-16 code units, hex>`.
 * Not a MAC: it only satisfies clients that require a non-empty signature.
 */
export function mintReasoningSignature(text: string): string {
  // FNV-1a 64-bit over UTF-16 code units, in BigInt-free 32-bit halves for speed.
  let h1 = 0x811c9dc5;
  let h2 = 0xcbf29ce4;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 0x01000193) >>> 0;
    h2 = Math.imul(h2 ^ ((c + i) & 0xffff), 0x01000193) >>> 0;
  }
  return `${MINTED_SIGNATURE_PREFIX}${h2.toString(16).padStart(8, '0')}${h1.toString(16).padStart(8, '0')}`;
}
