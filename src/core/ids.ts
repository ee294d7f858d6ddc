/** Id generation, injectable so snapshots are stable in tests. */
export type IdGenerator = (prefix: string) => string;

/** `bytes` random bytes as lowercase hex (2 chars each; crypto.getRandomValues, encoded natively). */
function randomHex(bytes: number): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString('hex');
}

/** Random ids: `<prefix>_<24 hex chars>` (96 bits from crypto.getRandomValues). */
export const randomId: IdGenerator = (prefix) => `${prefix}_${randomHex(12)}`;

/**
 * Time-ordered ids: `<prefix>_<12 hex: ms since the epoch><12 hex: 48 random bits>`, 24 hex chars as `randomId` (the
 * layout of a UUIDv7's first 96 bits, https://www.rfc-editor.org/rfc/rfc9562#section-5.7). An id minted in a later
 * millisecond sorts after an earlier one, so a B-tree keyed on them (the store's completions primary key) takes each
 * insert at its rightmost leaf instead of a random page: a group commit of 32 small records writes a third less WAL
 * (bench/store-keys.ts). Not secrets: 48 random bits keep ids of the same millisecond apart, not unguessable.
 */
export const timeOrderedId: IdGenerator = (prefix) => `${prefix}_${Date.now().toString(16).padStart(12, '0')}${randomHex(6)}`;

/** A session secret: 32 random bytes as base64url (43 chars); also the harness's API key, so never guessable. */
export function newSessionSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return `ps_${Buffer.from(bytes).toString('base64url')}`;
}

/** Deterministic ids for tests: `<prefix>_<n>` counting from 1. */
export function sequentialIds(): IdGenerator {
  let n = 0;
  return (prefix) => `${prefix}_${++n}`;
}
