/**
 * Our rollout records in the Python Polar's response shapes (NVIDIA-NeMo/ProRL-Agent-Server `src/polar`:
 * `rollout/models.py` TaskStatus, TaskResult, SessionResult, SessionTiming, GatewayNodeInfo, NodeStageMetrics;
 * `trajectory/models.py` Trajectory, Trace; `rollout/manager.py` status words and SSE event names), so clients that
 * validate responses with those pydantic models accept ours. Pure functions: no I/O, no server state.
 *
 * Rules: the reference's fields come first with its value types; our extras are additional keys, which its models
 * ignore, except inside `timing` (SessionTiming forbids unknown keys, so it never gets one). Where a value type
 * differs (`finish_reason` object → string, session status CANCELLED, IR messages) the reference type wins and our
 * value moves into the object's `metadata`.
 */
import type { FinishReason, IRMessage, IRTool } from '../core/ir.ts';
import type { SessionResult, SessionTiming, TaskRequest, Trace } from '../core/records.ts';
import { encodeMessage } from '../dialects/openai-chat/encode-request.ts';
import { encodeFinishReason } from '../dialects/openai-chat/finish-reason.ts';
import type { NodeRow } from './store-port.ts';

/**
 * Task status words of the reference (lowercase): running, completed, failed, cancelling, cancelled. Our FAILED (every
 * session finished, none usable) is `completed` there: the reference's manager completes a batch whose sessions all
 * ended ERROR or TIMEOUT, with those results, and reports `failed` only when the batch itself raised
 * (ProRL-Agent-Server src/polar/rollout/manager.py `_execute_task`). Our word stays in `polar_status`.
 */
export function referenceTaskStatusWord(status: string): string {
  return status === 'FAILED' ? 'completed' : status.toLowerCase();
}

/** The reference's SessionStatus values (no CANCELLED). */
const REFERENCE_SESSION_STATUSES = new Set(['REGISTERED', 'INITIALIZING', 'READY', 'RUNNING', 'POST_RUN', 'BUILDING', 'EVALUATING', 'COMPLETED', 'ERROR', 'TIMEOUT']);

/** Our SessionTiming keys are a subset of the reference's (which forbids any other key): copy only those. */
const TIMING_KEYS: readonly (keyof SessionTiming)[] = ['init_ms', 'ready_queue_ms', 'run_ms', 'postrun_ms', 'build_ms', 'eval_ms', 'e2e_ms'];

function referenceTiming(timing: Partial<SessionTiming> | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const key of TIMING_KEYS) if (typeof timing?.[key] === 'number') out[key] = timing[key];
  return out;
}

/** An IR message as an OpenAI Chat message (`tool_calls[{id,type,function}]`, `tool_call_id`, `reasoning_content`). */
function chatMessage(message: unknown): Record<string, unknown> {
  const m = message as IRMessage;
  if (m && typeof m === 'object' && typeof m.role === 'string' && Array.isArray((m as { content?: unknown }).content)) return encodeMessage(m) as unknown as Record<string, unknown>;
  return message as Record<string, unknown>; // already wire-shaped (or foreign): pass through unchanged
}

/** An IR tool as an OpenAI Chat tool `{type: "function", function: {name, description?, parameters}}`. */
function chatTool(tool: unknown): Record<string, unknown> {
  const t = tool as IRTool;
  if (!t || typeof t !== 'object' || typeof t.name !== 'string' || 'type' in t) return tool as Record<string, unknown>;
  return { type: 'function', function: { name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), parameters: t.parameters ?? {} } };
}

/**
 * A Trace in the reference's shape: `finish_reason` the OpenAI Chat string (`stop`, `length`, `tool_calls`,
 * `content_filter`; our `{unified, raw}` object goes to `metadata.finish_reason`), messages and tools in OpenAI Chat form (our IR ones go to
 * `metadata.ir_prompt_messages` … only when asked, to keep the payload small). Token fields unchanged.
 */
