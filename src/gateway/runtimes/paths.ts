/**
 * Path confinement for what a TaskRequest may write into a sandbox. A prepare action's `dest` comes from whoever
 * submitted the task, so it must stay inside the session's work directory: relative, and no `..` escape after
 * normalisation (the same rule for every runtime, relative to that runtime's own work directory). The local runtime
 * additionally checks the host paths it writes against symlinks that lead out of the session directory.
 * The string rule lives in src/core/contracts/paths.ts (the rollout server checks it at submit too).
 */
import { lstatSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, join, relative, sep } from 'node:path';

export { confineDest, destProblem } from '../../core/contracts/paths.ts';

/** True when host path `p` is `root` or below it (both already absolute and normalised). */
export function isInside(root: string, p: string): boolean {
  const rel = relative(root, p);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !rel.startsWith(sep));
}

/** The real path of `p`, or of its deepest existing ancestor when `p` does not exist yet; null for a dangling symlink. */
function realpathOfExisting(p: string): string | null {
  let cur = p;
  const rest: string[] = [];
  for (;;) {
    let exists = true;
    try {
      lstatSync(cur);
    } catch {
      exists = false;
    }
    if (exists) {
      try {
        return join(realpathSync(cur), ...rest.reverse());
      } catch {
        return null; // a dangling symlink: where a write would land cannot be checked
      }
    }
    const parent = dirname(cur);
    if (parent === cur) return p;
    rest.push(basename(cur));
    cur = parent;
  }
}

function lexists(p: string): boolean {
  try {
    lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

/**
 * Check that writing `src` (a host file or directory, or null for a plain file write) to host path `dest` lands inside
 * `root`: `dest` itself and, for a directory copy, every entry the copy would overwrite must resolve (symlinks
 * followed) inside the real path of `root`.
 * @throws Error naming the offending path.
 */
export function assertWriteInside(root: string, dest: string, src: string | null = null): void {
  const realRoot = realpathSync(root);
  const check = (p: string) => {
    const real = realpathOfExisting(p);
    if (real === null || !isInside(realRoot, real)) {
      throw new Error(`${p} resolves outside the session directory ${root} (symlink?)`);
    }
  };
  if (!isInside(root, dest)) throw new Error(`${dest} is outside the session directory ${root}`);
  check(dest);
  if (src === null || !statSync(src).isDirectory() || !lexists(dest)) return;
  const walk = (from: string, to: string) => {
    for (const name of readdirSync(from)) {
      const target = join(to, name);
      if (!lexists(target)) continue;
      check(target);
      const source = join(from, name);
      if (lstatSync(source).isDirectory() && statSync(target).isDirectory()) walk(source, target);
    }
  };
  walk(src, dest);
}
