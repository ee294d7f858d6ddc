/**
 * Runtime selection: a task's `runtime` section (src/core/contracts/runtime.ts) over the node's defaults, then the
 * runtime it names. The containment settings are the node's: `binary` and `limits` only come from the node config, and
 * a task may tighten `isolation` and `network` but never loosen them (a submitter cannot switch the sandbox off).
 */
import { z } from 'zod';
import { formatIssues, taskRuntimeSchema, NETWORKS, RUNTIME_KINDS, type NetworkMode } from '../../core/contracts/index.ts';
import { ApptainerRuntime } from './apptainer.ts';
import { ContainerRuntime } from './container.ts';
import { parseMemory, type ResourceLimits } from './limits.ts';
import { LocalRuntime, type GatewayEndpoint } from './local.ts';
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
  /** Host paths every sandbox sees read-only at the same path (tools, datasets); node setting only. */
  read_only_paths: z.array(z.string().min(1)).optional(),
  /** Resource limits of each sandbox: cpus (fractions allowed), memory (bytes or `512m`, `2g`), pids. */
  limits: z.strictObject({
    cpus: z.number().positive().optional(),
    memory: z.union([z.number().int().positive(), z.string().min(1)]).optional().superRefine((m, ctx) => {
      if (m === undefined) return;
      try { parseMemory(m); } catch (error) { ctx.addIssue({ code: 'custom', message: (error as Error).message }); }
    }),
    pids: z.number().int().positive().optional(),
  }).optional(),
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
  const own = (raw ?? {}) as { isolation?: string; network?: NetworkMode };
  if (own.isolation === 'none' && defaults.isolation !== 'none') {
    throw new Error('invalid runtime section: isolation: a task cannot turn the sandbox off (runtime.isolation is the node\'s setting)');
  }
  const nodeNetwork = defaults.network ?? 'gateway';
  if (own.network !== undefined && NETWORKS.indexOf(own.network) > NETWORKS.indexOf(nodeNetwork)) {
    throw new Error(`invalid runtime section: network: a task may tighten the node's network (${nodeNetwork}), not loosen it to ${own.network}`);
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
  /** The gateway node as sandboxes reach it (`network: gateway`); absent = no tunnel (gateway behaves as none). */
  gateway?: GatewayEndpoint | null;
  runner?: CommandRunner;
  spawner?: ProcessSpawner;
}

/** The spec's limits in runtime units. */
export function resourceLimits(spec: Partial<RuntimeSpec>): ResourceLimits | undefined {
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
        extraPath: ctx.toolDirs, readOnlyPaths: spec.read_only_paths, limits: resourceLimits(spec), spawner: ctx.spawner,
      });
    case 'docker':
    case 'podman':
      if (!spec.image) throw new Error(`runtime ${spec.kind} needs an image`);
      return new ContainerRuntime({
        engine: spec.kind, sessionId: ctx.instanceKey, image: spec.image, network: spec.network, gateway: ctx.gateway, workDir: spec.work_dir,
        readOnlyMounts: [...ctx.toolDirs.map(installDir), ...(spec.read_only_paths ?? [])], runArgs: spec.run_args, limits: resourceLimits(spec), cli: spec.binary,
        hostRoot: ctx.workRoot, runner: ctx.runner, spawner: ctx.spawner,
      });
    case 'apptainer':
      if (!spec.image) throw new Error('runtime apptainer needs an image');
      return new ApptainerRuntime({
        sessionId: ctx.instanceKey, image: spec.image, cli: spec.binary, workRoot: ctx.workRoot, readOnlyMounts: [...ctx.toolDirs.map(installDir), ...(spec.read_only_paths ?? [])],
        runner: ctx.runner, spawner: ctx.spawner,
      });
  }
};

/** The install a tool directory belongs to (`<prefix>/node_modules/.bin` → `<prefix>`): what containers mount. */
function installDir(dir: string): string {
  return dir.endsWith('/node_modules/.bin') ? dir.slice(0, -'/node_modules/.bin'.length) : dir;
}

export type { Runtime } from './types.ts';
export type { GatewayEndpoint } from './local.ts';
export type { Isolation, NetworkMode } from '../../core/contracts/index.ts';
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
