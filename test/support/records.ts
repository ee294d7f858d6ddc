/** Test helper: hand-made CompletionRecords for store, trace and export tests. */
import type { ResultStatus } from '../../src/core/contracts/index.ts';
import type { CompletionRecord, SessionResult, Trace } from '../../src/core/records.ts';

/**
 * A chat-mode completion record as an engine capture writes it: the ids, turn and content come from `fields`; the rest
 * is a plain successful capture (openai-chat dialect, finish `stop`, raw logprobs, no policy version, no capture error,
 * no warnings, 1 ms timings, created at 0).
 */
export function chatCompletionRecord(
  fields: Pick<CompletionRecord, 'completion_id' | 'session_id' | 'seq' | 'ir_request' | 'ir_response' | 'prompt_ids' | 'response_ids' | 'logprobs' | 'engine_id'> &
    Partial<CompletionRecord>,
): CompletionRecord {
  return {
    dialect: 'openai-chat',
    request_body: {},
    finish_reason: { unified: 'stop', raw: 'stop' },
    policy_version: null,
    logprob_semantics: 'raw',
    mode: 'chat',
    capture_error: null,
    warnings: [],
    timings: { engine_ms: 1, total_ms: 1 },
    created_at: 0,
    ...fields,
  };
}

/**
 * A SessionResult as the gateway's POSTRUN stores it (src/gateway/postrun.ts), with one trace: a COMPLETED session
 * carries its evaluation's `reward`; any other status the `details.skipped` evaluation (outcome_reward 0, never
 * evaluated), and a CANCELLED one an ERROR trajectory (records.ts SessionResult.status). Zero timings, node `n`.
 */
export function sessionResult(sessionId: string, taskId: string, status: ResultStatus, reward = 0, error: string | null = null): SessionResult {
  const trace: Trace = {
    prompt_ids: [1, 2], response_ids: [3, 4], loss_mask: [1, 1], response_logprobs: [-0.5, -0.25], prompt_messages: [], response_messages: [], tools: [],
    finish_reason: { unified: 'stop', raw: 'stop' }, reward: status === 'COMPLETED' ? reward : 0,
    metadata: { session_id: sessionId, task_id: taskId, builder: 'prefix_merging', harness: 'shell', completion_ids: [`c-${sessionId}`], policy_versions: [null] },
  };
  const evaluation = status === 'COMPLETED' ? { outcome_reward: reward } : { outcome_reward: 0, details: { skipped: `session ${status}` } };
  return {
    session_id: sessionId, task_id: taskId, status, node_id: 'n', error,
    timing: { init_ms: 0, ready_queue_ms: 0, run_ms: 0, postrun_ms: 0, build_ms: 0, eval_ms: 0, e2e_ms: 0 },
    trajectory: {
      status: status === 'CANCELLED' ? 'ERROR' : status, traces: [trace],
      metadata: { reconstruction_stats: { completions: 1, chains: 1, merged: 0, breaks: {} }, evaluation, training_filter: { trainable: status === 'COMPLETED', reasons: [] } },
    },
  };
}
