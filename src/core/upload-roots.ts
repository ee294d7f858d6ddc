/**
 * Where a TaskRequest's prepare uploads may read from. An `upload_file`/`upload_dir` `src` is a path on the gateway's
 * host named by whoever submitted the task, so it must lie inside an allowed root: the task's own directory (for a
 * task loaded from a file) or a configured `gateway.upload_roots` entry. Paths are compared after resolving symlinks,
 * so a link inside a root that points outside it is refused too.
 */
import { realpathSync } from 'node:fs';
import { isAbsolute, relative, resolve, sep } from 'node:path';

/** One prepare action as far as uploads are concerned (the wire shape carries more). */
type PrepareLike = Record<string, unknown>;

function real(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return resolve(p);
  }
}

function inside(root: string, p: string): boolean {
  const rel = relative(root, p);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

/**
 * The problems of a task's upload sources against `roots` (absolute directories), each naming the JSON path of the
 * offending `src`; empty when all are allowed.
 * @param prepare the task's `runtime.prepare` list (undefined = none).
 */
export function uploadSourceProblems(prepare: readonly PrepareLike[] | undefined, roots: readonly string[]): string[] {
  const problems: string[] = [];
  const realRoots = roots.map(real);
  (prepare ?? []).forEach((action, index) => {
    for (const kind of ['upload_file', 'upload_dir'] as const) {
      const spec = action[kind] as { src?: unknown } | undefined;
      if (!spec || typeof spec.src !== 'string') continue;
      const path = `runtime.prepare[${index}].${kind}.src`;
      if (!isAbsolute(spec.src)) {
        problems.push(`${path}: ${JSON.stringify(spec.src)} must be absolute here (task files resolve relative paths against their directory)`);
        continue;
      }
      const target = real(spec.src);
      if (!realRoots.some((root) => inside(root, target))) {
        const allowed = realRoots.length > 0 ? realRoots.join(', ') : 'none configured (set gateway.upload_roots)';
        problems.push(`${path}: ${spec.src} is outside the allowed upload roots (${allowed})`);
      }
    }
  });
  return problems;
}

/**
 * The same rule for host directories an evaluator reads (the `harbor` evaluator's `tests_dir`, whose files are copied
 * into the sandbox): they must lie inside `roots`. Each problem names the JSON path; empty when allowed or not used.
 * @param evaluator the task's `evaluator` section (undefined = none).
 */
export function evaluatorSourceProblems(evaluator: { strategy?: unknown; config?: unknown } | undefined, roots: readonly string[]): string[] {
  const config = evaluator?.config as { tests_dir?: unknown } | undefined;
  if (evaluator?.strategy !== 'harbor' || typeof config?.tests_dir !== 'string') return [];
  const dir = config.tests_dir;
  if (!isAbsolute(dir)) return [`evaluator.config.tests_dir: ${JSON.stringify(dir)} must be absolute here`];
  const realRoots = roots.map(real);
  if (realRoots.some((root) => inside(root, real(dir)))) return [];
  const allowed = realRoots.length > 0 ? realRoots.join(', ') : 'none configured (set gateway.upload_roots)';
  return [`evaluator.config.tests_dir: ${dir} is outside the allowed upload roots (${allowed})`];
}
