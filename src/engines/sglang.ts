/**
 * SGLang in chat mode (non-streaming only). Capture flags: `logprobs: true, return_prompt_token_ids: true,
 * return_meta_info: true`, plus `return_token_ids` on builds that accept it (probed) → `choices[0].prompt_token_ids`
 * and `meta_info.output_token_logprobs` = [[logprob, token_id, text|null], ...] (preferred over `logprobs.content`,
 * which some builds truncate). Each call carries `rid` = `<session_id>:<request_id>` (unique per call, attributable
 * per session) so `/abort_request` can target it. Source: docs/protocol-notes.md#sglang;
 * https://docs.sglang.ai/basic_usage/openai_api_completions.html
 */
import { ChatModeEngine, type ChatEngineOptions, type ChatEngineProfile } from './chat-engine.ts';

export const sglangProfile: ChatEngineProfile = {
  kind: 'sglang',
  captures: true,
  captureFlags: ({ acceptsReturnTokenIds }) => ({
    logprobs: true,
    return_prompt_token_ids: true,
    return_meta_info: true,
    ...(acceptsReturnTokenIds ? { return_token_ids: true } : {}),
  }),
  perCallFields: (ctx) => ({ rid: `${ctx.sessionId}:${ctx.requestId}` }),
  defaultReasoningField: 'reasoning_content',
  defaultLogprobSemantics: 'raw',
  optionalReturnTokenIds: true,
};

/** An SGLang chat-mode client (`engine_id` `sglang@<url>`). */
export function createSglangEngine(opts: ChatEngineOptions): ChatModeEngine {
  return new ChatModeEngine(sglangProfile, opts);
}
