/**
 * Path confinement for what a TaskRequest may write into a sandbox. A prepare action's `dest` comes from whoever
 * submitted the task, so it must stay inside the session's work directory: relative, and no `..` escape after
 * normalisation (the same rule for every runtime, relative to that runtime's own work directory). Pure string logic,
 * so the rollout server checks it at submit and the gateway at dispatch with the same rule.
 */
import { posix } from 'node:path';

/**
 * Normalise a prepare-action `dest` and check that it stays inside the work directory.
 * @param dest the path as the task gave it, e.g. `.`, `src/app.py`, `repo/`.
 * @returns the normalised relative POSIX path (`.` for the work directory itself).
 * @throws Error when `dest` is empty, holds a NUL byte, is absolute, or escapes with `..` after normalisation.
 */
export function confineDest(dest: string): string {
  if (dest === '') throw new Error('dest must not be empty');
  if (dest.includes('\0')) throw new Error(`dest ${JSON.stringify(dest)} holds a NUL byte`);
  if (posix.isAbsolute(dest) || /^[A-Za-z]:[\\/]/.test(dest) || dest.startsWith('\\')) {
    throw new Error(`dest ${JSON.stringify(dest)} is absolute; give a path relative to the session work directory`);
  }
  const normalised = posix.normalize(dest.replaceAll('\\', '/'));
  if (normalised === '..' || normalised.startsWith('../')) {
    throw new Error(`dest ${JSON.stringify(dest)} leaves the session work directory`);
  }
  return normalised.replace(/\/+$/, '') || '.';
}

/** Why `dest` is not a confined path, or null when it is (for zod refinements). */
export function destProblem(dest: string): string | null {
  try {
    confineDest(dest);
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}
