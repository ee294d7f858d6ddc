/**
 * Task files: `examples/tasks/<name>/task.yaml` holds TaskRequest fields except those `polar run` flags
 * give (num_samples, agent, builder), plus `sim_script: <file>`. Relative `src` paths of prepare actions and the
 * sim_script path are resolved against the task file's directory.
 */
import { uploadSourceProblems } from '../core/upload-roots.ts';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import {
  behaviourScriptSchema, formatIssues, parseTaskRequest, taskRequestSchema,
  type AgentSpec, type BehaviourScript, type BuilderName, type TaskRequest,
} from '../core/contracts/index.ts';
import { isHarborTaskDir, loadHarborTask, type HarborLoadOptions } from './harbor-task.ts';

export type { PrepareAction } from '../core/contracts/index.ts';

const TASK_FILE_NAMES = ['task.yaml', 'task.yml', 'task.json'];

/** A task file: the TaskRequest contract with num_samples, agent and builder optional (flags give them), plus sim_script. */
const taskFileSchema = taskRequestSchema.extend({
  num_samples: taskRequestSchema.shape.num_samples.optional(),
  agent: taskRequestSchema.shape.agent.optional(),
  builder: taskRequestSchema.shape.builder.optional(),
  sim_script: z.string().min(1).optional(),
});

/** One task file, validated, with every relative path made absolute. */
export interface LoadedTask {
  /** TaskRequest fields from the file; num_samples, agent and builder only when the file gave them. */
  task: Omit<TaskRequest, 'num_samples' | 'agent' | 'builder'> & Partial<Pick<TaskRequest, 'num_samples' | 'agent' | 'builder'>>;
  /** Absolute path of the task file. */
  file: string;
  /** Absolute directory of the task file. */
  dir: string;
  /** Absolute path of the behaviour script, or null. */
  simScriptPath: string | null;
  /** The parsed behaviour script (src/core/contracts/sim-script.ts), or null. */
  simScript: BehaviourScript | null;
  /** What the chosen runtime leaves out of the task (Harbor tasks run locally: Dockerfile steps not run). */
  notes?: string[];
}

/**
 * Load tasks from `path`: a task file (task.yaml / .yml / .json, or any .yaml/.json file), a directory holding one
 * task file or a Harbor task (task.toml + instruction.md, src/rollout/harbor-task.ts), or a directory of such task
 * directories (sorted by name). `opts.runtime` picks the runtime Harbor tasks are mapped onto (default local).
 * @throws Error naming the file when a path does not exist, a file is invalid, or two tasks share a task_id.
 */
export function loadTaskDir(path: string, opts: HarborLoadOptions & { uploadRoots?: readonly string[] } = {}): LoadedTask[] {
  const abs = resolve(path);
  if (!existsSync(abs)) throw new Error(`task path not found: ${path}`);
  let entries: string[];
  const load = (p: string): LoadedTask => (statSync(p).isDirectory() ? loadHarborTask(p, opts) : loadTaskFile(p, opts));
  if (statSync(abs).isFile()) entries = [abs];
  else {
    const own = findTaskFile(abs) ?? (isHarborTaskDir(abs) ? abs : null);
    if (own) entries = [own];
    else {
      entries = readdirSync(abs)
        .sort()
        .map((name) => join(abs, name))
        .filter((p) => statSync(p).isDirectory())
        .map((p) => findTaskFile(p) ?? (isHarborTaskDir(p) ? p : null))
        .filter((p): p is string => p !== null);
      if (entries.length === 0) throw new Error(`no task.yaml (or Harbor task.toml + instruction.md) found in ${path} or its subdirectories`);
    }
  }
  const tasks = entries.map(load);
  const seen = new Map<string, string>();
  for (const t of tasks) {
    const other = seen.get(t.task.task_id);
    if (other) throw new Error(`duplicate task_id ${JSON.stringify(t.task.task_id)} in ${other} and ${t.file}`);
    seen.set(t.task.task_id, t.file);
  }
  return tasks;
}

function findTaskFile(dir: string): string | null {
  for (const name of TASK_FILE_NAMES) if (existsSync(join(dir, name))) return join(dir, name);
  return null;
}

/**
 * Load and validate one task file. Upload `src` paths resolve against the file's directory and must stay inside it (or
 * inside one of `opts.uploadRoots`, e.g. `gateway.upload_roots`), symlinks followed.
 * @throws Error naming the file on bad YAML/JSON, schema violations, or an upload source outside the allowed roots.
 */
