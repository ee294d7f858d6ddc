/**
 * The Python Polar's SSE events on our hub (src/rollout/reference-api.ts publishReferenceEvents): translated only while
 * someone listens, and the task's completed count comes from a count of its results, not from decoding them.
 */
import { expect, test } from 'bun:test';
import type { SessionResult } from '../../src/core/records.ts';
import { EventHub } from '../../src/observe/events.ts';
import { publishReferenceEvents } from '../../src/rollout/reference-api.ts';
import { openStore } from '../../src/store/index.ts';
import { taskRequest } from '../support/tasks.ts';

function result(sessionId: string): SessionResult {
  return {
    session_id: sessionId, task_id: 't', status: 'COMPLETED', node_id: 'n', error: null, attempt: 0,
    trajectory: { status: 'COMPLETED', traces: [], metadata: { reconstruction_stats: { completions: 0, chains: 0, merged: 0, breaks: {} }, evaluation: null, training_filter: { trainable: true, reasons: [] } } },
    timing: { init_ms: 0, ready_queue_ms: 0, run_ms: 0, postrun_ms: 0, build_ms: 0, eval_ms: 0, e2e_ms: 0 },
  };
}

test('reference events are translated only while a subscriber listens, with the completed count of the task', () => {
  const store = openStore(':memory:');
  store.tasks.upsert(taskRequest('t', { num_samples: 3 }), 'RUNNING');
  store.results.put(result('a'));
  store.results.put(result('b'));
  const hub = new EventHub();
  publishReferenceEvents(hub, store);
  let reads = 0;
  const get = store.tasks.get.bind(store.tasks);
  store.tasks.get = (id: string) => {
    reads++;
    return get(id);
  };

  // Nobody listens: no store read for any event.
  hub.publish('session_result', { task_id: 't', session_id: 'b', status: 'COMPLETED' });
  hub.publish('session_dispatched', { task_id: 't', session_id: 'c', node_id: 'n', attempt: 0 });
  expect(reads).toBe(0);

  const seen: [string, unknown][] = [];
  hub.subscribe((e) => seen.push([e.type, e.data]));
  hub.publish('session_dispatched', { task_id: 't', session_id: 'c', node_id: 'n', attempt: 0 });
  expect(reads).toBe(0); // its payload needs nothing of the task
  hub.publish('session_result', { task_id: 't', session_id: 'b', status: 'COMPLETED' });
  expect(reads).toBe(1);
  expect(seen.filter(([type]) => type.includes('.'))).toEqual([
    ['session.state_changed', { task_id: 't', session_id: 'c', status: 'INITIALIZING' }],
    ['session.state_changed', { task_id: 't', session_id: 'b', status: 'COMPLETED' }],
    ['task.updated', { task_id: 't', completed_sessions: 2, total_sessions: 3 }],
  ]);
  expect(store.results.countByTask('t')).toBe(2);
  expect(store.results.countByTask('other')).toBe(0);
  store.close();
});