export function referenceTrace(trace: Trace): Record<string, unknown> {
  const reason = trace.finish_reason as unknown;
  // Whether the trace's last answer called tools (a merged trace holds every turn; earlier ones' calls do not count).
  const lastAnswer = (trace.response_messages ?? []).findLast((m) => (m as { role?: string }).role === 'assistant') as { toolCalls?: unknown[] } | undefined;
  const hasToolCalls = Array.isArray(lastAnswer?.toolCalls) && lastAnswer.toolCalls.length > 0;
  // The OpenAI Chat value the reference's traces carry (`stop`, `length`, `tool_calls`, `content_filter`).
  const finish = reason && typeof reason === 'object' && typeof (reason as FinishReason).unified === 'string' ? encodeFinishReason(reason as FinishReason, hasToolCalls) : typeof reason === 'string' ? reason : null;
  return {
    prompt_ids: trace.prompt_ids,
    response_ids: trace.response_ids,
    loss_mask: trace.loss_mask,
    prompt_messages: (trace.prompt_messages ?? []).map(chatMessage),
    response_messages: (trace.response_messages ?? []).map(chatMessage),
    tools: (trace.tools ?? []).map(chatTool),
    finish_reason: finish,
    response_logprobs: trace.response_logprobs,
    reward: typeof trace.reward === 'number' && Number.isFinite(trace.reward) ? trace.reward : null,
    metadata: { ...trace.metadata, ...(reason && typeof reason === 'object' ? { finish_reason: reason } : {}) },
  };
}

/** Scheduler labels the reference's bridges read back (`group_id`, `policy_version`, `rollout_step`), when the task set them. */
function schedulerLabels(task: TaskRequest | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of ['group_id', 'policy_version', 'rollout_step'] as const) {
    const value = task?.metadata?.[key];
    if (value !== undefined && value !== null) out[key] = value;
  }
  return out;
}

export interface SessionExtras {
  task?: TaskRequest;
  sample_index?: number;
  /** The outcome reward the group used (our rewardOf). */
  reward?: number;
}

/**
 * A SessionResult in the reference's shape. Status CANCELLED (ours: the server cancelled it) becomes ERROR with
 * `error` "cancelled" and `metadata.polar_status: "CANCELLED"`; `trajectory.error` is the session's error on an ERROR
 * trajectory; `trajectory.metadata` gains `record_count`, `trace_count` and the task's scheduler labels; `metadata`
 * carries sample_index, reward, attempt and those labels.
 */
export function referenceSessionResult(result: SessionResult, extras: SessionExtras = {}): Record<string, unknown> {
  const cancelled = result.status === 'CANCELLED';
  const status = REFERENCE_SESSION_STATUSES.has(result.status) ? result.status : 'ERROR';
  const error = result.error ?? (cancelled ? 'cancelled' : null);
  const trajectory = result.trajectory;
  const stats = trajectory.metadata?.reconstruction_stats;
  const labels = schedulerLabels(extras.task);
  return {
    session_id: result.session_id,
    task_id: result.task_id,
    status,
    trajectory: {
      status: trajectory.status,
      metadata: {
        ...trajectory.metadata,
        ...(stats && typeof stats.completions === 'number' ? { record_count: stats.completions } : {}),
        trace_count: trajectory.traces.length,
        ...labels,
      },
      traces: trajectory.traces.map(referenceTrace),
      error: trajectory.status === 'ERROR' ? error : null,
    },
    timing: referenceTiming(result.timing),
    node_id: result.node_id ?? null,
    error,
    metadata: {
      ...labels,
      ...(extras.sample_index !== undefined ? { sample_index: extras.sample_index } : {}),
      ...(extras.reward !== undefined ? { reward: extras.reward } : {}),
      ...(typeof trajectory.metadata?.attempt === 'number' ? { attempt: trajectory.metadata.attempt } : {}),
      ...(cancelled ? { polar_status: 'CANCELLED' } : {}),
    },
  };
}

export interface TaskView {
  task_id: string;
  /** Our status (RUNNING, COMPLETED, CANCELLED, …). */
  status: string;
  task: TaskRequest;
  /** Finished results in sample order, already in the reference shape. */
  results: Record<string, unknown>[];
}

/**
 * TaskStatus `{task_id, status, total_sessions, completed_sessions, results, result_paths}` (our extras are added by
 * the caller). `result_paths` is always empty: results live in SQLite (`polar export`), not in per-session JSON files.
 */
