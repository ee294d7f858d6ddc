/**
 * `polar run --max-retries N`: sessions that ended in ERROR for an infrastructure reason (INIT, runtime, evaluator or
 * build failures: status ERROR and not cancelled) are run again, up to N more rounds. A policy failure never is: a
 * COMPLETED session with reward 0, a harness that reported failure, or a TIMEOUT (the agent ran out of budget).
 * A retry is a new TaskRequest `<task_id>~retry<k>` with num_samples = the failed sessions, in the same GRPO group
 * (`metadata.group_id` = the original group), so trainers see one group per task.
 */
import { isCancelledError } from '../core/contracts/index.ts';
import type { TaskRequest } from '../core/records.ts';
import type { Store } from '../store/index.ts';

/** True when a stored result failed for an infrastructure reason (the only failures a retry may repeat). */
export function isInfrastructureFailure(result: { status: string; error: string | null }): boolean {
  return result.status === 'ERROR' && !isCancelledError(result.error);
}

/**
 * The retry round `round` (1-based) for `requests` (the previous round's TaskRequests): one request per task that had
 * infrastructure failures, for that many sessions; [] when none failed.
 */
export function retryRequests(store: Store, requests: readonly TaskRequest[], round: number): TaskRequest[] {
  const out: TaskRequest[] = [];
  for (const request of requests) {
    let failed = 0;
    for (const s of store.sessions.listByTask(request.task_id)) {
      const result = store.results.get(s.session_id);
      if (result && isInfrastructureFailure(result)) failed++;
    }
    if (failed === 0) continue;
    const base = request.task_id.replace(/~retry\d+$/, '');
    out.push({
      ...request,
      task_id: `${base}~retry${round}`,
      num_samples: failed,
      metadata: { ...request.metadata, group_id: request.metadata?.group_id ?? base, retry_of: request.task_id },
    });
  }
  return out;
}
