/**
 * One error type for the whole gateway, rendered in the caller's own provider shape by each dialect's
 * `encodeError`. Before the first byte it is an HTTP status; after it, an in-band stream event.
 */
export type ErrorKind =
  | 'invalid-request'
  | 'authentication'
  | 'permission'
  | 'not-found'
  | 'rate-limited'
  | 'overloaded'
  | 'context-overflow'
  | 'upstream'
  | 'timeout'
  | 'aborted'
  | 'internal';

const statusByKind: Record<ErrorKind, number> = {
  'invalid-request': 400,
  authentication: 401,
  permission: 403,
  'not-found': 404,
  'rate-limited': 429,
  overloaded: 529,
  'context-overflow': 400,
  upstream: 502,
  timeout: 504,
  aborted: 499,
  internal: 500,
};

const retryableKinds = new Set<ErrorKind>(['rate-limited', 'overloaded', 'upstream', 'timeout']);

export class GatewayError extends Error {
  readonly status: number;
  readonly retryable: boolean;
  constructor(
    readonly kind: ErrorKind,
    message: string,
    readonly details: {
      status?: number;
      cause?: unknown;
      /** The engine's own answer; `retryAfter` is its `Retry-After` header, forwarded to the client. */
      upstream?: { status: number; body: string; retryAfter?: string };
      param?: string;
    } = {},
  ) {
    super(message, { cause: details.cause });
    this.name = 'GatewayError';
    this.status = details.status ?? statusByKind[kind];
    this.retryable = retryableKinds.has(kind);
  }
}

/** Wrap anything thrown into a GatewayError (unknown errors become `internal`). */
export function toGatewayError(thrown: unknown): GatewayError {
  if (thrown instanceof GatewayError) return thrown;
  if (thrown instanceof Error && thrown.name === 'AbortError') return new GatewayError('aborted', 'request aborted', { cause: thrown });
  // JSON.parse accepts any depth, but walking or re-serialising a value nested tens of thousands deep exhausts the
  // stack (e.g. a tool's parameters schema of 50,000 nested arrays): the input's fault, so a 4xx, not a 500.
  if (thrown instanceof RangeError && /call stack/i.test(thrown.message)) {
    return new GatewayError('invalid-request', 'the request is nested too deeply to process (the JavaScript call stack was exhausted)', { cause: thrown });
  }
  const message = thrown instanceof Error ? thrown.message : String(thrown);
  return new GatewayError('internal', `unexpected gateway failure: ${message}`, { cause: thrown });
}

export function assertNever(value: never): never {
  throw new Error(`unexpected value: ${JSON.stringify(value)}`);
}

/** `thrown` as an Error: itself when it is one, else an Error whose message is its text. */
export function asError(thrown: unknown): Error {
  return thrown instanceof Error ? thrown : new Error(String(thrown));
}

/**
 * `run(item)` for each item in order, none stopping the others.
 * @returns one entry per item: null when `run` returned, else what it threw (asError).
 */
export function attemptEach<T>(items: readonly T[], run: (item: T) => void): (Error | null)[] {
  return items.map((item) => {
    try {
      run(item);
      return null;
    } catch (thrown) {
      return asError(thrown);
    }
  });
}
