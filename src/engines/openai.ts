/**
 * Any OpenAI-compatible chat server without token capture (hosted APIs, llama.cpp's chat endpoint, ...). Completions
 * are proxied and recorded, but every record carries a `no-token-capture` warning and a capture error: nothing from
 * such an engine is trainable. Source: docs/architecture.md#chat-mode-and-token-mode (`openai`: no capture).
 */
import { ChatModeEngine, type ChatEngineOptions, type ChatEngineProfile } from './chat-engine.ts';

export const openaiProfile: ChatEngineProfile = {
  kind: 'openai',
  captures: false,
  captureFlags: () => ({}),
  defaultReasoningField: 'reasoning_content',
  defaultLogprobSemantics: 'none',
};

/** A capture-less OpenAI-compatible client (`engine_id` `openai@<url>`). */
export function createOpenAIEngine(opts: ChatEngineOptions): ChatModeEngine {
  return new ChatModeEngine(openaiProfile, opts);
}
