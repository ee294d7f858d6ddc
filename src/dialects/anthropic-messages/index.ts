/**
 * The Anthropic Messages dialect (`POST /v1/messages`): Claude Code, pi `anthropic-messages`, qwen-code
 * `--auth-type anthropic`, the @anthropic-ai/sdk. Pure codecs; the proxy wires them to routes.
 */
import type { Dialect } from '../../core/dialect.ts';
import { decodeRequest } from './decode-request.ts';
import { decodeResponse } from './decode-response.ts';
import { encodeRequest } from './encode-request.ts';
import { encodeResponse } from './encode-response.ts';
import { createStreamEncoder } from './encode-stream.ts';
import { encodeError } from './errors.ts';

export const anthropicMessages = {
  name: 'anthropic-messages',
  decodeRequest,
  encodeRequest,
  decodeResponse,
  encodeResponse,
  createStreamEncoder,
  encodeError,
} as const satisfies Dialect;

export { BILLING_HEADER_PREFIX } from './decode-request.ts';
export { decodeStopReason, encodeStopReason } from './finish-reason.ts';
export { decodeUsage, encodeUsage } from './usage.ts';
