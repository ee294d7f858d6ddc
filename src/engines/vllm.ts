/**
 * vLLM in chat mode. Capture flags: `logprobs: true, top_logprobs: 0, return_token_ids: true` (vLLM ≥ 0.10.2) →
 * top-level `prompt_token_ids`, `choices[0].token_ids` (EOS included), `choices[0].logprobs.content[k].logprob`.
 * Reasoning is echoed as `reasoning` on ≥ 0.10 and `reasoning_content` before (probed via GET /version).
 * Logprobs are raw unless the server runs with `--logprobs-mode processed_logprobs` (configure `logprobSemantics`).
 * Source: docs/protocol-notes.md#vllm; https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html
 */
import { ChatModeEngine, type ChatEngineOptions, type ChatEngineProfile } from './chat-engine.ts';

export const vllmProfile: ChatEngineProfile = {
  kind: 'vllm',
  captures: true,
  captureFlags: () => ({ logprobs: true, top_logprobs: 0, return_token_ids: true }),
  defaultReasoningField: 'reasoning',
  defaultLogprobSemantics: 'raw',
  probeVersion: true,
  tokenizesMessages: true,
};

/** A vLLM chat-mode client (`engine_id` `vllm@<url>`). */
export function createVllmEngine(opts: ChatEngineOptions): ChatModeEngine {
  return new ChatModeEngine(vllmProfile, opts);
}
