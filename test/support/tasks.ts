/**
 * The TaskRequest factory for tests: a small valid task whose fields a test overrides where it matters.
 * Shape: docs/architecture.md#data-model (TaskRequest).
 */
import type { TaskRequest } from '../../src/core/records.ts';

/**
 * A valid TaskRequest named `taskId`: one sample, 60 s, a shell agent that runs `true`, the `prefix_merging` builder.
 * `overrides` replace whole top-level fields (shallow); pass `Record<string, unknown>` casts to build invalid tasks.
 */
export function taskRequest(taskId = 'task', overrides: Partial<TaskRequest> = {}): TaskRequest {
  return {
    task_id: taskId,
    instruction: 'fix the bug',
    num_samples: 1,
    timeout_seconds: 60,
    agent: { harness: 'shell', command: 'true {{INSTRUCTION}}', model_name: 'sim' },
    builder: { strategy: 'prefix_merging' },
    ...overrides,
  };
}
