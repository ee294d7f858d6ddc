/**
 * GatewayError → the OpenAI error body `{error: {message, type, param, code}}` with the HTTP status, and the in-band
 * stream form (`response.failed` carries `response.error: {code, message}`).
 * Source: https://platform.openai.com/docs/guides/error-codes, https://platform.openai.com/docs/api-reference/responses-streaming/response/failed
 */
import { assertNever, type ErrorKind, type GatewayError } from '../../core/errors.ts';

export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

function typeAndCode(kind: ErrorKind): { type: string; code: string | null } {
  switch (kind) {
    case 'invalid-request':
      return { type: 'invalid_request_error', code: null };
    case 'context-overflow':
      return { type: 'invalid_request_error', code: 'context_length_exceeded' };
    case 'authentication':
      return { type: 'authentication_error', code: 'invalid_api_key' };
    case 'permission':
      return { type: 'permission_error', code: null };
    case 'not-found':
      // An unknown URL, as OpenAI answers it ("Invalid URL (GET /v1/x)").
      return { type: 'invalid_request_error', code: null };
    case 'rate-limited':
      return { type: 'rate_limit_error', code: 'rate_limit_exceeded' };
    case 'overloaded':
      return { type: 'server_error', code: 'server_is_overloaded' };
    case 'timeout':
      return { type: 'server_error', code: 'timeout' };
    case 'aborted':
      return { type: 'server_error', code: 'request_aborted' };
    case 'upstream':
    case 'internal':
      return { type: 'server_error', code: 'server_error' };
    default:
      return assertNever(kind);
  }
}

/** The HTTP status and OpenAI-shaped body for `error`. */
export function encodeError(error: GatewayError): { status: number; body: OpenAIErrorBody } {
  const { type, code } = typeAndCode(error.kind);
  return { status: error.status, body: { error: { message: error.message, type, param: error.details.param ?? null, code } } };
}

/** The `response.error` object of a failed response (`code` is never null there). */
export function encodeResponseError(error: GatewayError): { code: string; message: string } {
  const { code } = typeAndCode(error.kind);
  return { code: code ?? 'server_error', message: error.message };
}
