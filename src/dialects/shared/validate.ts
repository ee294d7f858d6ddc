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
  const first = result.error.issues[0];
  const issue = first === undefined ? undefined : deepestIssue(first);
  const path = joinPath(where, issue?.path ?? []);
  const message = `${path || 'request body'}: ${issue?.message ?? 'invalid value'}`;
  throw new GatewayError('invalid-request', message, { param: path || undefined, cause: result.error });
}

/** The parts of a zod issue read here (a union's `errors` hold each branch's issues, paths relative to the union). */
interface WireIssue {
  code?: string;
  path: readonly PropertyKey[];
  message: string;
  errors?: readonly (readonly WireIssue[])[];
}

/**
 * A union's failure as the branch that got furthest into the value, so `content: "x" | [parts]` with a bad part names
 * `content[0].text` rather than "Invalid input" at `content`; a union no branch got into, or two got equally far
 * into, stays as it is.
 */
function deepestIssue(issue: WireIssue): { path: readonly PropertyKey[]; message: string } {
  if (issue.code === 'invalid_union' && Array.isArray(issue.errors)) {
    let best: { path: readonly PropertyKey[]; message: string } | null = null;
    let tie = false;
    for (const branch of issue.errors) {
      const inner = branch[0] === undefined ? null : deepestIssue(branch[0]);
      if (inner === null || inner.path.length === 0) continue;
      if (best !== null && inner.path.length === best.path.length) tie = true;
      else if (best === null || inner.path.length > best.path.length) (best = inner), (tie = false);
    }
    // Two branches that got equally far (e.g. `{type: "url", url: 5}` against the base64 and url image sources) cannot
    // say which one was meant: the union's own message stays.
    if (best !== null && !tie) return { path: [...issue.path, ...best.path], message: best.message };
  }
  return { path: issue.path, message: issue.message };
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
