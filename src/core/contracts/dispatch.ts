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

/** A refused dispatch: rendered by the node as `{error: message}` with `status`. */
export class DispatchError extends Error {
  override name = 'DispatchError';
  constructor(message: string, readonly status: DispatchRefusal) {
    super(message);
  }
}

/** The body of every control-plane error answer. */
export const errorBodySchema = z.object({ error: z.string() });
