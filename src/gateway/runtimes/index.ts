/**
 * Runtime selection from a task's `runtime` section (docs/architecture.md#contracts): `{kind: local|docker|podman|apptainer, image?,
 * network?: none|gateway|host, isolation?: bwrap|none, binary?, limits?: {cpus?, memory?, pids?}, prepare?: PrepareAction[]}`.
 */
import { z } from 'zod';
import { ApptainerRuntime } from './apptainer.ts';
import { ContainerRuntime } from './container.ts';
import { parseMemory, type ResourceLimits } from './limits.ts';
import { LocalRuntime, type GatewayEndpoint } from './local.ts';
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
  /** none: only loopback; gateway (default): only loopback + a tunnel to the gateway node; host: the host's network. */
  network: z.enum(['none', 'gateway', 'host']).optional(),
  /** local only: bwrap (default, required) or none (no containment, chosen explicitly). */
  isolation: z.enum(['bwrap', 'none']).optional(),
  /** docker/podman/apptainer: the CLI to call (path or name); default the kind's name. */
  binary: z.string().min(1).optional(),
  /** Resource limits of the sandbox: cpus (fractions allowed), memory (bytes or `512m`, `2g`), pids. */
  limits: z.object({
    cpus: z.number().positive().optional(),
    memory: z.union([z.number().int().positive(), z.string().min(1)]).optional().superRefine((m, ctx) => {
      if (m === undefined) return;
      try { parseMemory(m); } catch (error) { ctx.addIssue({ code: 'custom', message: (error as Error).message }); }
    }),
    pids: z.number().int().positive().optional(),
  }).strict().optional(),
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
  /** The gateway node as sandboxes reach it (`network: gateway`); absent = no tunnel (gateway behaves as none). */
  gateway?: GatewayEndpoint | null;
  runner?: CommandRunner;
  spawner?: ProcessSpawner;
}

/** The spec's limits in runtime units. */
export function resourceLimits(spec: RuntimeSpec): ResourceLimits | undefined {
  const l = spec.limits;
  if (!l) return undefined;
  return {
    ...(l.cpus !== undefined ? { cpus: l.cpus } : {}),
    ...(l.memory !== undefined ? { memoryBytes: parseMemory(l.memory) } : {}),
    ...(l.pids !== undefined ? { pids: l.pids } : {}),
  };
}

export type RuntimeFactory = (spec: RuntimeSpec, ctx: RuntimeContext) => Runtime;

/** Build (not start) the runtime a spec names. Throws Error when a container kind has no `image`. */
export const createRuntime: RuntimeFactory = (spec, ctx) => {
  switch (spec.kind) {
    case 'local':
      return new LocalRuntime({
        sessionId: ctx.instanceKey, workRoot: ctx.workRoot, isolation: spec.isolation, network: spec.network, gateway: ctx.gateway,
        extraPath: ctx.toolDirs, limits: resourceLimits(spec), spawner: ctx.spawner,
      });
    case 'docker':
    case 'podman':
      if (!spec.image) throw new Error(`runtime ${spec.kind} needs an image`);
      return new ContainerRuntime({
        engine: spec.kind, sessionId: ctx.instanceKey, image: spec.image, network: spec.network, gateway: ctx.gateway, workDir: spec.work_dir,
        readOnlyMounts: ctx.toolDirs.map(installDir), runArgs: spec.run_args, limits: resourceLimits(spec), cli: spec.binary,
        runner: ctx.runner, spawner: ctx.spawner,
      });
    case 'apptainer':
      if (!spec.image) throw new Error('runtime apptainer needs an image');
      return new ApptainerRuntime({
        sessionId: ctx.instanceKey, image: spec.image, workRoot: ctx.workRoot, readOnlyMounts: ctx.toolDirs.map(installDir), cli: spec.binary,
        runner: ctx.runner, spawner: ctx.spawner,
      });
  }
};

/** The install a tool directory belongs to (`<prefix>/node_modules/.bin` → `<prefix>`): what containers mount. */
function installDir(dir: string): string {
  return dir.endsWith('/node_modules/.bin') ? dir.slice(0, -'/node_modules/.bin'.length) : dir;
}

export type { Runtime } from './types.ts';
export type { GatewayEndpoint, Isolation, NetworkMode } from './local.ts';
export { confineDest, destProblem } from './paths.ts';

/** How sessions of a runtime spec are contained, for run headers, summaries and `/health`. */
export interface SandboxDescription {
  kind: RuntimeSpec['kind'];
  /** local: 'bwrap' or 'none'; containers: the kind itself. */
  isolation: string;
  network: 'none' | 'gateway' | 'host';
  limits: { cpus?: number; memory?: string | number; pids?: number } | null;
}

/** Describe the containment of `spec` (the defaults filled in). */
export function describeSandbox(spec: Partial<RuntimeSpec>): SandboxDescription {
  const kind = spec.kind ?? 'local';
  const isolation = kind === 'local' ? (spec.isolation ?? 'bwrap') : kind;
  const network = isolation === 'none' ? 'host' : (spec.network ?? 'gateway');
  return { kind, isolation, network, limits: spec.limits ?? null };
}

/** One line for people: `bwrap sandbox, network gateway, limits memory=2g` / `NONE: harnesses run unconfined`. */
export function sandboxLine(d: SandboxDescription): string {
  if (d.isolation === 'none') return 'NONE (runtime.isolation: none / --no-sandbox): harnesses run as plain host processes with host network';
  const what = d.kind === 'local' ? 'bubblewrap sandbox' : `${d.kind} container`;
  const limits = d.limits ? `, limits ${Object.entries(d.limits).map(([k, v]) => `${k}=${v}`).join(' ')}` : '';
  return `${what}, network ${d.network}${limits}`;
}

/**
 * Refuse to start when the spec asks for a sandbox this host cannot make: the local runtime without bubblewrap.
 * @throws Error naming the fix (install bubblewrap, or say `runtime.isolation: none` / `--no-sandbox`).
 */
export function assertSandboxAvailable(spec: Partial<RuntimeSpec>, which: (bin: string) => string | null = (bin) => Bun.which(bin)): void {
  const d = describeSandbox(spec);
  if (d.kind === 'local' && d.isolation === 'bwrap' && which('bwrap') === null) {
    throw new Error(
      'bubblewrap (bwrap) is not installed, so harnesses cannot be sandboxed and this refuses to run untrusted tasks. ' +
      'Install it (Debian/Ubuntu: apt-get install bubblewrap) or, to run harnesses unconfined on purpose, set ' +
      'runtime.isolation: none (polar run: --no-sandbox).',
    );
  }
}