export function referenceTaskStatus(view: TaskView): { task_id: string; status: string; total_sessions: number; completed_sessions: number; results: Record<string, unknown>[]; result_paths: string[] } {
  return {
    task_id: view.task_id,
    status: referenceTaskStatusWord(view.status),
    total_sessions: view.task.num_samples,
    completed_sessions: view.results.length,
    results: view.results,
    result_paths: [],
  };
}

/** Node view as the server lists it (NodeRecord + in_flight). */
export type NodeView = Omit<NodeRow, 'registered_at'> & { in_flight?: number };

/**
 * GatewayNodeInfo: `{node_id, gateway_url, max_init_workers, max_run_workers, max_postrun_workers, metrics
 * (NodeStageMetrics), dispatch_reservations, healthy, draining, heartbeat_interval_seconds, last_heartbeat (ISO 8601)}`
 * followed by our own fields. Our stage counts map onto NodeStageMetrics: queued → init_queue_depth, init →
 * init_inflight, ready → ready_depth, running → run_inflight, postrun → postrun_inflight (no POSTRUN queue here).
 */
export function referenceNodeInfo(node: NodeView, heartbeatIntervalSeconds: number): Record<string, unknown> {
  const { node_id, ...ours } = node;
  const s = node.stages;
  return {
    node_id,
    gateway_url: node.url,
    max_init_workers: node.capacity.init_workers,
    max_run_workers: node.capacity.max_run_workers,
    max_postrun_workers: node.capacity.postrun_workers,
    metrics: { init_queue_depth: s.queued, init_inflight: s.init, ready_depth: s.ready, run_inflight: s.running, postrun_queue_depth: 0, postrun_inflight: s.postrun },
    dispatch_reservations: 0,
    heartbeat_interval_seconds: Math.max(1, Math.round(heartbeatIntervalSeconds)),
    ...ours,
    last_heartbeat: new Date(node.last_heartbeat).toISOString(),
    last_heartbeat_ms: node.last_heartbeat,
  };
}

/** Our events whose reference payload needs the task (lookup), and those that need nothing more. */
const NEEDS_LOOKUP = new Set(['task_submitted', 'session_result', 'task_finished']);
const PLAIN = new Set(['session_dispatched', 'session_requeued']);

/**
 * The reference's SSE events for one of ours, `[type, payload]` pairs: task.created, task.updated, task.completed,
 * session.state_changed. Source: ProRL-Agent-Server src/polar/rollout/manager.py `_emit` calls.
 * @param lookup the task and its finished-session count, for payload fields our events do not carry.
 */
export function referenceEvents(type: string, data: unknown, lookup: (taskId: string) => { task: TaskRequest; completed: number } | null): [string, Record<string, unknown>][] {
  const d = (data ?? {}) as Record<string, unknown>;
  const taskId = typeof d.task_id === 'string' ? d.task_id : null;
  if (taskId === null || (!NEEDS_LOOKUP.has(type) && !PLAIN.has(type))) return [];
  // Only the events whose payload names task fields look the task up (the lookup reads the store).
  const info = NEEDS_LOOKUP.has(type) ? lookup(taskId) : null;
  switch (type) {
    case 'task_submitted':
      return [['task.created', { task_id: taskId, status: 'running', harness: info?.task.agent.harness ?? null, model: info?.task.agent.model_name ?? null, num_samples: info?.task.num_samples ?? d.num_samples }]];
    case 'session_dispatched':
      return [['session.state_changed', { task_id: taskId, session_id: d.session_id, status: 'INITIALIZING' }]];
    case 'session_requeued':
      return [['session.state_changed', { task_id: taskId, session_id: d.session_id, status: 'REGISTERED' }]];
    case 'session_result':
      return [
        ['session.state_changed', { task_id: taskId, session_id: d.session_id, status: d.status === 'CANCELLED' ? 'ERROR' : d.status }],
        ['task.updated', { task_id: taskId, completed_sessions: info?.completed ?? null, total_sessions: info?.task.num_samples ?? null }],
      ];
    case 'task_finished':
      return [['task.completed', { task_id: taskId, status: referenceTaskStatusWord(String(d.status)), completed_sessions: info?.completed ?? null }]];
    default:
      return [];
  }
}
