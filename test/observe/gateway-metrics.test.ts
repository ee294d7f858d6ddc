/** GatewayMetrics.observeResult (src/observe/gateway-metrics.ts): cancellations are never harness failures. */
import { expect, test } from 'bun:test';
import type { SessionResult } from '../../src/core/records.ts';
import { cancelledText, isCancelledError } from '../../src/core/contracts/index.ts';
import { GatewayMetrics } from '../../src/observe/gateway-metrics.ts';
import { isInfrastructureFailure } from '../../src/rollout/run-retries.ts';

function result(status: SessionResult['status'], error: string | null): SessionResult {
  return {
    session_id: 's', task_id: 't', status, error, node_id: 'n',
    trajectory: { status: status === 'CANCELLED' ? 'ERROR' : status, traces: [], metadata: {} },
    timing: { init_ms: 1, ready_queue_ms: 1, run_ms: 1, postrun_ms: 1, build_ms: 1, eval_ms: 1, e2e_ms: 5 },
  } as unknown as SessionResult;
}

test('a session the server cancelled (with or without a reason) is not a harness failure, nor retried; a real error is', async () => {
  const metrics = new GatewayMetrics({ stageCounts: () => ({ queued: 0, init: 0, ready: 0, running: 0, postrun: 0 }), capacity: { init_workers: 1, ready_buffer: 1, max_run_workers: 1, postrun_workers: 1 } });
  for (const error of [cancelledText(undefined), cancelledText('by request'), cancelledText('early stop: 2 usable session(s)')]) {
    expect(isCancelledError(error)).toBe(true);
    metrics.observeResult(result('ERROR', error), 'shell');
    expect(isInfrastructureFailure({ status: 'ERROR', error })).toBe(false);
  }
  const failures = async () => (await metrics.harnessFailures.get()).values.reduce((sum, v) => sum + v.value, 0);
  expect(await failures()).toBe(0);
  expect(isCancelledError('cancelledness is not a word')).toBe(false);
  metrics.observeResult(result('ERROR', 'harness shell failed: exit 3'), 'shell');
  expect(await failures()).toBe(1);
});
