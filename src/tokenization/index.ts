/** Tokenization: tokenizer + chat-template loading, message normalisation, output parsers. See tokenizer.ts, parsers.ts. */
export { loadTokenizer, type LoadedTokenizer, type RenderChatOptions } from './tokenizer.ts';
export { normalizeChatMessages, contentText, type ChatMessage, type ChatTool, type ChatToolCall, type ChatContentPart } from './chat-messages.ts';
export { parseQwen3Output, parseHermesToolCalls, splitQwen3Reasoning, type ParsedOutput, type ParsedToolCall, type ParseOptions } from './parsers.ts';
export { pythonJsonDumps } from './json.ts';
export { parseQwen35Output, type Qwen35ParseOptions } from './parsers.ts';
export { MODEL_FAMILIES, detectModelFamily, resolveFamilyIds, type ModelFamily, type ModelFamilyName, type FamilyIds } from './families.ts';
export { SessionTokenBuffers, sameChatMessage, type PromptPlan, type RenderSettings, type FullRenderReason, type TokenBufferOptions, type TokenBufferStats } from './token-buffer.ts';
