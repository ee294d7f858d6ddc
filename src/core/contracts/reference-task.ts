/**
 * TaskRequest intake for both spellings: ours and the Python Polar's (NVIDIA-NeMo/ProRL-Agent-Server `src/polar`:
 * `rollout/models.py` TaskRequest, `agent/models.py` AgentSpec, `runtime/models.py` RuntimeSpec/PrepareAction,
 * `trajectory/models.py` StrategySpec/EvaluatorSpec), so trainer bridges written for it submit unchanged.
 *
 * Every object is strict: an unknown key is a 400 naming its path. Free-form maps stay free (`metadata`,
 * `agent.settings`, `agent.env`, `builder.config`, `evaluator.config`). A reference field this server cannot honour
 * (`agent.import_path`, `runtime.gpus`, …) is accepted only at its "nothing" value (null, 0, [], {}, or the reference
 * default), which a pydantic `model_dump()` sends; any other value is a 400 naming it, never dropped silently.
 *
 * Reference defaults filled here: num_samples 1, timeout_seconds 600, builder per_request, runtime.backend docker,
 * agent.model_name `default` (the gateway sends the engine's served model whatever the harness names).
 */
import { z } from 'zod';
import { formatIssues } from './issues.ts';
import { execStepSchema } from './runtime.ts';
import { parseTaskRequest, type TaskRequest } from './task.ts';

/** What the reference fills when a TaskRequest leaves it out. Source: ProRL-Agent-Server src/polar/rollout/models.py. */
export const REFERENCE_DEFAULTS = { num_samples: 1, timeout_seconds: 600, builder: 'per_request', backend: 'docker', model_name: 'default' } as const;

const freeMap = z.record(z.string(), z.unknown());
const stringMap = z.record(z.string(), z.string());

/** A field we accept only when it carries the reference's "nothing" value. */
const unsupported = z.unknown().optional();

/** Ours `{upload_file:{src,dest}}` / `{exec:{…}}` or the reference's `{type, source, target, command, cwd, env, …}`. */
const prepareActionSchema = z.union([
  z.strictObject({ upload_file: z.strictObject({ src: z.string().min(1), dest: z.string().min(1) }) }),
  z.strictObject({ upload_dir: z.strictObject({ src: z.string().min(1), dest: z.string().min(1) }) }),
  z.strictObject({ exec: execStepSchema }),
  z.strictObject({
    type: z.enum(['upload_file', 'upload_dir', 'exec']),
    source: z.string().nullish(),
    target: z.string().nullish(),
    command: z.string().nullish(),
    cwd: z.string().nullish(),
    env: stringMap.nullish(),
    max_attempts: z.number().int().min(1).max(10).default(1),
    retry_backoff_seconds: z.number().min(0).max(60).default(0),
  }),
]);

const runtimeSchema = z.strictObject({
  // ours
  kind: z.enum(['local', 'docker', 'podman', 'apptainer']).optional(),
  image: z.string().trim().min(1).nullish(),
  network: z.string().min(1).nullish(),
  isolation: z.enum(['auto', 'bwrap', 'none']).optional(),
  work_dir: z.string().trim().min(1).optional(),
  run_args: z.array(z.string()).optional(),
  prepare: z.array(prepareActionSchema).nullish(),
  // reference spellings
  backend: z.enum(['docker', 'apptainer']).optional(),
  workdir: z.string().trim().min(1).nullish(),
  // reference fields accepted only at their default
  env: unsupported,
  eval_prepare: unsupported,
  direct_exec_init_command: unsupported,
  cpus: unsupported,
  memory_mb: unsupported,
  storage_mb: unsupported,
  gpus: unsupported,
  allow_internet: unsupported,
  internet_volumes: unsupported,
  import_path: unsupported,
  kwargs: unsupported,
});

