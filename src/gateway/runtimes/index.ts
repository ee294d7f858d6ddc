/**
 * Runtime selection: a task's `runtime` section (src/core/contracts/runtime.ts) over the node's defaults, then the
 * runtime it names.
 */
import { z } from 'zod';
import { formatIssues, taskRuntimeSchema, RUNTIME_KINDS } from '../../core/contracts/index.ts';
import { ApptainerRuntime } from './apptainer.ts';
import { ContainerRuntime } from './container.ts';
import { LocalRuntime } from './local.ts';
import type { CommandRunner, ProcessSpawner, Runtime } from './types.ts';

export { prepareActionSchema as PrepareActionSchema, type PrepareAction } from '../../core/contracts/index.ts';

/**
 * What a session's runtime is built from: the task's section merged over the node's defaults. `binary` (the runtime
 * CLI, e.g. `/opt/bin/podman`) is a node setting only (config `runtime.binary`): a task cannot name host programs.
 */
export const RuntimeSpecSchema = taskRuntimeSchema.extend({
  kind: z.enum(RUNTIME_KINDS).default('local'),
  prepare: taskRuntimeSchema.shape.prepare.unwrap().default([]),
  binary: z.string().min(1).optional(),
});
export type RuntimeSpec = z.infer<typeof RuntimeSpecSchema>;

/**
 * The runtime spec of a session: the task's section (validated by the contract, so a task cannot set `binary`) over
 * the node's defaults. Undefined = the defaults (local, no prepare).
 * @throws Error `invalid runtime section: path: message` on bad input.
 */
export function parseRuntimeSpec(raw: unknown, defaults: Partial<RuntimeSpec> = {}): RuntimeSpec {
  if (raw !== undefined) {
    // Dispatched tasks always name the kind (the TaskRequest contract requires it); node-local callers may omit it.
    const own = taskRuntimeSchema.partial({ kind: true }).safeParse(raw);
    if (!own.success) throw new Error(`invalid runtime section: ${formatIssues(own.error)}`);
  }
  const parsed = RuntimeSpecSchema.safeParse({ ...defaults, ...((raw as object | undefined) ?? {}) });
  if (!parsed.success) throw new Error(`invalid runtime section: ${formatIssues(parsed.error)}`);
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
        engine: spec.kind, sessionId: ctx.instanceKey, image: spec.image, network: spec.network, workDir: spec.work_dir, cli: spec.binary,
        readOnlyMounts: ctx.toolDirs, runArgs: spec.run_args, runner: ctx.runner, spawner: ctx.spawner,
      });
    case 'apptainer':
      if (!spec.image) throw new Error('runtime apptainer needs an image');
      return new ApptainerRuntime({ sessionId: ctx.instanceKey, image: spec.image, cli: spec.binary, workRoot: ctx.workRoot, readOnlyMounts: ctx.toolDirs, runner: ctx.runner, spawner: ctx.spawner });
  }
};

export type { Runtime } from './types.ts';
export { confineDest, destProblem } from './paths.ts';
