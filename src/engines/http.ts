/**
 * One HTTP call to an engine with the error mapping every engine client shares: connection failures and 5xx →
 * `upstream` (502), the configured timeout → `timeout` (504), a prompt over the context window → `context-overflow`,
 * any other 4xx → `invalid-request` carrying the engine's own message; the engine's `Retry-After` travels with the error
 * so the proxy can forward it (https://www.rfc-editor.org/rfc/rfc9110#field.retry-after).
 * Source: docs/architecture.md#the-proxy, docs/architecture.md#conventions.
 */
import { GatewayError } from '../core/errors.ts';

/** vLLM: "This model's maximum context length is N tokens…"; SGLang: "The input (N tokens) is longer than the model's context length (M tokens)". */
const CONTEXT_OVERFLOW = /maximum context length|longer than the model's context length|context length is only|exceeds the (?:model's )?(?:maximum )?context/i;

export interface EngineHttpOptions {
  /** Per-call limit in ms; 0 = none. */
  timeoutMs: number;
  headers?: Record<string, string>;
  /** The caller's abort (client disconnect when configured to abort); not a timeout. */
  signal?: AbortSignal;
}

/** Pull the human-readable message out of an OpenAI-style, FastAPI-style or plain-text error body. */
export function engineErrorMessage(text: string): string {
  try {
    const body = JSON.parse(text) as Record<string, unknown>;
    const error = body.error;
    if (typeof error === 'string') return error;
    if (error && typeof error === 'object' && typeof (error as { message?: unknown }).message === 'string') return (error as { message: string }).message;
    if (typeof body.message === 'string') return body.message;
    if (typeof body.detail === 'string') return body.detail;
    if (body.detail !== undefined) return JSON.stringify(body.detail);
  } catch {
    // not JSON: the text itself is the message
  }
  return text.slice(0, 2000);
}

/**
 * Map an engine's non-2xx answer to a GatewayError.
 * @param status the engine's HTTP status; @param text its body.
 */
export function classifyEngineError(status: number, text: string, what: string, retryAfter?: string | null): GatewayError {
  const message = engineErrorMessage(text);
  const upstream = { status, body: text.slice(0, 4000), ...(retryAfter ? { retryAfter } : {}) };
  if (CONTEXT_OVERFLOW.test(message) && status < 500) return new GatewayError('context-overflow', message, { upstream });
  if (status >= 500) return new GatewayError('upstream', `${what} failed with HTTP ${status}: ${message}`, { upstream });
  if (status === 429) return new GatewayError('rate-limited', message, { upstream });
  if (status === 401 || status === 403) return new GatewayError('upstream', `${what} rejected the proxy's credentials (HTTP ${status}): ${message}`, { upstream });
  if (status === 404) return new GatewayError('upstream', `${what} answered 404 (wrong engine URL or model?): ${message}`, { upstream });
  return new GatewayError('invalid-request', message, { upstream });
}

/**
 * POST/GET JSON to an engine and parse the JSON answer. `init.bodyBytes`, when given, is sent instead of
 * `JSON.stringify(init.body)` (the caller serialised it already, e.g. through body-memo.ts).
 * @throws GatewayError 'upstream' (refused, reset, 5xx, non-JSON body), 'timeout' (after `timeoutMs`), 'aborted'
 *   (caller's signal), 'context-overflow' / 'invalid-request' (engine 4xx).
 */
export async function engineFetchJson(
  url: string,
  init: {
    method: 'GET' | 'POST';
    body?: unknown;
    bodyBytes?: Uint8Array;
    /** Parses a 2xx answer's bytes instead of `JSON.parse` of its text (must throw like it on a non-JSON body). */
    parse?: (bytes: Uint8Array) => unknown;
  },
  opts: EngineHttpOptions,
  what: string,
): Promise<unknown> {
  const timeout = opts.timeoutMs > 0 ? AbortSignal.timeout(opts.timeoutMs) : undefined;
  const signals = [timeout, opts.signal].filter((s): s is AbortSignal => s !== undefined);
  const signal = signals.length === 0 ? undefined : signals.length === 1 ? signals[0] : AbortSignal.any(signals);
  let response: Response;
  let text: string | undefined;
  let bytes: Uint8Array | undefined;
  try {
    response = await fetch(url, {
      method: init.method,
      headers: { ...(init.body !== undefined || init.bodyBytes !== undefined ? { 'content-type': 'application/json' } : {}), accept: 'application/json', ...opts.headers },
      body: init.bodyBytes ?? (init.body !== undefined ? JSON.stringify(init.body) : undefined),
      signal,
      // Bun's own 5-minute socket idle timeout would cut a long prefill; `timeoutMs` is the limit.
      // https://bun.sh/reference/globals/BunFetchRequestInit/timeout
      timeout: false,
    });
    if (init.parse !== undefined && response.ok) bytes = new Uint8Array(await response.arrayBuffer());
    else text = await response.text();
  } catch (thrown) {
    if (timeout?.aborted) throw new GatewayError('timeout', `${what} did not answer within ${opts.timeoutMs} ms`, { cause: thrown });
    if (opts.signal?.aborted) throw new GatewayError('aborted', `${what} aborted by the caller`, { cause: thrown });
    const reason = thrown instanceof Error ? thrown.message : String(thrown);
    throw new GatewayError('upstream', `${what} unreachable at ${url}: ${reason}`, { cause: thrown });
  }
  if (!response.ok) throw classifyEngineError(response.status, text ?? '', what, response.headers.get('retry-after'));
  try {
    return bytes !== undefined ? init.parse!(bytes) : (JSON.parse(text!) as unknown);
  } catch (thrown) {
    text ??= new TextDecoder().decode(bytes);
    throw new GatewayError('upstream', `${what} answered HTTP ${response.status} with a body that is not JSON: ${text.slice(0, 200)}`, {
      cause: thrown,
      upstream: { status: response.status, body: text.slice(0, 4000) },
    });
  }
}

