/** `rollout`: the rollout server (task intake, scheduling, callbacks, trainer API). docs/architecture.md#the-rollout-server. */
import { z } from 'zod';

/** The `rollout` section. */
export const rolloutSchema = z
  .strictObject({
    /** Listen address. */
    host: z.string().min(1).default('127.0.0.1').describe('Listen address of the rollout server.'),
    /** Listen port; 0 picks a free one. */
    port: z.number().int().min(0).max(65535).default(8100).describe('Listen port of the rollout server; 0 picks a free port.'),
    /** SQLite file of tasks, sessions, results and groups; null = `store.path`. */
    db: z.string().min(1).nullable().default(null).describe('SQLite file for tasks, sessions, results and groups; null uses `store.path`.'),
    /** A node without a heartbeat for this long is unhealthy and its sessions are re-dispatched. */
    heartbeat_timeout_s: z.number().positive().default(30).describe('Seconds without a heartbeat after which a node is unhealthy and its unfinished sessions are re-dispatched.'),
    /** Secret. Bearer token required on node, dispatch and callback calls; env POLAR_CONTROL_TOKEN fills it when unset. */
    control_plane_token: z.string().min(1).nullable().default(null).describe('Secret: bearer token required on node, dispatch and callback calls; null disables the check. When null, the env var POLAR_CONTROL_TOKEN (else POLAR_CONTROL_PLANE_TOKEN) is used if set. Callers send it as `Authorization: Bearer <token>` or `x-polar-control-token: <token>`. Printed redacted.'),
    /** Allow a non-loopback listen address without control_plane_token (anyone on the network may submit tasks). */
    insecure_no_token: z.boolean().default(false).describe('Allow `polar serve`, `polar rollout` and `polar gateway` to listen on a non-loopback address without a control-plane token (same as `--insecure-no-token`). Anyone who reaches the port can then submit tasks whose prepare actions and harness commands run on the gateway hosts; they refuse to start otherwise.'),
    /** Retries of a failed callback to a node or trainer (with backoff). */
    callback_retries: z.number().int().min(0).default(12).describe('Retries of a trainer callback that failed, waiting 0.5 s doubling to at most 60 s between tries (12: about 6 minutes); then it is given up, logged and counted (polar_rollout_trainer_callbacks_total{outcome="failed"}), and the task view shows it (callback.state failed).'),
  })
  .describe('The rollout server: task intake, node registry, scheduling, persistence and the trainer API.');

export type RolloutConfig = z.output<typeof rolloutSchema>;