const agentSchema = z.strictObject({
  harness: z.string().min(1).nullish(),
  command: z.string().min(1).optional(),
  model_name: z.string().min(1).nullish(),
  settings: freeMap.optional(),
  env: stringMap.optional(),
  custom_shell: z.strictObject({ command: z.string().min(1), cwd: z.string().min(1).nullish(), env: stringMap.nullish() }).nullish(),
  import_path: unsupported,
  mcp_servers: unsupported,
  skills_path: unsupported,
});

const wireTaskSchema = z.strictObject({
  task_id: z.string(),
  instruction: z.string(),
  num_samples: z.number().int().min(1).default(REFERENCE_DEFAULTS.num_samples),
  timeout_seconds: z.number().positive().default(REFERENCE_DEFAULTS.timeout_seconds),
  agent: agentSchema,
  builder: z.strictObject({ strategy: z.string().min(1), config: freeMap.optional() }).nullish(),
  runtime: runtimeSchema.nullish(),
  evaluator: z.strictObject({ strategy: z.string().min(1), config: freeMap.optional(), env: unsupported, refresh_runtime: z.boolean().optional() }).nullish(),
  callback_url: z.string().nullish(),
  dispatch_priority: z.number().int().min(0).max(100).optional(),
  early_stop_min_usable_sessions: z.number().int().min(1).nullish(),
  metadata: freeMap.nullish(),
});

type WireTask = z.output<typeof wireTaskSchema>;

/** The reference's "nothing" value of each unsupported field, and why we cannot honour another. */
const UNSUPPORTED: Record<string, { empty: (v: unknown) => boolean; why: string }> = {
  'agent.import_path': { empty: isNothing, why: 'Python harness classes cannot run here; use agent.harness or agent.command' },
  'agent.mcp_servers': { empty: isNothing, why: 'MCP servers are not wired into harnesses; configure them in the harness settings' },
  'agent.skills_path': { empty: isNothing, why: 'skills are not installed into harnesses' },
  'runtime.env': { empty: isNothing, why: 'set agent.env (harness) or export variables in a prepare exec' },
  'runtime.eval_prepare': { empty: isNothing, why: 'evaluation runs in the session runtime or, with evaluator.refresh_runtime, a fresh one prepared by runtime.prepare' },
  'runtime.direct_exec_init_command': { empty: isNothing, why: 'there is no Apptainer direct-exec broker' },
  'runtime.cpus': { empty: isNothing, why: 'no resource limits; pass them in runtime.run_args (docker/podman)' },
  'runtime.memory_mb': { empty: isNothing, why: 'no resource limits; pass them in runtime.run_args (docker/podman)' },
  'runtime.storage_mb': { empty: isNothing, why: 'no resource limits; pass them in runtime.run_args (docker/podman)' },
  'runtime.gpus': { empty: (v) => isNothing(v) || v === 0, why: 'no GPU passthrough; pass it in runtime.run_args (docker/podman)' },
  'runtime.allow_internet': { empty: (v) => isNothing(v) || v === true, why: 'use runtime.network (e.g. "none")' },
  'runtime.internet_volumes': { empty: isNothing, why: 'no internet-only volumes' },
  'runtime.import_path': { empty: isNothing, why: 'Python runtime classes cannot run here; runtime.kind is local, docker, podman or apptainer' },
  'runtime.kwargs': { empty: isNothing, why: 'no backend kwargs; docker/podman take runtime.run_args' },
  'evaluator.env': { empty: isNothing, why: 'evaluators get no extra environment; put it in evaluator.config' },
  'metadata.eval_sampling_seed_base': { empty: isNothing, why: 'harnesses here take no per-sample sampling seed' },
};

function isNothing(value: unknown): boolean {
  if (value === null || value === undefined) return true;
  if (Array.isArray(value)) return value.length === 0;
  if (typeof value === 'object') return Object.keys(value).length === 0;
  return false;
}

function get(root: Record<string, unknown>, path: string): unknown {
  let at: unknown = root;
  for (const key of path.split('.')) at = at && typeof at === 'object' ? (at as Record<string, unknown>)[key] : undefined;
  return at;
}

function shellQuote(s: string): string {
  return `'${s.replaceAll("'", "'\\''")}'`;
}

