/**
 * Harbor task directories (the format of Terminal-Bench 2 and adapted benchmarks) as Polar tasks:
 *
 *   my-task/task.toml            [agent].timeout_sec, [verifier].timeout_sec / env, [environment].docker_image, [metadata]
 *                                (a key Harbor's task.toml does not have is a note: said, never silently a default)
 *   my-task/instruction.md       → instruction
 *   my-task/environment/Dockerfile
 *   my-task/tests/test.sh        → the `harbor` evaluator (writes /logs/verifier/reward.txt or reward.json)
 *   my-task/solution/solve.sh    (optional; not given to the agent)
 *   my-task/sim.yaml             (optional, Polar's own: a behaviour script for the built-in simulator)
 *
 * Runtime: with `runtime: 'docker' | 'podman'` the task needs an image: `[environment].docker_image`, else an error
 * saying to build environment/Dockerfile and set it (Polar does not build images). With the local runtime (the default)
 * the Dockerfile is read for what can run without an image: `WORKDIR` (the verifier's paths are mapped to it), and
 * `COPY`/`ADD` (shell or JSON-array form) of files from environment/ into WORKDIR become upload prepare actions. `RUN`,
 * `FROM`, `ENV` and copies elsewhere are not run; each one skipped is listed in `notes` so the caller can say what was
 * left out.
 * Source: https://www.harborframework.com/docs/tasks (task layout, task.toml, the verifier's reward files).
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, join, posix, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { behaviourScriptSchema, formatIssues, type BehaviourScript, type PrepareAction, type TaskRequest } from '../core/contracts/index.ts';
// Type-only: task-file.ts loads Harbor directories through this module, so a value dependency back is a cycle.
import type { LoadedTask } from './task-file.ts';

/** Runtime kinds a Harbor task can be mapped onto. */
export type HarborRuntimeKind = 'local' | 'docker' | 'podman';

export interface HarborLoadOptions {
  /** The runtime sessions use (default 'local'). */
  runtime?: HarborRuntimeKind;
}

/** Seconds Harbor gives the agent and the verifier when task.toml does not say (its TaskConfig defaults). */
const DEFAULT_AGENT_TIMEOUT_S = 600;
const DEFAULT_VERIFIER_TIMEOUT_S = 600;
/** Setup time (INIT, prepare) on top of the agent and verifier budgets in timeout_seconds. */
const SETUP_ALLOWANCE_S = 120;

function readSimScript(file: string): BehaviourScript {
  let raw: unknown;
  try {
    raw = parseYaml(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new Error(`${file}: cannot read sim script: ${error instanceof Error ? error.message : String(error)}`);
  }
  const parsed = behaviourScriptSchema.safeParse(raw);
  if (!parsed.success) throw new Error(`${file}: invalid sim script: ${formatIssues(parsed.error)}`);
  return parsed.data;
}

/**
 * True when `dir` is meant as a Harbor task directory: it has task.toml. (loadHarborTask then requires instruction.md
 * and tests/test.sh, so a task missing one is an error naming it, never skipped.)
 */
export function isHarborTaskDir(dir: string): boolean {
  return existsSync(join(dir, 'task.toml'));
}

type Table = Record<string, unknown>;

/**
 * The keys of Harbor's task.toml (TaskConfig in harbor/models/task/config.py, schema 1.0 through the current docs at
 * https://www.harborframework.com/docs/tasks): per top-level key, the keys its table may hold, or null where the value
 * is not checked here ([metadata] is free-form; scalars and arrays of tables). Keys of deeper tables
 * (environment.healthcheck, environment.tpu, verifier.environment, mcp_servers entries) are not checked.
 */
const TASK_TOML_KEYS: Readonly<Record<string, readonly string[] | null>> = {
  schema_version: null,
  version: null, // the pre-1.1 name of schema_version
  source: null,
  metadata: null,
  steps: null, // multi-step tasks (one [[steps]] table each)
  artifacts: null,
  multi_step_reward_mode: null, // pre-1.3; Harbor drops it
  task: ['name', 'description', 'authors', 'keywords'],
  agent: ['timeout_sec', 'setup_timeout_sec', 'user', 'network_mode', 'allowed_hosts'],
  verifier: ['timeout_sec', 'env', 'user', 'network_mode', 'allowed_hosts', 'environment', 'environment_mode', 'collect'],
  solution: ['env'],
  environment: [
    'build_timeout_sec', 'docker_image', 'os', 'cpus', 'memory_mb', 'storage_mb', 'gpus', 'gpu_types', 'tpu', 'allow_internet',
    'network_mode', 'allowed_hosts', 'mcp_servers', 'env', 'skills_dir', 'healthcheck',
    'memory', 'storage', // deprecated spellings of memory_mb and storage_mb
  ],
};

/**
 * Notes `task.toml: path: not a Harbor key, ignored` for each key Harbor's task.toml does not have: Harbor itself
 * ignores unknown keys (task generators and forks add their own), so they do not stop a task, but a misspelling
 * (`[verifier] timeout`) is said, never silently a default. @throws Error when a section is not a table.
 */
function unknownTaskTomlKeys(config: Table, file: string): string[] {
  const notes: string[] = [];
  for (const [key, value] of Object.entries(config)) {
    if (!Object.hasOwn(TASK_TOML_KEYS, key)) {
      notes.push(`task.toml: ${key}: not a Harbor key, ignored (task.toml holds ${Object.keys(TASK_TOML_KEYS).join(', ')})`);
      continue;
    }
    const known = TASK_TOML_KEYS[key];
    if (!known) continue;
    for (const inner of Object.keys(table(value, key, file))) {
      if (!known.includes(inner)) notes.push(`task.toml: ${key}.${inner}: not a Harbor key, ignored ([${key}] holds ${known.join(', ')})`);
    }
  }
  return notes;
}

function table(value: unknown, path: string, file: string): Table {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error(`${file}: ${path} must be a table`);
  return value as Table;
}

function seconds(value: unknown, path: string, file: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) throw new Error(`${file}: ${path} must be a positive number of seconds`);
  return value;
}

