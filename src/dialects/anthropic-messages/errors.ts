/**
 * GatewayError → Anthropic error body `{type: "error", error: {type, message}}` and HTTP status.
 * Source: https://docs.anthropic.com/en/api/errors (error types and statuses).
 */
import { assertNever, type GatewayError } from '../../core/errors.ts';
import { contextOverflowCounts } from '../shared/context-overflow.ts';

export type AnthropicErrorType =
  | 'invalid_request_error'
  | 'request_too_large'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'api_error'
  | 'timeout_error'
  | 'overloaded_error';

export interface AnthropicErrorBody {
  type: 'error';
  error: { type: AnthropicErrorType; message: string };
}

/**
 * The provider's own error body and status. A context overflow becomes Claude Code's trigger for compaction:
 * `invalid_request_error` "prompt is too long: N tokens > M maximum" (counts read from the engine's message when known).
 */
export function encodeError(error: GatewayError): { status: number; body: AnthropicErrorBody } {
  let type: AnthropicErrorType;
  let message = error.message;
  let status = error.status;
  switch (error.kind) {
    case 'invalid-request':
      // 413 has its own type: "request_too_large: Request exceeds the maximum allowed number of bytes".
      type = status === 413 ? 'request_too_large' : 'invalid_request_error';
      break;
    case 'context-overflow': {
      type = 'invalid_request_error';
      const counts = contextOverflowCounts(error);
      message = counts
        ? `prompt is too long: ${counts.promptTokens} tokens > ${counts.maxTokens} maximum`
        : `prompt is too long: ${error.message}`;
      status = 400;
      break;
    }
    case 'authentication':
      type = 'authentication_error';
      break;
    case 'permission':
      type = 'permission_error';
      break;
    case 'not-found':
      type = 'not_found_error';
      break;
    case 'rate-limited':
      type = 'rate_limit_error';
      break;
    case 'overloaded':
      type = 'overloaded_error';
      break;
    case 'timeout':
      type = 'timeout_error';
      break;
    case 'upstream':
    case 'aborted':
    case 'internal':
      type = 'api_error';
      break;
    default:
      return assertNever(error.kind);
  }
  return { status, body: { type: 'error', error: { type, message } } };
}