/** `cd DIR && K=V … sh -c` prefix for a command with the reference's cwd/env. */
function withCwdEnv(command: string, cwd: string | null | undefined, env: Record<string, string> | null | undefined): string {
  const exports = Object.entries(env ?? {}).map(([k, v]) => {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) throw new Error(`invalid environment variable name ${JSON.stringify(k)}`);
    return `export ${k}=${shellQuote(v)}; `;
  });
  return `${cwd ? `cd ${shellQuote(cwd)} && ` : ''}${exports.join('')}${command}`;
}

/**
 * A reference upload target made relative to the work directory: `/w/x.py` with workdir `/w` → `x.py`, `/w` or `/w/`
 * itself → `.`; a relative target stays. @throws Error for an absolute target outside the work directory (uploads
 * never leave it here).
 */
export function relativeTarget(target: string, workdir: string | null | undefined): string {
  if (!target.startsWith('/')) return target;
  const base = workdir ? workdir.replace(/\/+$/, '') : null;
  const path = target.length > 1 ? target.replace(/\/+$/, '') : target;
  if (base !== null && path === (base === '' ? '/' : base)) return '.';
  if (base !== null && path.startsWith(`${base}/`)) return path.slice(base.length + 1);
  throw new Error(`absolute upload target ${JSON.stringify(target)} is outside ${base ? `runtime.workdir ${JSON.stringify(base)}` : 'the work directory (no runtime.workdir set)'}; give it relative to the work directory`);
}

type Issue = { path: string; message: string };

const escapeRegex = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The reference's test_on_output config (`test_command`, `test_timeout`, `expected_output_json: {test: "PASSED" |
 * "FAILED"}`, graded on `PASSED name` / `FAILED name` lines of the output) in ours: `command`, `timeout_s`, and
 * `expect_output_regex` requiring each expected line (multiline lookaheads). A config that already names `command` is
 * ours and stays as it is; the reference's other keys (repo_dir, patch_command, …) are kept and ignored by ours.
 */
function testOnOutputConfig(config: Record<string, unknown>): Record<string, unknown> {
  if (config.command !== undefined || typeof config.test_command !== 'string') return config;
  const out: Record<string, unknown> = { ...config, command: config.test_command };
  if (typeof config.test_timeout === 'number' && config.test_timeout > 0) out.timeout_s = config.test_timeout;
  const expected = config.expected_output_json;
  if (expected && typeof expected === 'object' && !Array.isArray(expected) && Object.keys(expected).length > 0) {
    out.expect_output_regex = Object.entries(expected).map(([name, status]) => `(?=[\\s\\S]*^${escapeRegex(String(status))} ${escapeRegex(name)}\\s*$)`).join('');
  }
  return out;
}

/** The reference harbor evaluator's defaults (trajectory/evaluator/harbor.py) for the keys accepted only at them. */
const HARBOR_REFERENCE_DEFAULTS: Record<string, unknown> = {
  tests_target: '/tests', verifier_dir: '/logs/verifier', test_command: 'bash /tests/test.sh', upload_attempts: 3, upload_retry_backoff_seconds: 0.1,
};

/**
 * The reference's harbor config (`tests_dir`, `verifier_timeout`, `tests_target`, `verifier_dir`, `test_command`,
 * `upload_attempts`, `upload_retry_backoff_seconds`) in ours: `verifier_timeout` → `timeout_s`; the others are accepted
 * only at the reference's defaults, which are what this evaluator does (tests at /tests, `bash /tests/test.sh`, the
 * reward under /logs/verifier; uploads are local copies with nothing to retry), and dropped. Pushes issues for others.
 */
function harborConfig(config: Record<string, unknown>, issues: Issue[]): Record<string, unknown> {
  const out: Record<string, unknown> = { ...config };
  if (out.verifier_timeout !== undefined) {
    if (out.timeout_s !== undefined) issues.push({ path: 'evaluator.config.verifier_timeout', message: 'conflicts with evaluator.config.timeout_s; give one' });
    else out.timeout_s = out.verifier_timeout;
    delete out.verifier_timeout;
  }
  for (const [key, value] of Object.entries(HARBOR_REFERENCE_DEFAULTS)) {
    if (!(key in out)) continue;
    const given = typeof out[key] === 'string' && key !== 'test_command' ? (out[key] as string).replace(/(.)\/+$/, '$1') : out[key];
    if (given !== value && out[key] !== null) issues.push({ path: `evaluator.config.${key}`, message: `only the reference default ${JSON.stringify(value)} is supported (this evaluator runs Harbor's own layout)` });
    delete out[key];
  }
  return out;
}

