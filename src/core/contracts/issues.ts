/** Readable zod errors: every issue as `path: message`, with an unknown key's own name on its path. */
import type { z } from 'zod';

/** One zod issue as a path (under the caller's prefix) and its message. */
export interface IssueAt {
  path: string;
  message: string;
}

/**
 * Every issue of a zod error as `{path, message}`, paths under `prefix` when given (`agent.settings` + `x.y` →
 * `agent.settings.x.y`; the root itself is the prefix, else `(root)`). Unknown keys (`unrecognized_keys`) are listed
 * one per key with the key on the path (`agent.harnes: unknown key`), so a typo at any depth is named where it is; a
 * record key that fails its schema gets that schema's message (`agent.settings.env.A-B: must be an environment …`).
 */
export function issueList(error: z.ZodError, prefix = ''): IssueAt[] {
  const out: IssueAt[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) out.push({ path: pathText([...issue.path, key], prefix), message: 'unknown key' });
    } else if (issue.code === 'invalid_union' && issue.errors.length > 0) {
      // The alternative that got furthest says the most (e.g. a prepare action with a bad dest).
      const best = issue.errors.reduce((a, b) => (deepest(b) > deepest(a) ? b : a));
      const nested = best.map((i) => ({ ...i, path: [...issue.path, ...i.path] }));
      out.push(...issueList({ issues: nested } as unknown as z.ZodError, prefix));
    } else if (issue.code === 'invalid_key' && issue.issues.length > 0) {
      // A record key that fails its own schema: zod nests the key's issues (the path already ends with the key).
      out.push({ path: pathText(issue.path, prefix), message: issue.issues.map((i) => i.message).join(', ') });
    } else out.push({ path: pathText(issue.path, prefix), message: issue.message });
  }
  return out;
}

/** `a.b: message; c[0].d: unknown key` from a zod error (issueList as text), paths under `prefix` when given. */
export function formatIssues(error: z.ZodError, prefix = ''): string {
  return issueList(error, prefix).map((i) => `${i.path}: ${i.message}`).join('; ');
}

function deepest(issues: readonly z.core.$ZodIssue[]): number {
  return Math.max(0, ...issues.map((i) => i.path.length + (i.code === 'unrecognized_keys' ? 1 : 0)));
}

/** `prepare[0].upload_file.dest`: array indexes in brackets, keys joined by dots, under `prefix`. */
function pathText(path: readonly PropertyKey[], prefix = ''): string {
  if (path.length === 0) return prefix || '(root)';
  return path.reduce<string>((out, key) => (typeof key === 'number' ? `${out}[${key}]` : out ? `${out}.${String(key)}` : String(key)), prefix);
}

/** Parse `value` with `schema`; throws Error `invalid <what>: <issues>` (callers map it to HTTP 400). */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new Error(`invalid ${what}: ${formatIssues(parsed.error)}`);
  return parsed.data;
}
