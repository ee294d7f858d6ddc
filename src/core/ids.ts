/** Id generation, injectable so snapshots are stable in tests. */
export type IdGenerator = (prefix: string) => string;

/** Random ids: `<prefix>_<24 hex chars>` (96 bits from crypto.getRandomValues). */
export const randomId: IdGenerator = (prefix) => {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return `${prefix}_${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
};

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