/**
 * POST JSON to an engine that answers with a stream (`text/event-stream`); resolves once the engine has answered with
 * a 2xx status, before the body is read. The timeout covers the whole stream (the caller reads the body within it).
 * `bodyBytes`, when given, is sent instead of `JSON.stringify(body)`.
 * @returns the engine's response (read its body with sse.ts `sseData`) and the signal that ends the stream.
 * @throws GatewayError like engineFetchJson for everything before the first byte of the body.
 */
export async function engineFetchStream(url: string, body: unknown, opts: EngineHttpOptions, what: string, bodyBytes?: Uint8Array): Promise<{ response: Response; signal: AbortSignal | undefined; timedOut(): boolean }> {
  const timeout = opts.timeoutMs > 0 ? AbortSignal.timeout(opts.timeoutMs) : undefined;
  const signals = [timeout, opts.signal].filter((s): s is AbortSignal => s !== undefined);
  const signal = signals.length === 0 ? undefined : signals.length === 1 ? signals[0] : AbortSignal.any(signals);
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...opts.headers },
      body: bodyBytes ?? JSON.stringify(body),
      signal,
      timeout: false, // see engineFetchJson: `timeoutMs` is the limit, not Bun's socket idle timeout
    });
  } catch (thrown) {
    if (timeout?.aborted) throw new GatewayError('timeout', `${what} did not answer within ${opts.timeoutMs} ms`, { cause: thrown });
    if (opts.signal?.aborted) throw new GatewayError('aborted', `${what} aborted by the caller`, { cause: thrown });
    const reason = thrown instanceof Error ? thrown.message : String(thrown);
    throw new GatewayError('upstream', `${what} unreachable at ${url}: ${reason}`, { cause: thrown });
  }
  if (!response.ok) throw classifyEngineError(response.status, await response.text().catch(() => ''), what, response.headers.get('retry-after'));
  if (!response.body) throw new GatewayError('upstream', `${what} answered HTTP ${response.status} without a body`);
  return { response, signal, timedOut: () => timeout?.aborted === true };
}

/** Request headers for an engine: `authorization: Bearer <apiKey>` when a key is configured, then `extra`. */
export function engineHeaders(apiKey: string | undefined, extra: Record<string, string> = {}): Record<string, string> {
  return { ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}), ...extra };
}

/**
 * Start-up check of the served model: `GET {url}/v1/models` (OpenAI list shape, https://platform.openai.com/docs/api-reference/models/list).
 * The configured `served` model must be listed when the engine lists any; without one, the first listed model is used.
 * @param engineId the engine's id (`kind@url`), for messages.
 * @returns the served model, the listed entries that are objects (vLLM adds `max_model_len` to each) and their ids.
 * @throws GatewayError 'upstream' when the engine is unreachable, lists no model (and none is configured), or does not
 *   serve the configured one; the other errors of engineFetchJson.
 */
export async function probeServedModel(
  url: string,
  engineId: string,
  served: string | undefined,
  http: EngineHttpOptions,
): Promise<{ served: string; listed: Record<string, unknown>[]; ids: string[] }> {
  const models = (await engineFetchJson(`${url}/v1/models`, { method: 'GET' }, http, `engine ${engineId} GET /v1/models`)) as { data?: unknown };
  const listed = Array.isArray(models.data) ? models.data.filter((m): m is Record<string, unknown> => !!m && typeof m === 'object') : [];
  const ids = listed.flatMap((m) => (typeof m.id === 'string' ? [m.id] : []));
  if (served === undefined) {
    if (ids[0] === undefined) throw new GatewayError('upstream', `engine ${engineId} lists no models at /v1/models`);
    return { served: ids[0], listed, ids };
  }
  if (ids.length > 0 && !ids.includes(served)) {
    throw new GatewayError('upstream', `engine ${engineId} does not serve model "${served}" (it serves ${ids.map((m) => `"${m}"`).join(', ')})`);
  }
  return { served, listed, ids };
}

/**
 * `run` at most once at a time and once for good: every call shares the first call's promise until it settles; after
 * a failure the next call runs it again (an engine probed before it was up may be probed once it is).
 */
export function onceUntilFailure(run: () => Promise<void>): () => Promise<void> {
  let pending: Promise<void> | null = null;
  return () => {
    pending ??= run().catch((thrown) => {
      pending = null;
      throw thrown;
    });
    return pending;
  };
}

/**
 * An engine's base URL as the clients use it: without trailing slashes and without a trailing `/v1` (the clients
 * append `/v1/...` themselves; OpenAI-style docs often give the base URL with `/v1`, which would become `/v1/v1/models`).
 */
export function engineBaseUrl(url: string): string {
  return url.replace(/\/+$/, '').replace(/\/v1$/, '');
}
