/**
 * A task's `runtime` section (the sandbox its sessions run in): `{kind: local|docker|podman|apptainer, image?,
 * network?, isolation?, work_dir?, run_args?, prepare?: PrepareAction[]}`. Strict: an unknown key is an error naming
 * its path. The gateway merges its node defaults under it (src/gateway/runtimes/index.ts `parseRuntimeSpec`).
 */
import { z } from 'zod';
import { destProblem } from './paths.ts';

/** Sandbox kinds a gateway can start (src/gateway/runtimes/). */
export const RUNTIME_KINDS = ['local', 'docker', 'podman', 'apptainer'] as const;
export type RuntimeKind = (typeof RUNTIME_KINDS)[number];

/** Isolation of the local runtime: a bubblewrap sandbox (the default; refused when bwrap is missing), or none. */
export const ISOLATIONS = ['bwrap', 'none'] as const;
export type Isolation = (typeof ISOLATIONS)[number];

/**
 * Network of a sandbox, from the strictest: `none` (loopback only), `gateway` (loopback plus a tunnel to the gateway
 * node's model API; the default), `host` (the host's network).
 */
export const NETWORKS = ['none', 'gateway', 'host'] as const;
export type NetworkMode = (typeof NETWORKS)[number];

/** An upload `dest`: relative to the runtime's work directory and never leaving it (paths.ts `confineDest`). */
const confinedDestSchema = z.string().min(1).superRefine((dest, ctx) => {
  const problem = destProblem(dest);
  if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
});

/** `exec` step: `command` run by the shell, at most `timeout_s` seconds a try, `1 + retries` tries, waits `backoff_ms · 2^attempt` ms between (src/gateway/prepare.ts). */
export const execStepSchema = z.strictObject({
  command: z.string().min(1),
  timeout_s: z.number().positive().optional(),
  retries: z.number().int().min(0).optional(),
  backoff_ms: z.number().int().min(0).optional(),
});

/** One step run in INIT before the harness: copy a host file or directory in, or run a command (retried). */
export const prepareActionSchema = z.union([
  z.strictObject({ upload_file: z.strictObject({ src: z.string().min(1), dest: confinedDestSchema }) }),
  z.strictObject({ upload_dir: z.strictObject({ src: z.string().min(1), dest: confinedDestSchema }) }),
  z.strictObject({ exec: execStepSchema }),
]);
export type PrepareAction = z.infer<typeof prepareActionSchema>;

/** The `runtime` section of a TaskRequest. */
export const taskRuntimeSchema = z.strictObject({
  kind: z.enum(RUNTIME_KINDS),
  /** Container image (docker/podman) or SIF file (apptainer). */
  image: z.string().min(1).optional(),
  /** A task may tighten the node's network (e.g. `none`), never loosen it. */
  network: z.enum(NETWORKS).optional(),
  /** A task may ask for the sandbox (`bwrap`), never turn off the node's. */
  isolation: z.enum(ISOLATIONS).optional(),
  work_dir: z.string().min(1).optional(),
  run_args: z.array(z.string()).optional(),
  prepare: z.array(prepareActionSchema).optional(),
});
export type TaskRuntime = z.infer<typeof taskRuntimeSchema>;
