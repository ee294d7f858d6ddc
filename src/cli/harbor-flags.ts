/** `--task-runtime` of `polar run` and `polar submit`, and the notes a loaded task carries (what its runtime skips). */
import type { HarborRuntimeKind } from '../rollout/harbor-task.ts';
import type { LoadedTask } from '../rollout/task-file.ts';
import { UsageError } from './common.ts';

export const HARBOR_RUNTIMES: readonly HarborRuntimeKind[] = ['local', 'docker', 'podman'];

/** The flag's value as a runtime kind. @throws UsageError naming the flag and the kinds. */
export function parseHarborRuntime(value: string, flag = '--task-runtime'): HarborRuntimeKind {
  if (!(HARBOR_RUNTIMES as readonly string[]).includes(value)) throw new UsageError(`${flag} must be one of ${HARBOR_RUNTIMES.join(', ')}, got ${JSON.stringify(value)}`);
  return value as HarborRuntimeKind;
}

/** One line per task with notes: `task <id>: <note>` (e.g. Dockerfile steps the local runtime did not run). */
export function printTaskNotes(tasks: readonly LoadedTask[], log: (line: string) => void): void {
  for (const t of tasks) for (const note of t.notes ?? []) log(`task ${t.task.task_id}: ${note}`);
}
