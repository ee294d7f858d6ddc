/**
 * Rollout server → gateway: `POST {node}/sessions` with a DispatchSpec; the node answers 202 `{session_id, status}`,
 * or a DispatchError body `{error}` with 400 (the spec cannot run there), 409 (the node already holds that session id)
 * or 503 (the node is stopping).
 */
import { z } from 'zod';
import { taskRequestSchema } from './task.ts';

export const dispatchSpecSchema = z.strictObject({
  session_id: z.string().min(1).max(512),
  task: taskRequestSchema,
  /** 0-based sample of the task this session runs. */
  sample_index: z.number().int().min(0),
  /** Where the node posts the SessionResult. */
  callback_url: z.url().optional(),
  /** 0-based dispatch attempt (a re-dispatch after a node loss runs the same session id with attempt + 1). */
  attempt: z.number().int().min(0).optional(),
});
export type DispatchSpec = z.infer<typeof dispatchSpecSchema>;

/** HTTP statuses a node refuses a dispatch with. */
export type DispatchRefusal = 400 | 409 | 503;

/**
 * A refused dispatch: rendered by the node as `{error: message, ...details}` with `status`. A 409 carries the
 * session the node holds: `{session_id, attempt, status}`.
 */
export class DispatchError extends Error {
  override name = 'DispatchError';
  constructor(message: string, readonly status: DispatchRefusal, readonly details: Record<string, unknown> = {}) {
    super(message);
  }
}

/**
 * What a dispatch answer means for the rollout server:
 * - `accepted`: the node took the session (2xx).
 * - `held`: the node already holds this session id (409); `attempt` is the attempt it runs (null when it did not say).
 *   The server adopts it and does not dispatch again.
 * - `refused`: the session cannot run there (any other 4xx but 408/429): that session fails with `error`, no retry,
 *   and the node's health is not touched: one session's content never takes a node out of rotation.
 * - `unavailable`: network error, timeout, 408, 429, 5xx (503 = stopping): the node's trouble, counted toward its health;
 *   the session goes back to the queue.
 */
export type DispatchOutcome =
  | { kind: 'accepted' }
  | { kind: 'held'; attempt: number | null; status: string | null }
  | { kind: 'refused'; status: number; error: string }
  | { kind: 'unavailable'; error: string };

/** Classify a node's HTTP answer to `POST /sessions` (`body` as text). */
export function classifyDispatchAnswer(status: number, body: string): DispatchOutcome {
  if (status >= 200 && status < 300) return { kind: 'accepted' };
  let parsed: Record<string, unknown> = {};
  try {
    const value: unknown = JSON.parse(body);
    if (value && typeof value === 'object') parsed = value as Record<string, unknown>;
  } catch {
    // not JSON: keep the text
  }
  const error = typeof parsed.error === 'string' ? parsed.error : body.slice(0, 500);
  if (status === 409) {
    return { kind: 'held', attempt: typeof parsed.attempt === 'number' ? parsed.attempt : null, status: typeof parsed.status === 'string' ? parsed.status : null };
  }
  if (status >= 400 && status < 500 && status !== 408 && status !== 429) return { kind: 'refused', status, error: `HTTP ${status}: ${error}` };
  return { kind: 'unavailable', error: `HTTP ${status}: ${error}` };
}

/** One session a node holds, as `GET {node}/sessions` lists it (`{sessions: SessionSummary[]}`). */
export const sessionSummarySchema = z.looseObject({
  session_id: z.string().min(1),
  task_id: z.string(),
  attempt: z.number().int().min(0),
  status: z.string(),
});
export type SessionSummary = z.infer<typeof sessionSummarySchema>;
export const sessionListSchema = z.looseObject({ sessions: z.array(sessionSummarySchema) });

/** The body of every control-plane error answer. */
export const errorBodySchema = z.object({ error: z.string() });
