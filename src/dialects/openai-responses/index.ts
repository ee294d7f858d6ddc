/**
 * The OpenAI Responses dialect (`POST /v1/responses`; Codex, pi `openai-responses`, the openai SDK's `responses.create`).
 * Pure codecs to and from the IR. Source: https://platform.openai.com/docs/api-reference/responses; docs/protocol-notes.md#openai-responses.
 */
import type { Dialect } from '../../core/dialect.ts';
import { decodeRequest } from './decode-request.ts';
import { decodeResponse } from './decode-response.ts';
import { encodeRequest } from './encode-request.ts';
import { encodeResponse } from './encode-response.ts';
import { createStreamEncoder } from './encode-stream.ts';
import { encodeError } from './errors.ts';

export const openaiResponses = {
  name: 'openai-responses',
  decodeRequest,
  encodeRequest,
  decodeResponse,
  encodeResponse,
  createStreamEncoder,
  encodeError,
} as const satisfies Dialect;

export { decodeReasoningPayload, encodeReasoningPayload } from './reasoning-payload.ts';
export { NAMESPACE_SEPARATOR } from './tools.ts';
