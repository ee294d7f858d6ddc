/**
 * Wire validation shared by the dialects: zod failures become one clear `invalid-request` GatewayError, and fields a
 * schema does not know become warnings instead of errors (real clients send extras, e.g. `store`, `anthropic-beta` fields).
 */
import type { z } from 'zod';
import { GatewayError } from '../../core/errors.ts';
import type { Warning } from '../../core/ir.ts';

/**
 * Parse `value` with `schema` or throw.
 * @param where prefix for the error message and `param`, e.g. `messages[2].content[0]` (empty for the body itself).
 * @throws GatewayError('invalid-request') naming the first failing path, its problem, and `details.param` = that path.
 */
export function parseWire<S extends z.ZodType>(schema: S, value: unknown, where = ''): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const path = joinPath(where, issue?.path ?? []);
  const message = `${path || 'request body'}: ${issue?.message ?? 'invalid value'}`;
  throw new GatewayError('invalid-request', message, { param: path || undefined, cause: result.error });
}

/** Render a zod issue path as `a.b[0].c`. */
export function joinPath(prefix: string, path: readonly PropertyKey[]): string {
  let out = prefix;
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out ? `.${String(key)}` : String(key);
  }
  return out;
}

/**
 * One `unknown-field` warning per key of `body` that is not in `known` (never an error: clients add fields over time).
 * @param where location prefix for the message, e.g. `request` or `tools[1]`.
 */
export function unknownFieldWarnings(body: Record<string, unknown>, known: ReadonlySet<string>, where: string): Warning[] {
  const warnings: Warning[] = [];
  for (const key of Object.keys(body)) {
    if (!known.has(key)) warnings.push({ code: 'unknown-field', message: `${where}.${key} is not supported and was ignored` });
  }
  return warnings;
}

/** True for a plain JSON object (not an array, not null). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