/** Our runtime section from either spelling. Pushes issues instead of throwing. */
function toOurRuntime(runtime: NonNullable<WireTask['runtime']>, issues: Issue[]): Record<string, unknown> {
  if (runtime.kind !== undefined && runtime.backend !== undefined && runtime.kind !== runtime.backend) {
    issues.push({ path: 'runtime.backend', message: `conflicts with runtime.kind ${JSON.stringify(runtime.kind)}; give one` });
  }
  if (runtime.work_dir !== undefined && runtime.workdir != null && runtime.work_dir !== runtime.workdir) {
    issues.push({ path: 'runtime.workdir', message: 'conflicts with runtime.work_dir; give one' });
  }
  if (runtime.kind === undefined && runtime.backend !== undefined && !runtime.image) {
    // The reference's RuntimeSpec requires an image; without one the session could only fail in INIT on a node.
    issues.push({ path: 'runtime.image', message: `required with runtime.backend ${JSON.stringify(runtime.backend)} (the reference RuntimeSpec requires it); leave runtime out to run on the gateway node's own runtime` });
  }
  const workdir = runtime.work_dir ?? runtime.workdir ?? undefined;
  // The reference's backend defaults to docker; a runtime of ours names its kind (local when it names neither and no image).
  const kind = runtime.kind ?? runtime.backend ?? (runtime.image ? REFERENCE_DEFAULTS.backend : 'local');
  const prepare = (runtime.prepare ?? []).map((action, i) => {
    if (!('type' in action)) return action;
    const at = `runtime.prepare[${i}]`;
    try {
      if (action.type === 'exec') {
        for (const field of ['source', 'target'] as const) if (action[field] != null) issues.push({ path: `${at}.${field}`, message: 'exec must not set it' });
        if (!action.command) {
          issues.push({ path: `${at}.command`, message: 'exec requires command' });
          return null;
        }
        return {
          exec: {
            command: withCwdEnv(action.command, action.cwd, action.env),
            retries: action.max_attempts - 1,
            backoff_ms: Math.round(action.retry_backoff_seconds * 1000),
          },
        };
      }
      for (const field of ['command', 'cwd', 'env'] as const) if (action[field] != null) issues.push({ path: `${at}.${field}`, message: `${action.type} must not set it` });
      if (action.max_attempts !== 1 || action.retry_backoff_seconds !== 0) issues.push({ path: `${at}.max_attempts`, message: `${action.type} does not retry` });
      if (!action.source || !action.target) {
        issues.push({ path: at, message: `${action.type} requires source and target` });
        return null;
      }
      let dest: string;
      try {
        dest = relativeTarget(action.target, workdir);
      } catch (error) {
        issues.push({ path: `${at}.target`, message: (error as Error).message });
        return null;
      }
      return { [action.type]: { src: action.source, dest } };
    } catch (error) {
      issues.push({ path: at, message: (error as Error).message });
      return null;
    }
  });
  const out: Record<string, unknown> = { kind, prepare };
  if (runtime.image) out.image = runtime.image;
  // The reference's RuntimeSpec.network defaults to "host" (its containers share the host's network), which a pydantic
  // model_dump() always sends; here it means the node's own network, as a runtime that names no network does. Ours
  // (a runtime that names its kind) keeps it, and a node refuses a task that loosens its network.
  if (runtime.network && !(runtime.network === 'host' && runtime.kind === undefined)) out.network = runtime.network;
  if (runtime.isolation) out.isolation = runtime.isolation;
  if (workdir) out.work_dir = workdir;
  if (runtime.run_args) out.run_args = runtime.run_args;
  return out;
}

