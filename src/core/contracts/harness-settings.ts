/**
 * `agent.settings` of the `custom` harness (src/gateway/harnesses/custom.ts documents each key), here so the rollout
 * server refuses a task with bad settings at submit (runnableProblems) instead of every session failing at INIT.
 * The gateway-read keys (task-sampling.ts TASK_SAMPLING_KEYS) are not part of it: they never reach the harness.
 */
import { z } from 'zod';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const envName = z.string().regex(ENV_NAME, 'must be an environment variable name');

export const customSettingsSchema = z.strictObject({
  command: z.string().min(1).optional(),
  base_url_env: z.record(envName, z.string().regex(/^(\/.*)?$/, 'must be empty or a path starting with /')).default({}),
  api_key_env: z.array(envName).default([]),
  model_env: z.array(envName).default([]),
  env: z.record(envName, z.string()).default({}),
  files: z.record(z.string().min(1).refine((p) => !p.startsWith('/') && !p.split('/').includes('..'), 'must be a relative path inside HOME'), z.string()).default({}),
});
export type CustomSettings = z.infer<typeof customSettingsSchema>;
