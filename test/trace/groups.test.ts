/** isUsable (src/trace/groups.ts): which finished sessions enter a task's group. */
import { expect, test } from 'bun:test';
import type { SessionResult, Trace, TrajectoryStatus } from '../../src/core/records.ts';
import { isUsable } from '../../src/trace/groups.ts';

const trace: Trace = {
  prompt_ids: [1, 2], response_ids: [3, 151645], loss_mask: [1, 1], response_logprobs: [-0.1, -0.2], prompt_messages: [], response_messages: [], tools: [],
  finish_reason: { unified: 'stop', raw: 'stop' }, reward: 0, metadata: {} as Trace['metadata'],
};

function result(status: TrajectoryStatus, traces: Trace[], trainable: boolean): SessionResult {
  return {
    session_id: 's', task_id: 't', status,
    trajectory: { status, traces, metadata: { training_filter: { trainable, reasons: status === 'TIMEOUT' ? ['agent_timeout'] : [] } } },
    timing: { init_ms: 0, ready_queue_ms: 0, run_ms: 0, postrun_ms: 0, build_ms: 0, eval_ms: 0, e2e_ms: 0 }, node_id: 'n', error: null,
  } as SessionResult;
}

test('COMPLETED is usable; an agent-budget TIMEOUT only with a trace; a total-budget TIMEOUT and ERROR never', () => {
  expect(isUsable(result('COMPLETED', [trace], true))).toBe(true);
  expect(isUsable(result('TIMEOUT', [trace], true))).toBe(true);
  // Ran out of its agent budget before any completion came back: nothing the policy sampled, so not a sample.
  expect(isUsable(result('TIMEOUT', [], true))).toBe(false);
  expect(isUsable(result('TIMEOUT', [trace], false))).toBe(false);
  expect(isUsable(result('ERROR', [trace], false))).toBe(false);
});
