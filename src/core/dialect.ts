/**
 * The contract every client dialect folder (`src/dialects/<wire-protocol>/index.ts`) satisfies. Dialects are pure
 * codecs: no I/O, no hono. Source: docs/architecture.md#the-proxy, docs/architecture.md#module-rules (the same file set in every dialect folder), docs/architecture.md#conventions.
 */
import type { Clock } from './clock.ts';
import type { GatewayError } from './errors.ts';
import type { IdGenerator } from './ids.ts';
import type { DialectName, IRRequest, IRResponse } from './ir.ts';
import type { StreamEncoder } from './stream.ts';

export interface CodecContext {
  now: Clock;
  newId: IdGenerator;
  /** Options from config (e.g. strip Claude Code's billing header). */
  options?: DialectOptions;
  /**
   * The decoded request a response answers. Set by the proxy for encodeResponse/createStreamEncoder so a dialect can
   * map tool calls back to the client's own item types (Responses `custom` and `namespace` tools) and echo settings.
   */
  request?: IRRequest;
  /**
   * The client's request body as received (parsed JSON), set with `request`: for a reply that echoes the request's own
   * settings verbatim where the IR keeps a model-side form (the Responses object's `tools`, `tool_choice`,
   * `instructions`, `text`, `metadata`).
   */
  requestBody?: unknown;
  /** Model name taken from the URL path (Gemini `/v1beta/models/{model}:generateContent`); set before decodeRequest. */
  pathModel?: string;
  /** True when the URL path asks for a stream (Gemini `:streamGenerateContent`); set before decodeRequest. */
  pathStream?: boolean;
}

export interface DialectOptions {
  /** Remove Claude Code's `x-anthropic-billing-header:` system line (default true). */
  stripBillingHeader?: boolean;
}

export interface Dialect {
  readonly name: DialectName;
  /** Wire request → IR. Throws GatewayError('invalid-request') with a clear message on bad input. */
  decodeRequest(body: unknown, ctx: CodecContext): IRRequest;
  /** IR → wire request (round-trip tests; an upstream of this dialect). */
  encodeRequest(request: IRRequest): unknown;
  /** Wire response → IR (round-trip tests; an upstream of this dialect). */
  decodeResponse(body: unknown, ctx: CodecContext): IRResponse;
  /** IR → the provider's own non-streaming response body. */
  encodeResponse(response: IRResponse, ctx: CodecContext): unknown;
  /** A fresh SSE encoder for one streamed response. */
  createStreamEncoder(ctx: CodecContext): StreamEncoder;
  /** The provider's own error body and HTTP status. */
  encodeError(error: GatewayError): { status: number; body: unknown };
}
