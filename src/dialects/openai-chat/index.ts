/**
 * The OpenAI Chat Completions dialect (`POST /v1/chat/completions`): qwen-code, pi `openai-completions`, OpenCode, the
 * `openai` SDK. Pure codecs; the proxy wires them to routes.
 */
import type { Dialect } from '../../core/dialect.ts';
import { decodeRequest } from './decode-request.ts';
import { decodeResponse } from './decode-response.ts';
import { encodeRequest } from './encode-request.ts';
import { encodeResponse } from './encode-response.ts';
import { createStreamEncoder } from './encode-stream.ts';
import { encodeError } from './errors.ts';

export const openaiChat = {
  name: 'openai-chat',
  decodeRequest,
  encodeRequest,
  decodeResponse,
  encodeResponse,
  createStreamEncoder,
  encodeError,
} as const satisfies Dialect;

export { encodeMessage } from './encode-request.ts';
export { decodeFinishReason, encodeFinishReason } from './finish-reason.ts';
export { decodeUsage, encodeUsage } from './usage.ts';
