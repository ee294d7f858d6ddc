/**
 * Runtime selection from a task's `runtime` section (docs/architecture.md#contracts): `{kind: local|docker|podman|apptainer, image?,
 * network?, isolation?, prepare?: PrepareAction[]}`.
 */
import { z } from 'zod';
import { ApptainerRuntime } from './apptainer.ts';
import { ContainerRuntime } from './container.ts';
import { LocalRuntime } from './local.ts';
import { destProblem } from './paths.ts';
import type { CommandRunner, ProcessSpawner, Runtime } from './types.ts';

/** An upload `dest`: relative to the runtime's work directory and never leaving it (see paths.ts `confineDest`). */
const confinedDestSchema = z.string().min(1).superRefine((dest, ctx) => {
  const problem = destProblem(dest);
  if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
});

export const PrepareActionSchema = z.union([
  z.object({ upload_file: z.object({ src: z.string().min(1), dest: confinedDestSchema }).strict() }).strict(),
  z.object({ upload_dir: z.object({ src: z.string().min(1), dest: confinedDestSchema }).strict() }).strict(),
  z.object({
    exec: z.object({
      command: z.string().min(1),
      timeout_s: z.number().positive().optional(),
      retries: z.number().int().min(0).optional(),
      backoff_ms: z.number().int().min(0).optional(),
    }).strict(),
  }).strict(),
]);
export type PrepareAction = z.infer<typeof PrepareActionSchema>;

export const RuntimeSpecSchema = z.object({
  kind: z.enum(['local', 'docker', 'podman', 'apptainer']).default('local'),
  image: z.string().min(1).optional(),
  network: z.string().min(1).optional(),
  isolation: z.enum(['auto', 'bwrap', 'none']).optional(),
  work_dir: z.string().min(1).optional(),
  run_args: z.array(z.string()).optional(),
  prepare: z.array(PrepareActionSchema).default([]),
}).passthrough();
export type RuntimeSpec = z.infer<typeof RuntimeSpecSchema>;

/** Parse a task's `runtime` section (undefined = local, no prepare). Throws Error with the zod issues on bad input. */
export function parseRuntimeSpec(raw: unknown): RuntimeSpec {
  const parsed = RuntimeSpecSchema.safeParse(raw ?? { kind: 'local' });
  if (!parsed.success) throw new Error(`invalid runtime section: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/** Host-side context a runtime needs besides its spec. */
export interface RuntimeContext {
  /** Distinguishes the session runtime from its evaluation runtime, e.g. `${session_id}` / `${session_id}:eval`. */
  instanceKey: string;
  /** Host parent of session directories. */
  workRoot: string;
  /** Directories added to PATH (local) or mounted read-only (containers): harness installs. */
  toolDirs: string[];
  runner?: CommandRunner;
  spawner?: ProcessSpawner;
}

export type RuntimeFactory = (spec: RuntimeSpec, ctx: RuntimeContext) => Runtime;

/** Build (not start) the runtime a spec names. Throws Error when a container kind has no `image`. */
export const createRuntime: RuntimeFactory = (spec, ctx) => {
  switch (spec.kind) {
    case 'local':
      return new LocalRuntime({ sessionId: ctx.instanceKey, workRoot: ctx.workRoot, isolation: spec.isolation, extraPath: ctx.toolDirs, spawner: ctx.spawner });
    case 'docker':
    case 'podman':
      if (!spec.image) throw new Error(`runtime ${spec.kind} needs an image`);
      return new ContainerRuntime({
        engine: spec.kind, sessionId: ctx.instanceKey, image: spec.image, network: spec.network, workDir: spec.work_dir,
        readOnlyMounts: ctx.toolDirs, runArgs: spec.run_args, runner: ctx.runner, spawner: ctx.spawner,
      });
    case 'apptainer':
      if (!spec.image) throw new Error('runtime apptainer needs an image');
      return new ApptainerRuntime({ sessionId: ctx.instanceKey, image: spec.image, workRoot: ctx.workRoot, readOnlyMounts: ctx.toolDirs, runner: ctx.runner, spawner: ctx.spawner });
  }
};

export type { Runtime } from './types.ts';
export { confineDest, destProblem } from './paths.ts';