export function loadTaskFile(file: string, opts: { uploadRoots?: readonly string[] } = {}): LoadedTask {
  const abs = resolve(file);
  let raw: unknown;
  try {
    const text = readFileSync(abs, 'utf8');
    raw = abs.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    throw new Error(`${file}: cannot parse: ${error instanceof Error ? error.message : String(error)}`);
  }
  return taskFromObject(raw, abs, `${file}`, opts);
}

/**
 * A task from an already-parsed task-file object (a task.yaml's content, or one row of a `tasks` dataset):
 * relative paths resolve against `file`'s directory; `where` names the source in errors (a file, or `file row N`).
 * @throws Error naming `where` on schema violations or missing prepare sources.
 */
export function taskFromObject(raw: unknown, file: string, where: string, opts: { uploadRoots?: readonly string[] } = {}): LoadedTask {
  const abs = resolve(file);
  const dir = dirname(abs);
  const parsed = taskFileSchema.safeParse(raw);
  if (!parsed.success) throw new Error(`${where}: invalid task file: ${formatIssues(parsed.error)}`);
  const { sim_script, ...task } = parsed.data;
  const at = (p: string) => (isAbsolute(p) ? p : resolve(dir, p));
  if (task.runtime?.prepare) {
    task.runtime.prepare = task.runtime.prepare.map((action) => {
      if ('upload_dir' in action) return { upload_dir: { ...action.upload_dir, src: at(action.upload_dir.src) } };
      if ('upload_file' in action) return { upload_file: { ...action.upload_file, src: at(action.upload_file.src) } };
      return action;
    });
    const outside = uploadSourceProblems(task.runtime.prepare, [dir, ...(opts.uploadRoots ?? [])]);
    if (outside.length > 0) throw new Error(`${where}: ${outside.join('; ')}`);
    for (const action of task.runtime.prepare) {
      const src = 'upload_dir' in action ? action.upload_dir.src : 'upload_file' in action ? action.upload_file.src : null;
      if (src !== null && !existsSync(src)) throw new Error(`${where}: prepare source not found: ${src}`);
    }
  }
  let simScriptPath: string | null = null;
  let simScript: BehaviourScript | null = null;
  if (sim_script !== undefined) {
    simScriptPath = at(sim_script);
    simScript = loadBehaviourScript(simScriptPath);
  }
  return { task: task as LoadedTask['task'], file: abs, dir, simScriptPath, simScript };
}

/** Parse a behaviour script file (the schema `polar sim --scripts` uses). @throws Error naming the file. */
export function loadBehaviourScript(file: string): BehaviourScript {
  let raw: unknown;
  try {
    raw = parseYaml(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new Error(`${file}: cannot read sim script: ${error instanceof Error ? error.message : String(error)}`);
  }
  const parsed = behaviourScriptSchema.safeParse(raw);
  if (!parsed.success) throw new Error(`${basename(file)}: invalid sim script: ${formatIssues(parsed.error)}`);
  return parsed.data;
}

/** What `polar run` / `polar submit` flags supply on top of a task file. */
export interface TaskOverrides {
  num_samples?: number;
  agent?: AgentSpec;
  builder?: { strategy: BuilderName; config?: Record<string, unknown> };
}

/**
 * A full TaskRequest from a loaded task plus overrides (overrides win over the file's own values). The behaviour
 * script, when the task has one, travels as `metadata.sim_script` (the parsed object), so a gateway whose engine is the
 * simulator can register it wherever the task was submitted from.
 * @throws Error when the agent is missing from both (the message says to pass --harness or give `agent` in the file),
 *   or the result is not a valid TaskRequest.
 */
export function toTaskRequest(loaded: LoadedTask, overrides: TaskOverrides = {}): TaskRequest {
  const agent = overrides.agent ?? loaded.task.agent;
  if (agent === undefined) {
    throw new Error(`${loaded.file}: no agent to run task ${JSON.stringify(loaded.task.task_id)}: pass --harness NAME (e.g. --harness pi) or give \`agent: {harness: NAME, model_name: MODEL}\` in the task file`);
  }
  const metadata = loaded.simScript ? { ...loaded.task.metadata, sim_script: loaded.simScript } : loaded.task.metadata;
  return parseTaskRequest({
    ...loaded.task,
    num_samples: overrides.num_samples ?? loaded.task.num_samples ?? 1,
    agent,
    builder: overrides.builder ?? loaded.task.builder ?? { strategy: 'prefix_merging' },
    ...(metadata !== undefined ? { metadata } : {}),
  });
}
