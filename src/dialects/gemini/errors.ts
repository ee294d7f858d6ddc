/**
 * GatewayError → Google's error shape `{error: {code, message, status}}` (code = the HTTP status, status = the
 * canonical gRPC code name). The same object is the in-band stream error (`data: {"error": …}`), which @google/genai
 * turns into an ApiError. Source: https://ai.google.dev/gemini-api/docs/troubleshooting#error-codes,
 * https://cloud.google.com/apis/design/errors
 */
import { assertNever, type ErrorKind, type GatewayError } from '../../core/errors.ts';

export interface GoogleErrorBody {
  error: { code: number; message: string; status: string };
}

function canonical(kind: ErrorKind, status: number): { code: number; status: string } {
  switch (kind) {
    case 'invalid-request':
    case 'context-overflow':
      return { code: status, status: 'INVALID_ARGUMENT' };
    case 'authentication':
      return { code: status, status: 'UNAUTHENTICATED' };
    case 'permission':
      return { code: status, status: 'PERMISSION_DENIED' };
    case 'not-found':
      return { code: status, status: 'NOT_FOUND' };
    case 'rate-limited':
      return { code: status, status: 'RESOURCE_EXHAUSTED' };
    case 'overloaded':
      // Google has no 529; an overloaded model is 503 UNAVAILABLE there.
      return { code: 503, status: 'UNAVAILABLE' };
    case 'upstream':
      return { code: status, status: 'UNAVAILABLE' };
    case 'timeout':
      return { code: status, status: 'DEADLINE_EXCEEDED' };
    case 'aborted':
      return { code: status, status: 'CANCELLED' };
    case 'internal':
      return { code: status, status: 'INTERNAL' };
    default:
      return assertNever(kind);
  }
}

/** The HTTP status and Google-shaped body for `error`. */
export function encodeError(error: GatewayError): { status: number; body: GoogleErrorBody } {
  const { code, status } = canonical(error.kind, error.status);
  return { status: code, body: { error: { code, message: error.message, status } } };
}
