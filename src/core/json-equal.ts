/**
 * Structural equality of JSON values, as `JSON.stringify` would see them: used where a session's next call is compared
 * with its previous one to reuse what was already serialised (store/ir-json.ts, engines/body-memo.ts).
 * Source: https://tc39.es/ecma262/#sec-json.stringify
 */
/**
 * Whether two JSON values serialise to the same text: the same primitives, arrays of equal elements, objects with the
 * same keys in the same order and equal values. Conservative: anything JSON.stringify would change (undefined,
 * NaN, functions) makes values unequal unless they are the same reference.
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  // The same value: equal unless it is ±Infinity (NaN never gets here). Compared without `typeof`, which reads the
  // object: a likely cache miss per element when a long array of shared objects is compared in a busy proxy.
  if (a === b) return a !== Infinity && a !== -Infinity;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  for (let i = 0; i < ka.length; i++) {
    const key = ka[i]!;
    if (key !== kb[i]) return false;
    const va = (a as Record<string, unknown>)[key];
    if (va === undefined || !jsonEqual(va, (b as Record<string, unknown>)[key])) return false;
  }
  // toJSON would make the text differ from the fields compared here
  return typeof (a as { toJSON?: unknown }).toJSON !== 'function' && typeof (b as { toJSON?: unknown }).toJSON !== 'function';
}
