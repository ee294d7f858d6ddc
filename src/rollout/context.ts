/**
 * What the parts of the rollout server (./server.ts) share: the store, clock, events and metrics, the status sets,
 * and the HTTP error type its handlers throw.
 */
import type { Clock } from '../core/clock.ts';
import type { EventHub } from '../observe/events.ts';
import type { RolloutMetrics } from '../observe/metrics.ts';
import type { RolloutStore } from './store-port.ts';

/** Statuses after which a session never changes again (rollout-side CANCELLED included). */
export const FINAL_SESSION: ReadonlySet<string> = new Set(['COMPLETED', 'ERROR', 'TIMEOUT', 'CANCELLED']);
/** The status of a task whose sessions are still running. */
export const ACTIVE_TASK = 'RUNNING';

export interface RolloutContext {
  readonly store: RolloutStore;
  readonly clock: Clock;
  readonly events: EventHub;
  readonly metrics: RolloutMetrics;
  /** True once `stop()` was called. */
  stopped(): boolean;
}

/** Thrown by request handlers; rendered as `{error}` with this HTTP status. */
export class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
