/**
 * The SessionResult a gateway posts to its callback URL (`POST /callbacks/session_result` on the rollout server) and
 * stores, and the session statuses both sides speak. The trajectory is checked in outline only (its full shape is
 * src/core/records.ts `Trajectory`; the trace merger builds it).
 */
import { z } from 'zod';
import { parseOrThrow } from './issues.ts';

/** Every status a session passes through, in order (final: COMPLETED, ERROR, TIMEOUT). */
export const SESSION_STATUSES = ['REGISTERED', 'INITIALIZING', 'READY', 'RUNNING', 'POST_RUN', 'BUILDING', 'EVALUATING', 'COMPLETED', 'ERROR', 'TIMEOUT'] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];

/** Live statuses a node may report for a session it runs (final statuses come only with the SessionResult). */
export const LIVE_SESSION_STATUSES = ['INITIALIZING', 'READY', 'RUNNING', 'POST_RUN', 'BUILDING', 'EVALUATING'] as const;

/**
 * Final statuses of a SessionResult. CANCELLED: the rollout server cancelled the session (task cancel or early stop)
 * and it did not complete; its gateway's ERROR "cancelled" result is stored under this status.
 */
export const RESULT_STATUSES = ['COMPLETED', 'ERROR', 'TIMEOUT', 'CANCELLED'] as const;
export type ResultStatus = (typeof RESULT_STATUSES)[number];

/**
 * Per-stage timings of a session, in ms. `init_queue_ms`: from the node receiving the dispatch to the start of INIT
 * (time in the node's queue; 0 when INIT never started; absent from nodes before it was added), so `e2e_ms` ≈
 * init_queue + init + ready_queue + run + postrun + the wait for a POSTRUN worker.
 */
export const sessionTimingSchema = z.object({
  init_queue_ms: z.number().optional(),
  init_ms: z.number(),
  ready_queue_ms: z.number(),
  run_ms: z.number(),
  postrun_ms: z.number(),
  build_ms: z.number(),
  eval_ms: z.number(),
  e2e_ms: z.number(),
});
export type SessionTiming = z.infer<typeof sessionTimingSchema>;

export const sessionResultSchema = z.object({
  session_id: z.string().min(1),
  task_id: z.string().min(1),
  status: z.enum(RESULT_STATUSES),
  trajectory: z.looseObject({
    status: z.enum(['COMPLETED', 'ERROR', 'TIMEOUT']),
    traces: z.array(z.looseObject({ reward: z.number() })),
    metadata: z.looseObject({ attempt: z.number().int().min(0).optional() }),
  }),
  timing: sessionTimingSchema,
  node_id: z.string(),
  error: z.string().nullable(),
  /** The dispatch attempt that produced this result (absent = 0); the server ignores a result of a stale attempt. */
  attempt: z.number().int().min(0).optional(),
});

/** The attempt a result belongs to: `attempt`, else its trajectory's `metadata.attempt`, else 0. */
export function resultAttempt(result: { attempt?: number; trajectory: { metadata: { attempt?: unknown } } }): number {
  if (typeof result.attempt === 'number') return result.attempt;
  const own = result.trajectory.metadata.attempt;
  return typeof own === 'number' ? own : 0;
}

/** Parse a SessionResult in outline. @throws Error `invalid SessionResult: …`. */
export function parseSessionResultOutline(value: unknown): z.infer<typeof sessionResultSchema> {
  return parseOrThrow(sessionResultSchema, value, 'SessionResult');
}

/**
 * The `error` of a cancelled session, wherever it is written (the rollout server's placeholder, the node's result):
 * `cancelled`, or `cancelled: <reason>`, so a client can test `startswith("cancelled")` and reads the same text from both.
 */
export function cancelledText(reason: string | undefined): string {
  if (!reason) return 'cancelled';
  return reason.startsWith('cancelled') ? reason : `cancelled: ${reason}`;
}

/** Whether a result's `error` says the session was cancelled (`cancelled`, or `cancelled: <reason>`; cancelledText). */
export function isCancelledError(error: string | null | undefined): boolean {
  return error === 'cancelled' || (typeof error === 'string' && error.startsWith('cancelled: '));
}
