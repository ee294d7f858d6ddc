/** Test helper: hand-made CompletionRecords for store, trace and export tests. */
import type { CompletionRecord } from '../../src/core/records.ts';

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
