/**
 * Strict zod schemas for what crosses the rollout server's boundary: TaskRequest (docs/architecture.md#data-model), SessionResult,
 * node registration and heartbeats, and simulator behaviour scripts (docs/architecture.md#contracts).
 * Unknown keys inside `settings`, `config`, `metadata` and runtime specs pass through: they belong to other modules.
 */
import { z } from 'zod';
import type { SessionResult, TaskRequest } from '../core/records.ts';

const builderName = z.enum(['per_request', 'prefix_merging']);

export const agentSpecSchema = z
  .object({
    harness: z.string().min(1).optional(),
    command: z.string().min(1).optional(),
    model_name: z.string().min(1),
    settings: z.record(z.string(), z.unknown()).optional(),
    env: z.record(z.string(), z.string()).optional(),
  })
  .refine((a) => a.harness !== undefined || a.command !== undefined, { message: 'agent needs a harness or a command' });

/** A TaskRequest as a trainer submits it. Source: docs/architecture.md#data-model, Polar `TaskRequest`. */
export const taskRequestSchema = z.object({
  task_id: z.string().min(1).max(200),
  instruction: z.string().min(1),
  num_samples: z.number().int().min(1).max(10_000),
  timeout_seconds: z.number().positive(),
  agent: agentSpecSchema,
  builder: z.object({ strategy: builderName, config: z.record(z.string(), z.unknown()).optional() }),
  runtime: z.looseObject({ kind: z.string().min(1) }).optional(),
  evaluator: z
    .object({ strategy: z.string().min(1), config: z.record(z.string(), z.unknown()).optional(), refresh_runtime: z.boolean().optional() })
    .optional(),
  callback_url: z.url().optional(),
  dispatch_priority: z.number().int().optional(),
  early_stop_min_usable_sessions: z.number().int().min(1).optional(),
  metadata: z
    .looseObject({
      /** The trainer's label for the task's group (default the task_id); tasks may share it. */
      group_id: z.string().optional(),
      // A number is accepted (as /admin/policy_version accepts one) and kept as its decimal string.
      policy_version: z.union([z.string(), z.number()]).transform(String).optional(),
      /** Sent as `Authorization: Bearer …` to this task's callback_url; the control-plane token never is. */
      callback_token: z.string().min(1).optional(),
      rollout_step: z.number().int().optional(),
      agent_timeout: z.number().positive().optional(),
    })
    .optional(),
});

/** Parse a TaskRequest; throws a readable Error (path: message; …) on bad input. */
export function parseTaskRequest(value: unknown): TaskRequest {
  const parsed = taskRequestSchema.safeParse(value);
  if (!parsed.success) throw new Error(`invalid TaskRequest: ${formatIssues(parsed.error)}`);
  return parsed.data as TaskRequest;
}

const timingSchema = z.object({
  init_ms: z.number(),
  ready_queue_ms: z.number(),
  run_ms: z.number(),
  postrun_ms: z.number(),
  build_ms: z.number(),
  eval_ms: z.number(),
  e2e_ms: z.number(),
});

/** A SessionResult as a gateway posts it to `/callbacks/session_result`; the trajectory is checked only in outline. */
export const sessionResultSchema = z.object({
  session_id: z.string().min(1),
  task_id: z.string().min(1),
  status: z.enum(['COMPLETED', 'ERROR', 'TIMEOUT', 'CANCELLED']),
  trajectory: z.looseObject({
    status: z.enum(['COMPLETED', 'ERROR', 'TIMEOUT']),
    traces: z.array(z.looseObject({ reward: z.number() })),
    metadata: z.looseObject({}),
  }),
  timing: timingSchema,
  node_id: z.string(),
  error: z.string().nullable(),
});

export function parseSessionResult(value: unknown): SessionResult {
  const parsed = sessionResultSchema.safeParse(value);
  if (!parsed.success) throw new Error(`invalid SessionResult: ${formatIssues(parsed.error)}`);
  return parsed.data as unknown as SessionResult;
}

const stageCountsSchema = z.object({
  init: z.number().int().min(0),
  ready: z.number().int().min(0),
  running: z.number().int().min(0),
  postrun: z.number().int().min(0),
  queued: z.number().int().min(0),
});

const capacitySchema = z.object({
  init_workers: z.number().int().min(0),
  ready_buffer: z.number().int().min(0),
  max_run_workers: z.number().int().min(0),
  postrun_workers: z.number().int().min(0),
});

export const nodeRegistrationSchema = z.object({
  node_id: z.string().min(1).max(200),
  url: z.url(),
  capacity: capacitySchema,
});

/** Live statuses a node may report for a session it runs (final statuses come only with the SessionResult). */
export const LIVE_SESSION_STATUSES = ['INITIALIZING', 'READY', 'RUNNING', 'POST_RUN', 'BUILDING', 'EVALUATING'] as const;

/**
 * `POST /nodes/{id}/heartbeat`: stage counts, and optionally the live status of each session the node holds
 * (session_id → status); unknown statuses are ignored so a newer node can report more.
 */
export const heartbeatSchema = z.object({
  stages: stageCountsSchema,
  sessions: z.record(z.string().min(1), z.string()).optional(),
});

export type StageCounts = z.infer<typeof stageCountsSchema>;
export type NodeCapacity = z.infer<typeof capacitySchema>;

const simStepSchema = z.union([
  z.strictObject({ think: z.string().optional(), shell: z.string().min(1) }),
  z.strictObject({ think: z.string().optional(), say: z.string().min(1) }),
]);

/** Simulator behaviour script (docs/architecture.md#contracts): weighted variants of scripted shell/say steps. */
export const simScriptSchema = z.object({
  variants: z
    .record(z.string(), z.object({ weight: z.number().positive(), steps: z.array(simStepSchema).min(1) }))
    .refine((v) => Object.keys(v).length > 0, { message: 'at least one variant' }),
});

export type SimScript = z.infer<typeof simScriptSchema>;

/** `a.b: message; c: message` from a zod error. */
export function formatIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`).join('; ');
}
