/**
 * Delivery of a SessionResult to its callback URL (rollout: `{server}/callbacks/session_result`, idempotent per
 * session on the server side), retried with exponential backoff.
 */
import { controlPlaneHeaders } from '../core/contracts/index.ts';
import { sleep } from './prepare.ts';

export { controlPlaneHeaders } from '../core/contracts/index.ts';

export interface RetryPolicy {
  /** Tries in total (default 8). */
  attempts?: number;
  /** First backoff, ms (default 500); doubles per try. */
  baseDelayMs?: number;
  /** Backoff cap, ms (default 30 000). */
  maxDelayMs?: number;
}

/** True for statuses worth retrying: network trouble, 408, 429 and 5xx. */
const retryable = (status: number) => status === 408 || status === 429 || status >= 500;

/**
 * POST `body` as JSON to `url` until a 2xx, with `authorization: Bearer <token>` when a token is given.
 * Returns the number of tries used. Throws Error after the last try, or at once on a non-retryable 4xx.
 */
export async function postWithRetry(
  url: string,
  body: unknown,
  opts: RetryPolicy & { token?: string | null; fetch?: typeof fetch; signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<number> {
  const attempts = opts.attempts ?? 8;
  const base = opts.baseDelayMs ?? 500;
  const max = opts.maxDelayMs ?? 30_000;
  const headers = controlPlaneHeaders(opts.token);
  const payload = JSON.stringify(body);
  let lastError = '';
  for (let attempt = 1; attempt <= attempts; attempt++) {
    try {
      const signal = opts.signal ? AbortSignal.any([opts.signal, AbortSignal.timeout(opts.timeoutMs ?? 30_000)]) : AbortSignal.timeout(opts.timeoutMs ?? 30_000);
      const response = await (opts.fetch ?? fetch)(url, { method: 'POST', headers, body: payload, signal });
      const text = await response.text();
      if (response.ok) return attempt;
      lastError = `HTTP ${response.status} ${text.slice(0, 200)}`;
      if (!retryable(response.status)) throw new NonRetryable(`POST ${url} failed: ${lastError}`);
    } catch (error) {
      if (error instanceof NonRetryable) throw new Error(error.message);
      opts.signal?.throwIfAborted();
      lastError = error instanceof Error ? error.message : String(error);
    }
    if (attempt < attempts) await sleep(Math.min(max, base * 2 ** (attempt - 1)), opts.signal);
  }
  throw new Error(`POST ${url} failed after ${attempts} tries: ${lastError}`);
}

class NonRetryable extends Error {}