/** What the local runtime can take from a Dockerfile: WORKDIR, copies into it, and notes for everything skipped. */
export function readDockerfile(text: string, envDir: string): { workdir: string | null; prepare: PrepareAction[]; notes: string[] } {
  let workdir: string | null = null;
  const copies: Array<{ src: string; dest: string; intoDir: boolean; line: number }> = [];
  const notes: string[] = [];
  // Continuation lines are joined, as Docker does; each instruction keeps the number of its first line.
  const instructions: Array<{ text: string; line: number }> = [];
  let pending: { text: string; line: number } | null = null;
  text.split(/\r?\n/).forEach((physical, i) => {
    const continued = /\\\s*$/.test(physical);
    const part = continued ? physical.replace(/\\\s*$/, ' ') : physical;
    pending = pending ? { text: pending.text + part, line: pending.line } : { text: part, line: i + 1 };
    if (!continued) {
      instructions.push(pending);
      pending = null;
    }
  });
  if (pending) instructions.push(pending);
  instructions.forEach(({ text: raw, line: lineNo }) => {
    const line = raw.trim().replace(/\s+/g, ' ');
    if (line === '' || line.startsWith('#')) return;
    const match = /^([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!match) return;
    const instr = match[1]!.toUpperCase();
    const args = match[2]!.trim();
    if (instr === 'WORKDIR') workdir = posix.resolve(workdir ?? '/', args);
    else if (instr === 'COPY' || instr === 'ADD') {
      // Arguments from the instruction as written (exec-form paths may hold runs of spaces).
      const parsed = copyArguments(raw.trim().replace(/^[A-Za-z]+\s+/, ''));
      if (typeof parsed === 'string') {
        notes.push(`Dockerfile line ${lineNo} not copied locally: ${line.slice(0, 120)} (${parsed})`);
        return;
      }
      const { parts } = parsed;
      if (parts.length < 2) return;
      const dest = parts[parts.length - 1]!;
      const intoDir = dest.endsWith('/') || dest === '.' || parts.length > 2;
      for (const src of parts.slice(0, -1)) copies.push({ src, dest: posix.resolve(workdir ?? '/', dest), intoDir, line: lineNo });
    } else if (instr !== 'FROM' && instr !== 'CMD' && instr !== 'ENTRYPOINT' && instr !== 'LABEL') {
      notes.push(`Dockerfile line ${lineNo} not run locally: ${line.slice(0, 120)}`);
    } else if (instr === 'FROM') notes.push(`Dockerfile base image not used locally (host tools instead): ${args}`);
  });
  const prepare: PrepareAction[] = [];
  for (const copy of copies) {
    // Sources are paths in the build context (environment/), an absolute one too; `..` may not leave it.
    const srcRel = posix.normalize(copy.src.replace(/^\/+/, '') || '.');
    const outsideContext = srcRel === '..' || srcRel.startsWith('../');
    const src = resolve(envDir, srcRel);
    const root = workdir ?? null;
    const inside = root !== null && (copy.dest === root || copy.dest.startsWith(`${root}/`));
    if (!inside || outsideContext || !existsSync(src)) {
      const why = !inside ? 'outside WORKDIR' : outsideContext ? 'source outside the build context' : 'source missing';
      notes.push(`Dockerfile line ${copy.line} not copied locally: COPY ${copy.src} ${copy.dest} (${why})`);
      continue;
    }
    const rel = posix.relative(root, copy.dest) || '.';
    if (statSync(src).isDirectory()) prepare.push({ upload_dir: { src, dest: rel } });
    else {
      // `COPY a.py /app/` (or into WORKDIR itself) keeps the file's name.
      const dest = rel === '.' || copy.intoDir ? posix.join(rel, basename(src)) : rel;
      prepare.push({ upload_file: { src, dest } });
    }
  }
  return { workdir, prepare, notes };
}

/**
 * `text` with each whole-path mention of `workdir` made relative to it: `/app/x.py` → `x.py`, `/app` or `/app/`
 * itself → `./` (not inside a longer name such as /application or /x/app).
 */
export function relativeToWorkdir(text: string, workdir: string): string {
  const root = workdir.replace(/\/+$/, '');
  const escaped = root.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const before = '(?<![\\w.~/-])';
  return text
    .replace(new RegExp(`${before}${escaped}/+(?=[\\w.~-])`, 'g'), '') // a path under it: relative
    .replace(new RegExp(`${before}${escaped}/*(?![\\w-])(?!\\.\\w)`, 'g'), './'); // itself: ./
}

/**
 * The paths of a COPY/ADD instruction's arguments: shell form (`--chown=1 a b /dest/`) or exec form
 * (`["a", "b", "/dest/"]`, a JSON array, the form for paths with spaces); flags before either are dropped.
 * A string says why the instruction is not copied (a copy from another stage or image, a malformed array).
 */
function copyArguments(args: string): { parts: string[] } | string {
  let rest = args;
  for (let flag = /^--(\S+)\s*/.exec(rest); flag; flag = /^--(\S+)\s*/.exec(rest)) {
    if (flag[1]!.startsWith('from=')) return 'copies from another build stage or image';
    rest = rest.slice(flag[0].length);
  }
  if (!rest.startsWith('[')) return { parts: rest.split(/\s+/).filter((p) => p !== '') };
  let parsed: unknown;
  try {
    parsed = JSON.parse(rest);
  } catch {
    return 'not a JSON array of strings';
  }
  if (!Array.isArray(parsed) || !parsed.every((p) => typeof p === 'string')) return 'not a JSON array of strings';
  return { parts: parsed as string[] };
}

/**
 * Load one Harbor task directory as a LoadedTask (its `notes` say what the chosen runtime leaves out).
 * task_id is the directory name. timeout_seconds = agent + verifier timeouts + a setup allowance; the agent's own
 * budget travels as metadata.agent_timeout; task.toml's [metadata] travels as metadata.harbor.
 * @throws Error naming the file on a missing directory, task.toml, instruction.md or tests/test.sh, unreadable TOML, an
 *   unknown task.toml key (`task.toml: verifier.timeout: unknown key`), bad field types, or a container runtime without
 *   `[environment].docker_image`.
 */
export function loadHarborTask(dir: string, opts: HarborLoadOptions = {}): LoadedTask & { notes: string[] } {
  const abs = resolve(dir);
  if (!existsSync(abs) || !statSync(abs).isDirectory()) throw new Error(`Harbor task directory not found: ${abs}`);
  const file = join(abs, 'task.toml');
  if (!existsSync(file)) throw new Error(`${abs}: Harbor task has no task.toml`);
  let config: Table;
  try {
    config = Bun.TOML.parse(readFileSync(file, 'utf8')) as Table;
  } catch (error) {
    throw new Error(`${file}: cannot parse: ${error instanceof Error ? error.message : String(error)}`);
  }
  const keyNotes = unknownTaskTomlKeys(config, file);
  if (config.steps !== undefined) throw new Error(`${file}: steps: multi-step Harbor tasks are not supported (one instruction.md and tests/test.sh per task)`);
  const agent = table(config.agent, 'agent', file);
  const verifier = table(config.verifier, 'verifier', file);
  const environment = table(config.environment, 'environment', file);
  const metadata = table(config.metadata, 'metadata', file);
  const instructionFile = join(abs, 'instruction.md');
  if (!existsSync(instructionFile)) throw new Error(`${abs}: Harbor task has no instruction.md`);
  let instruction = readFileSync(instructionFile, 'utf8').trim();
  if (instruction === '') throw new Error(`${instructionFile}: empty instruction`);
  const testsDir = join(abs, 'tests');
  if (!existsSync(join(testsDir, 'test.sh'))) throw new Error(`${abs}: Harbor task has no tests/test.sh`);
  const agentTimeout = seconds(agent.timeout_sec, 'agent.timeout_sec', file, DEFAULT_AGENT_TIMEOUT_S);
  const verifierTimeout = seconds(verifier.timeout_sec, 'verifier.timeout_sec', file, DEFAULT_VERIFIER_TIMEOUT_S);
  const verifierEnv = table(verifier.env, 'verifier.env', file);
  for (const [k, v] of Object.entries(verifierEnv)) if (typeof v !== 'string') throw new Error(`${file}: verifier.env.${k} must be a string`);
  const image = environment.docker_image;
  if (image !== undefined && typeof image !== 'string') throw new Error(`${file}: environment.docker_image must be a string`);

  const kind = opts.runtime ?? 'local';
  const notes: string[] = [...keyNotes];
  const dockerfile = join(abs, 'environment', 'Dockerfile');
  let runtime: TaskRequest['runtime'];
  let workdir: string | null = null;
  if (kind === 'local') {
    if (existsSync(dockerfile)) {
      const read = readDockerfile(readFileSync(dockerfile, 'utf8'), join(abs, 'environment'));
      workdir = read.workdir;
      notes.push(...read.notes);
      // The verifier's files are rewritten to the session's paths (the harbor evaluator); the agent starts in the
      // session directory, which stands in for WORKDIR, so the instruction's WORKDIR paths become relative ones.
      if (workdir && workdir !== '/') {
        const relative = relativeToWorkdir(instruction, workdir);
        if (relative !== instruction) {
          instruction = relative;
          notes.push(`instruction.md: paths under ${workdir} (the image's WORKDIR) given relative to the session directory`);
        }
      }
      runtime = { kind: 'local', ...(read.prepare.length > 0 ? { prepare: read.prepare } : {}) };
    } else runtime = { kind: 'local' };
  } else {
    if (image === undefined) {
      throw new Error(`${file}: the ${kind} runtime needs an image: build environment/Dockerfile and set [environment].docker_image (Polar does not build images)`);
    }
    if (existsSync(dockerfile)) {
      const m = /^\s*WORKDIR\s+(\S+)/im.exec(readFileSync(dockerfile, 'utf8'));
      if (m) workdir = m[1]!;
    }
    runtime = { kind, image, ...(workdir ? { work_dir: workdir } : {}) };
  }
  if (environment.allow_internet === false && kind === 'local') notes.push('allow_internet = false is not enforced by the local runtime');

  const simPath = join(abs, 'sim.yaml');
  const simScript = existsSync(simPath) ? readSimScript(simPath) : null;
  const task: LoadedTask['task'] = {
    task_id: basename(abs),
    instruction,
    timeout_seconds: agentTimeout + verifierTimeout + SETUP_ALLOWANCE_S,
    runtime,
    evaluator: {
      strategy: 'harbor',
      config: {
        tests_dir: testsDir, timeout_s: verifierTimeout,
        ...(Object.keys(verifierEnv).length > 0 ? { env: verifierEnv } : {}),
        ...(workdir ? { workdir } : {}),
      },
    },
    metadata: { agent_timeout: agentTimeout, ...(Object.keys(metadata).length > 0 ? { harbor: metadata } : {}) },
  };
  return { task, file, dir: abs, simScriptPath: simScript ? simPath : null, simScript, notes };
}