/**
 * Parse a TaskRequest in our spelling or the reference's into ours, defaults filled.
 * @throws Error `invalid TaskRequest: path: message; …` naming every unknown key, unsupported field and bad value.
 */
export function parseWireTaskRequest(input: unknown): TaskRequest {
  const parsed = wireTaskSchema.safeParse(input);
  if (!parsed.success) throw new Error(`invalid TaskRequest: ${formatIssues(parsed.error)}`);
  const wire = parsed.data;
  const issues: Issue[] = [];
  for (const [path, rule] of Object.entries(UNSUPPORTED)) {
    const value = get(wire as unknown as Record<string, unknown>, path);
    if (!rule.empty(value)) issues.push({ path, message: `not supported by this server (${rule.why})` });
  }
  const agent = wire.agent;
  let command = agent.command;
  let agentEnv = agent.env;
  if (agent.custom_shell) {
    if (agent.harness !== 'shell') issues.push({ path: 'agent.custom_shell', message: "only valid when agent.harness is 'shell'" });
    if (command !== undefined) issues.push({ path: 'agent.custom_shell', message: 'conflicts with agent.command; give one' });
    try {
      command = withCwdEnv(agent.custom_shell.command, agent.custom_shell.cwd, null);
    } catch (error) {
      issues.push({ path: 'agent.custom_shell', message: (error as Error).message });
    }
    if (agent.custom_shell.env) agentEnv = { ...agent.custom_shell.env, ...agentEnv };
  }
  const metadata = wire.metadata ? { ...wire.metadata } : undefined;
  // Slime/Miles send integer group ids; ours are labels, kept as their decimal string.
  if (metadata && typeof metadata.group_id === 'number' && Number.isFinite(metadata.group_id)) metadata.group_id = String(metadata.group_id);
  if (wire.early_stop_min_usable_sessions != null && wire.early_stop_min_usable_sessions > wire.num_samples) {
    issues.push({ path: 'early_stop_min_usable_sessions', message: 'cannot exceed num_samples' });
  }
  const runtime = wire.runtime ? toOurRuntime(wire.runtime, issues) : undefined;
  if (issues.length > 0) throw new Error(`invalid TaskRequest: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`);
  const ours: Record<string, unknown> = {
    task_id: wire.task_id,
    instruction: wire.instruction,
    num_samples: wire.num_samples,
    timeout_seconds: wire.timeout_seconds,
    agent: {
      ...(agent.harness != null ? { harness: agent.harness } : {}),
      ...(command !== undefined ? { command } : {}),
      model_name: agent.model_name ?? REFERENCE_DEFAULTS.model_name,
      ...(agent.settings ? { settings: agent.settings } : {}),
      ...(agentEnv ? { env: agentEnv } : {}),
    },
    builder: wire.builder ?? { strategy: REFERENCE_DEFAULTS.builder },
  };
  if (runtime) ours.runtime = runtime;
  if (wire.evaluator) {
    const { env: _env, ...evaluator } = wire.evaluator;
    if (evaluator.strategy === 'test_on_output' && evaluator.config) ours.evaluator = { ...evaluator, config: testOnOutputConfig(evaluator.config) };
    else if (evaluator.strategy === 'harbor' && evaluator.config) ours.evaluator = { ...evaluator, config: harborConfig(evaluator.config, issues) };
    else ours.evaluator = evaluator;
  }
  if (issues.length > 0) throw new Error(`invalid TaskRequest: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`);
  if (wire.callback_url != null) ours.callback_url = wire.callback_url;
  if (wire.dispatch_priority !== undefined) ours.dispatch_priority = wire.dispatch_priority;
  if (wire.early_stop_min_usable_sessions != null) ours.early_stop_min_usable_sessions = wire.early_stop_min_usable_sessions;
  if (metadata) ours.metadata = metadata;
  return parseTaskRequest(ours);
}
