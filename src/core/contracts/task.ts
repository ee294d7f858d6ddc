/**
 * The TaskRequest: what a trainer submits (`POST /rollout/task/submit`) and what travels inside every dispatch to a
 * gateway. Field names follow Polar's `TaskRequest` (https://github.com/NVIDIA-NeMo/ProRL-Agent-Server, `src/polar`).
 * Strict at every depth the control plane owns: an unknown key is an error naming its path. `agent.settings`,
 * `evaluator.config` and `metadata` are open maps owned by the adapter, evaluator and trainer; `builder.config` is the
 * builders' chain-role options (src/trace/roles.ts), strict too.
 */
import { z } from 'zod';
import { parseOrThrow } from './issues.ts';
import { taskRuntimeSchema } from './runtime.ts';

export const BUILDER_STRATEGIES = ['per_request', 'prefix_merging'] as const;
export const builderNameSchema = z.enum(BUILDER_STRATEGIES);

/** The agent to run: a named harness adapter, or the `shell` harness with a raw command. */
export const agentSpecSchema = z
  .strictObject({
    harness: z.string().min(1).optional(),
    command: z.string().min(1).optional(),
    model_name: z.string().min(1),
    settings: z.record(z.string(), z.unknown()).optional(),
    env: z.record(z.string(), z.string()).optional(),
  })
  .refine((a) => a.harness !== undefined || a.command !== undefined, { message: 'agent needs a harness or a command' });

/**
 * `builder.config`: which chains training keeps and how side chains are rewarded (src/trace/roles.ts applies the
 * defaults: side keep, retries drop_duplicates, side_reward outcome).
 */
export const builderConfigSchema = z.strictObject({
  /** Side chains (another system prompt or tool set than the main conversation). */
  side: z.enum(['keep', 'drop']).optional(),
  /** Chains that start with a prompt sent before: keep all, drop those that are nothing but the re-sample, drop all. */
  retries: z.enum(['keep', 'drop_duplicates', 'drop']).optional(),
  /** A broadcast outcome reward reaches side chains (`outcome`) or gives them 0 (`zero`). */
  side_reward: z.enum(['outcome', 'zero']).optional(),
});

export const builderSpecSchema = z.strictObject({ strategy: builderNameSchema, config: builderConfigSchema.optional() });

export const evaluatorSpecSchema = z.strictObject({
  /** An evaluator name (EVALUATOR_NAMES in runnable.ts on a stock gateway). */
  strategy: z.string().min(1),
  config: z.record(z.string(), z.unknown()).optional(),
  /** Evaluate in a fresh runtime prepared like the session's, with the session's diff applied. */
  refresh_runtime: z.boolean().optional(),
});

/** Trainer-owned metadata; the named keys are read by the control plane, the rest travels untouched. */
export const taskMetadataSchema = z.looseObject({
  /** The trainer's label for the task's group (default the task_id); tasks may share it. */
  group_id: z.string().optional(),
  // A number is accepted (as /admin/policy_version accepts one) and kept as its decimal string.
  policy_version: z.union([z.string(), z.number()]).transform(String).optional(),
  /** Sent as `Authorization: Bearer …` to this task's callback_url; the control-plane token never is. */
  callback_token: z.string().min(1).optional(),
  rollout_step: z.number().int().optional(),
  /** Agent budget in seconds; starts at RUNNING. */
  agent_timeout: z.number().positive().optional(),
});

export const taskRequestSchema = z.strictObject({
  task_id: z.string().min(1).max(200),
  instruction: z.string().min(1),
  /** Samples (sessions) to run. */
  num_samples: z.number().int().min(1).max(10_000),
  /** Total budget per session in seconds; starts at INIT. */
  timeout_seconds: z.number().positive(),
  agent: agentSpecSchema,
  builder: builderSpecSchema,
  runtime: taskRuntimeSchema.optional(),
  evaluator: evaluatorSpecSchema.optional(),
  callback_url: z.url().optional(),
  dispatch_priority: z.number().int().min(0).max(100).optional(),
  early_stop_min_usable_sessions: z.number().int().min(1).optional(),
  metadata: taskMetadataSchema.optional(),
});

export type BuilderName = z.infer<typeof builderNameSchema>;
export type AgentSpec = z.infer<typeof agentSpecSchema>;
export type TaskRequest = z.infer<typeof taskRequestSchema>;

/** Parse a TaskRequest. @throws Error `invalid TaskRequest: path: message; …` on bad input. */
export function parseTaskRequest(value: unknown): TaskRequest {
  return parseOrThrow(taskRequestSchema, value, 'TaskRequest');
}
