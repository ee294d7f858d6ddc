/** Readable zod errors: every issue as `path: message`, with an unknown key's own name on its path. */
import type { z } from 'zod';

/**
 * `a.b: message; c[0].d: unknown key` from a zod error. Unknown keys (`unrecognized_keys`) are listed one per key with
 * the key on the path (`agent.harnes: unknown key`), so a typo at any depth is named where it is.
 */
export function formatIssues(error: z.ZodError): string {
  const parts: string[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) parts.push(`${pathText([...issue.path, key])}: unknown key`);
    } else if (issue.code === 'invalid_union' && issue.errors.length > 0) {
      // The alternative that got furthest says the most (e.g. a prepare action with a bad dest).
      const best = issue.errors.reduce((a, b) => (deepest(b) > deepest(a) ? b : a));
      const nested = best.map((i) => ({ ...i, path: [...issue.path, ...i.path] }));
      parts.push(formatIssues({ issues: nested } as unknown as z.ZodError));
    } else parts.push(`${pathText(issue.path)}: ${issue.message}`);
  }
  return parts.join('; ');
}

function deepest(issues: readonly z.core.$ZodIssue[]): number {
  return Math.max(0, ...issues.map((i) => i.path.length + (i.code === 'unrecognized_keys' ? 1 : 0)));
}

/** `prepare[0].upload_file.dest`: array indexes in brackets, keys joined by dots. */
function pathText(path: readonly PropertyKey[]): string {
  if (path.length === 0) return '(root)';
  return path.reduce<string>((out, key) => (typeof key === 'number' ? `${out}[${key}]` : out ? `${out}.${String(key)}` : String(key)), '');
}

/** Parse `value` with `schema`; throws Error `invalid <what>: <issues>` (callers map it to HTTP 400). */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new Error(`invalid ${what}: ${formatIssues(parsed.error)}`);
  return parsed.data;
}
