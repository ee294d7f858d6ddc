/**
 * Gateway ↔ rollout server control plane: node registration (`POST /nodes/register`), heartbeats
 * (`POST /nodes/{id}/heartbeat`), stage counts and capacity, and the headers every control-plane call carries. What a
 * node sends is strict at every depth (an unknown key is a 400 naming its path, as on every other endpoint); only
 * the server's answers are read loosely.
 */
import { z } from 'zod';

export const stageCountsSchema = z.strictObject({
  init: z.number().int().min(0),
  ready: z.number().int().min(0),
  running: z.number().int().min(0),
  postrun: z.number().int().min(0),
  queued: z.number().int().min(0),
});

/** Stage sizes of a gateway node (its worker pools). */
export const nodeCapacitySchema = z.strictObject({
  init_workers: z.number().int().min(0),
  ready_buffer: z.number().int().min(0),
  max_run_workers: z.number().int().min(0),
  postrun_workers: z.number().int().min(0),
});

export const nodeRegistrationSchema = z.strictObject({
  node_id: z.string().min(1).max(200),
  url: z.url(),
  capacity: nodeCapacitySchema,
});

/**
 * The INIT pool and READY buffer a node uses now. With `pool_sizing: auto` they are sized from observed stage times
 * (src/gateway/pool-sizing.ts) and may be below the registered capacity's, which the scheduler must then use.
 */
export const poolSizesSchema = z.strictObject({
  init_workers: z.number().int().min(0),
  ready_buffer: z.number().int().min(0),
});

/**
 * A heartbeat: stage counts, and optionally the live status of each session the node holds (session_id → status);
 * unknown statuses are ignored so a newer node can report more. The server takes a session id listed here as seen by
 * the node when the counts were taken (a dispatch not listed yet still counts as queued on the node).
 */
export const heartbeatSchema = z.strictObject({
  stages: stageCountsSchema,
  sessions: z.record(z.string().min(1), z.string()).optional(),
  /** Whether the node's inference engine answers its health checks (absent: the node does not check). */
  engine_ok: z.boolean().optional(),
  /** The pools in use now when they differ from the registered capacity (`pool_sizing: auto`); absent: the capacity's. */
  pools: poolSizesSchema.optional(),
});

/**
 * `POST /nodes/{id}/handback`: a node whose engine has been down for `gateway.engine_handback_s` gives back sessions
 * it holds but has not started (queued, or READY with no harness started); the server queues again those it
 * dispatched there and still has open, and answers `{node_id, requeued: [ids]}`. The node drops exactly those.
 */
export const handbackSchema = z.strictObject({
  session_ids: z.array(z.string().min(1).max(512)).min(1).max(10_000),
  /** Why (logged and in the server's event), e.g. "engine down for 60 s: connect ECONNREFUSED". */
  reason: z.string().max(2000).optional(),
});
export const handbackAnswerSchema = z.object({ node_id: z.string(), requeued: z.array(z.string()) });

export type StageCounts = z.infer<typeof stageCountsSchema>;
export type NodeCapacity = z.infer<typeof nodeCapacitySchema>;
export type NodeRegistration = z.infer<typeof nodeRegistrationSchema>;
export type Heartbeat = z.infer<typeof heartbeatSchema>;
export type PoolSizesReport = z.infer<typeof poolSizesSchema>;
export type Handback = z.infer<typeof handbackSchema>;
export type HandbackAnswer = z.infer<typeof handbackAnswerSchema>;

/** Headers of a JSON call between control-plane parties: `authorization: Bearer <token>` when a token is set. */
export function controlPlaneHeaders(token: string | null | undefined): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  return headers;
}
