/**
 * Our records in the Python Polar's response shapes (ProRL-Agent-Server src/polar/rollout/models.py,
 * trajectory/models.py): value types the reference's pydantic models accept, our extras only as additional keys and
 * never inside `timing`.
 */
import { expect, test } from 'bun:test';
import type { SessionResult, TaskRequest, Trace } from '../../src/core/records.ts';
import { referenceEvents, referenceNodeInfo, referenceSessionResult, referenceTaskStatus, referenceTrace } from '../../src/rollout/reference-shapes.ts';

const trace: Trace = {
  prompt_ids: [1, 2], response_ids: [3, 4, 5], loss_mask: [1, 1, 0], response_logprobs: [-0.1, -0.2, 0],
  prompt_messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
  response_messages: [{ role: 'assistant', content: [], toolCalls: [{ id: 'c1', name: 'bash', arguments: '{"cmd":"ls"}' }], reasoning: { text: 'think' } }],
  tools: [{ name: 'bash', description: 'run', parameters: { type: 'object' }, origin: { kind: 'function' } }],
  finish_reason: { unified: 'tool-calls', raw: 'tool_calls' }, reward: 1,
  metadata: { session_id: 's', task_id: 't', builder: 'per_request', harness: 'pi', completion_ids: ['c'], policy_versions: [null] },
};

const result: SessionResult = {
  session_id: 's', task_id: 't', status: 'COMPLETED', node_id: 'n',  error: null,
  trajectory: { status: 'COMPLETED', traces: [trace], metadata: { reconstruction_stats: { completions: 2, chains: 1, merged: 2, breaks: {} }, evaluation: { outcome_reward: 1 }, training_filter: { trainable: true, reasons: [] }, attempt: 0 } },
  timing: { init_ms: 1, ready_queue_ms: 2, run_ms: 3, postrun_ms: 4, build_ms: 5, eval_ms: 6, e2e_ms: 21 },
};

const task = { task_id: 't', instruction: 'x', num_samples: 4, timeout_seconds: 60, agent: { harness: 'pi', model_name: 'm' }, builder: { strategy: 'per_request' }, metadata: { group_id: '7', policy_version: '3', rollout_step: 2 } } as TaskRequest;

