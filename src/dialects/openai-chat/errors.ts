/**
 * GatewayError → OpenAI error body `{error: {message, type, param, code}}` and HTTP status.
 * Source: https://platform.openai.com/docs/guides/error-codes; overflow wording as in the API's `context_length_exceeded`.
 */
import { assertNever, type GatewayError } from '../../core/errors.ts';
import { contextOverflowCounts } from '../shared/context-overflow.ts';

export interface ChatErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** The provider's own error body and status (`overloaded` is 503 here: 529 is Anthropic's). */
export function encodeError(error: GatewayError): { status: number; body: ChatErrorBody } {
  let type: string;
  let code: string | null = null;
  let message = error.message;
  let status = error.status;
  let param: string | null = error.details.param ?? null;
  switch (error.kind) {
    case 'invalid-request':
      type = 'invalid_request_error';
      break;
    case 'context-overflow': {
      type = 'invalid_request_error';
      code = 'context_length_exceeded';
      param = 'messages';
      status = 400;
      const counts = contextOverflowCounts(error);
      if (counts) {
        message =
          `This model's maximum context length is ${counts.maxTokens} tokens. However, your messages resulted in ` +
          `${counts.promptTokens} tokens. Please reduce the length of the messages.`;
      }
      break;
    }
    case 'authentication':
      type = 'authentication_error';
      code = 'invalid_api_key';
      break;
    case 'permission':
      type = 'permission_error';
      break;
    case 'not-found':
      // The proxy's not-found is an unknown URL; OpenAI answers that as invalid_request_error with code null
      // ("Invalid URL (GET /v1/x)"). `model_not_found` would send clients hunting for a model problem.
      type = 'invalid_request_error';
      break;
    case 'rate-limited':
      type = 'rate_limit_error';
      code = 'rate_limit_exceeded';
      break;
    case 'overloaded':
      type = 'server_error';
      code = 'overloaded';
      if (status === 529) status = 503;
      break;
    case 'timeout':
      type = 'server_error';
      code = 'timeout';
      break;
    case 'upstream':
    case 'aborted':
    case 'internal':
      type = 'server_error';
      break;
    default:
      return assertNever(error.kind);
  }
  return { status, body: { error: { message, type, param, code } } };
}
