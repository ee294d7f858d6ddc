/** `polar submit --wait`'s summary (src/cli/submit.ts taskSummary) of a finished TaskStatus. */
import { expect, test } from 'bun:test';
import { taskSummary } from '../../src/cli/submit.ts';

test('rewards come from metadata.reward (a session with no traces still counts), else from the last trace (a reference server)', () => {
  const ours = taskSummary({
    task_id: 't', status: 'completed',
    results: [
      { status: 'COMPLETED', metadata: { reward: 1 }, trajectory: { traces: [] } },
      { status: 'COMPLETED', metadata: { reward: 0 }, trajectory: { traces: [{ reward: 0 }] } },
      { status: 'COMPLETED', metadata: { reward: 1 }, trajectory: { traces: [{ reward: 0.5 }, { reward: 1 }] } },
    ],
  });
  expect(ours).toContain('Completed sessions: 3/3');
  expect(ours).toContain('Reward=1.0 sessions: 2');
  expect(ours).toContain('Mean reward: 0.667');
  const cancelled = taskSummary({ task_id: 't', status: 'cancelled', results: [
    { status: 'COMPLETED', metadata: { reward: 1 } },
    { status: 'ERROR', error: 'cancelled: by request', metadata: { reward: 0, polar_status: 'CANCELLED' } },
  ] });
  expect(cancelled).toContain('Mean reward: 1.000');
  const reference = taskSummary({ task_id: 't', status: 'completed', results: [{ status: 'COMPLETED', trajectory: { traces: [{ reward: 0 }, { reward: 1 }] } }, { status: 'ERROR', trajectory: { traces: [] } }] });
  expect(reference).toContain('Reward=1.0 sessions: 1');
  expect(reference).toContain('Mean reward: 1.000');
});