test('a trace: finish_reason is the OpenAI Chat string, the object moves to metadata; messages and tools in OpenAI Chat form', () => {
  const t = referenceTrace(trace);
  expect(t.finish_reason).toBe('tool_calls');
  expect(referenceTrace({ ...trace, response_messages: [], finish_reason: { unified: 'length' } }).finish_reason).toBe('length');
  // A merged trace whose last turn answered in text ends with 'stop', whatever its earlier turns called.
  const merged: Trace = {
    ...trace, finish_reason: { unified: 'stop', raw: 'stop' },
    response_messages: [...trace.response_messages, { role: 'tool', toolCallId: 'c1', content: [{ type: 'text', text: 'a.py' }] }, { role: 'assistant', content: [{ type: 'text', text: 'done' }], toolCalls: [] }],
  } as Trace;
  expect(referenceTrace(merged).finish_reason).toBe('stop');
  expect((t.metadata as Record<string, unknown>).finish_reason).toEqual({ unified: 'tool-calls', raw: 'tool_calls' });
  expect(t.prompt_messages).toEqual([{ role: 'user', content: 'hi' }]);
  expect(t.response_messages).toEqual([{ role: 'assistant', content: null, reasoning_content: 'think', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{"cmd":"ls"}' } }] }]);
  expect(t.tools).toEqual([{ type: 'function', function: { name: 'bash', description: 'run', parameters: { type: 'object' } } }]);
  for (const key of ['prompt_ids', 'response_ids', 'loss_mask', 'response_logprobs', 'reward'] as const) expect(t[key]).toEqual(trace[key]);
});

test('a session result: reference keys, timing with reference keys only, scheduler labels where the bridges read them', () => {
  const r = referenceSessionResult(result, { task, sample_index: 2, reward: 1 });
  expect(Object.keys(r)).toEqual(['session_id', 'task_id', 'status', 'trajectory', 'timing', 'node_id', 'error', 'metadata']);
  expect(r.timing).toEqual(result.timing as unknown as Record<string, number>);
  expect(r.metadata).toEqual({ group_id: '7', policy_version: '3', rollout_step: 2, sample_index: 2, reward: 1, attempt: 0 });
  const trajectory = r.trajectory as Record<string, Record<string, unknown>>;
  expect(trajectory.metadata).toMatchObject({ record_count: 2, trace_count: 1, group_id: '7' });
  expect(trajectory.error).toBeNull();
});

test('a cancelled session is ERROR "cancelled" in the reference vocabulary (its SessionStatus has no CANCELLED)', () => {
  const r = referenceSessionResult({ ...result, status: 'CANCELLED', trajectory: { ...result.trajectory, status: 'ERROR' } });
  expect(r.status).toBe('ERROR');
  expect(r.error).toBe('cancelled');
  expect((r.trajectory as Record<string, unknown>).error).toBe('cancelled');
  expect((r.metadata as Record<string, unknown>).polar_status).toBe('CANCELLED');
});

test('a timing with a key the reference does not know loses it (SessionTiming forbids extra keys)', () => {
  const r = referenceSessionResult({ ...result, timing: { ...result.timing, extra_ms: 5 } as never });
  expect(Object.keys(r.timing as object)).not.toContain('extra_ms');
});

test('task status: lowercase status, totals, results and empty result_paths', () => {
  const rows = [referenceSessionResult(result)];
  expect(referenceTaskStatus({ task_id: 't', status: 'RUNNING', task, results: rows })).toEqual({ task_id: 't', status: 'running', total_sessions: 4, completed_sessions: 1, results: rows, result_paths: [] });
  expect(referenceTaskStatus({ task_id: 't', status: 'CANCELLED', task, results: [] }).status).toBe('cancelled');
});

test('a node as GatewayNodeInfo, stage counts as NodeStageMetrics, last_heartbeat ISO 8601', () => {
  const info = referenceNodeInfo({
    node_id: 'n', url: 'http://127.0.0.1:1', capacity: { init_workers: 4, ready_buffer: 2, max_run_workers: 8, postrun_workers: 3 },
    stages: { init: 1, ready: 2, running: 3, postrun: 4, queued: 5 }, healthy: true, draining: false, last_heartbeat: 0, in_flight: 6,
  }, 5);
  expect(info).toMatchObject({
    node_id: 'n', gateway_url: 'http://127.0.0.1:1', max_init_workers: 4, max_run_workers: 8, max_postrun_workers: 3,
    metrics: { init_queue_depth: 5, init_inflight: 1, ready_depth: 2, run_inflight: 3, postrun_queue_depth: 0, postrun_inflight: 4 },
    dispatch_reservations: 0, healthy: true, draining: false, heartbeat_interval_seconds: 5, last_heartbeat: '1970-01-01T00:00:00.000Z', in_flight: 6,
  });
});

test('events get the reference names and payloads', () => {
  const lookup = () => ({ task, completed: 3 });
  expect(referenceEvents('task_submitted', { task_id: 't', num_samples: 4 }, lookup)).toEqual([['task.created', { task_id: 't', status: 'running', harness: 'pi', model: 'm', num_samples: 4 }]]);
  expect(referenceEvents('session_result', { task_id: 't', session_id: 's', status: 'COMPLETED' }, lookup)).toEqual([
    ['session.state_changed', { task_id: 't', session_id: 's', status: 'COMPLETED' }],
    ['task.updated', { task_id: 't', completed_sessions: 3, total_sessions: 4 }],
  ]);
  expect(referenceEvents('task_finished', { task_id: 't', status: 'COMPLETED' }, lookup)).toEqual([['task.completed', { task_id: 't', status: 'completed', completed_sessions: 3 }]]);
  expect(referenceEvents('node_registered', { node_id: 'n' }, lookup)).toEqual([]);
});
