/**
 * `polar submit FILE --server URL`: send a TaskRequest (JSON or YAML file) or task directory to a rollout server.
 * A TaskRequest file may use the Python Polar's spelling (src/core/contracts/reference-task.ts). `--wait` polls each task
 * until it is no longer running and prints the Python Polar CLI's summary (`--json`: the final TaskStatus).
 * Task files (src/rollout/task-file.ts) need --harness (or an agent in the file); --samples sets num_samples; --harness,
 * --command and --model build the agent as polar run does (src/stack/run-tasks.ts agentWithFlags). A task's behaviour
 * script (`sim_script:`) travels in the TaskRequest as `metadata.sim_script`, for gateways whose engine is the simulator.
 */
import type { Command } from 'commander';
import { controlTokenFromEnv } from '../core/control-token.ts';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, extname } from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { AgentSpec, TaskRequest } from '../core/records.ts';
import { HARNESS_ADAPTERS } from '../gateway/harnesses/index.ts';
import { toTaskRequest } from '../rollout/task-file.ts';
import { agentWithFlags, DEFAULT_MODEL_NAME } from '../stack/run-tasks.ts';
import { parseWireTaskRequest } from '../core/contracts/index.ts';
import { harnessFlag, refuseGivenFlags, UsageError, parsePositiveInt } from './common.ts';
import { addDatasetFlags, assertNoDatasetSelection, loadTasksArg, type DatasetFlags } from './dataset-flags.ts';
import { HARBOR_RUNTIMES, printTaskNotes } from './harbor-flags.ts';
import { resolveRolloutUrl } from './rollout-url.ts';

interface SubmitOptions extends Omit<DatasetFlags, 'taskRuntime'> {
  server?: string;
  rolloutUrl?: string;
  config?: string;
  wait?: boolean;
  pollInterval?: number;
  json?: boolean;
  harness?: string;
  command?: string;
  model?: string;
  samples?: number;
  builder?: 'per_request' | 'prefix_merging';
  token?: string;
  taskRuntime?: string;
}

/**
 * TaskRequests from a path: a full TaskRequest (JSON/YAML, or a list of them), task file(s) plus flags (a file named
 * task.yaml / task.yml is always a task file: its relative upload paths resolve against its directory), a directory of
 * them (ours or Harbor's), or a dataset file with --dataset-format (as `polar run` reads it).
 * @throws UsageError naming the file and what is wrong.
 */
export async function taskRequestsFromPath(path: string, opts: Pick<SubmitOptions, 'harness' | 'command' | 'model' | 'samples' | 'builder' | 'taskRuntime'> & Omit<DatasetFlags, 'taskRuntime'>): Promise<TaskRequest[]> {
  if (!existsSync(path)) throw new UsageError(`no such file or directory: ${path}`);
  if (opts.command !== undefined && opts.harness === undefined) opts = { ...opts, harness: 'shell' };
  // The agent rule polar run uses (src/stack/run-tasks.ts agentWithFlags): --harness replaces the file's harness and
  // model name, keeping its env and settings; without it the file's own agent runs, --model renaming its model.
  const flags = { harness: opts.harness, command: opts.command, modelName: opts.model };
  const agentFor = (own: AgentSpec | undefined): AgentSpec | undefined => {
    try {
      return agentWithFlags(own, flags);
    } catch (error) {
      throw new UsageError(`${path}: ${(error as Error).message}`);
    }
  };
  if (opts.harness !== undefined) harnessFlag(opts.harness);
  const builder = opts.builder ? { strategy: opts.builder } : undefined;
  const ext = extname(path).toLowerCase();
  const taskFile = /^task\.ya?ml$/i.test(basename(path));
  const dataset = opts.datasetFormat !== undefined || ext === '.jsonl' || ext === '.parquet';
  assertNoDatasetSelection(opts);
  if (!dataset && !taskFile && statSync(path).isFile()) {
    let raw: unknown;
    try {
      const text = readFileSync(path, 'utf8');
      raw = path.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
    } catch (error) {
      throw new UsageError(`${path}: cannot parse: ${(error as Error).message}`);
    }
    const list = Array.isArray(raw) ? raw : [raw];
    // A TaskRequest (ours or the Python Polar's, whose num_samples defaults to 1) names its agent; a task file does not.
    const isFull = list.every((t) => typeof t === 'object' && t !== null && 'agent' in t && 'instruction' in t && !('sim_script' in t));
    if (isFull) {
      return list.map((t) => {
        const merged = { ...(t as object), ...(opts.samples ? { num_samples: opts.samples } : {}), ...(builder ? { builder } : {}) };
        let request: TaskRequest;
        try {
          request = parseWireTaskRequest(merged);
        } catch (error) {
          throw new UsageError(`${path}: ${(error as Error).message}`);
        }
        return { ...request, agent: agentFor(request.agent)! };
      });
    }
  }
  // Task files, directories of them (ours or Harbor's) and datasets: read as polar run reads them.
  const loaded = await loadTasksArg(path, { ...opts, taskRuntime: opts.taskRuntime ?? 'local' });
  printTaskNotes(loaded, (line) => console.error(`polar submit: ${line}`));
  try {
    return loaded.map((task) => toTaskRequest(task, { num_samples: opts.samples, agent: agentFor(task.task.agent), builder }));
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/** Task statuses after which a task never changes again (the Python Polar's words; ours lowercased). */
const FINAL_TASK = new Set(['completed', 'failed', 'cancelled']);
/** Answers of a proxy in front of a rollout server that is restarting: `--wait` polls again. */
const RESTARTING_STATUS = new Set([502, 503, 504]);

/**
 * The Python Polar CLI's summary of a finished TaskStatus (src/polar/cli.py `_handle_submit`), plus the mean reward.
 * A session's reward is the server's `metadata.reward` (its outcome reward, also for a session with no traces, e.g. a
 * shell harness that made no model call); a reference server's result has none, and its last trace's reward counts. A
 * cancelled session has none.
 */
export function taskSummary(status: Record<string, unknown>): string {
  type Result = { status?: string; metadata?: { reward?: number | null; polar_status?: string }; trajectory?: { traces?: { reward?: number | null }[] } };
  const results = (Array.isArray(status.results) ? status.results : []) as Result[];
  const completed = results.filter((r) => r.status === 'COMPLETED').length;
  // A cancelled session (the reference shape has no CANCELLED: ERROR with metadata.polar_status) has no reward.
  const rewards = results
    .filter((r) => r.metadata?.polar_status !== 'CANCELLED')
    .map((r) => r.metadata?.reward ?? r.trajectory?.traces?.at(-1)?.reward)
    .filter((r): r is number => typeof r === 'number');
  const mean = rewards.length > 0 ? rewards.reduce((a, b) => a + b, 0) / rewards.length : 0;
  return [
    `Task: ${String(status.task_id)}`,
    `Status: ${String(status.status)}`,
    `Completed sessions: ${completed}/${results.length}`,
    `Reward=1.0 sessions: ${rewards.filter((r) => r === 1).length}`,
    `Mean reward: ${mean.toFixed(3)}`,
  ].join('\n');
}

export function register(program: Command): void {
  const command = program
    .command('submit')
    .description('submit a TaskRequest (JSON/YAML, ours or the Python Polar\'s) or a task directory to a rollout server')
    .argument('<file>', 'TaskRequest file, task.yaml, a task directory (ours or Harbor\'s), a directory of them, or a dataset file with --dataset-format')
    .option('--server <url>', 'rollout server base URL')
    .option('--rollout-url <url>', 'same as --server (the Python Polar CLI flag)')
    .option('-c, --config <file>', 'topology file (ours or the Python Polar\'s) naming the rollout server, when no URL is given')
    .option('--harness <name>', `agent harness: ${Object.keys(HARNESS_ADAPTERS).join(', ')} (default: each file's agent block; with it, the file's agent.env and agent.settings are kept)`)
    .option('--command <cmd>', 'shell harness: command line to run ({{INSTRUCTION}} is replaced); implies --harness shell')
    .option('--model <name>', `model name the harness asks for (default: the file's agent.model_name; with --harness, ${DEFAULT_MODEL_NAME})`)
    .option('--samples <n>', 'num_samples (sessions per task)', parsePositiveInt('--samples'))
    .option('--builder <strategy>', 'per_request or prefix_merging')
    .option('--task-runtime <kind>', `runtime Harbor task directories run in: ${HARBOR_RUNTIMES.join(', ')} (containers need [environment].docker_image)`, 'local')
    .option('--wait', 'poll each task until it is completed, failed or cancelled, then print a summary (exit 1 unless every task completed); an unreachable server is polled again')
    .option('--poll-interval <s>', 'seconds between polls with --wait', parsePositiveSeconds, 2)
    .option('--json', 'with --wait: print each final TaskStatus as JSON instead of the summary')
    .option('--token <token>', 'control-plane token (default: env POLAR_CONTROL_TOKEN or POLAR_CONTROL_PLANE_TOKEN)');
  addDatasetFlags(command);
  command
    .action(async (file: string, opts: SubmitOptions, command: Command) => {
      // Without --wait submit prints each submit answer and ends: the polling flags would be silently ignored.
      if (!opts.wait) refuseGivenFlags(command, [['pollInterval', '--poll-interval'], ['json', '--json']], 'to --wait (without it polar submit prints each submit answer and does not poll)');
      if (opts.builder && opts.builder !== 'per_request' && opts.builder !== 'prefix_merging') throw new UsageError('--builder must be per_request or prefix_merging');
      const base = resolveRolloutUrl(opts);
      const tasks = await taskRequestsFromPath(file, opts);
      const token = opts.token ?? controlTokenFromEnv();
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (token) headers.authorization = `Bearer ${token}`;
      const call = (path: string, init: RequestInit = {}) =>
        fetch(`${base}${path}`, { ...init, headers }).catch((error: Error) => {
          throw new Error(`cannot reach rollout server ${base}: ${error.message}`);
        });
      let failed = 0;
      const submitted: string[] = [];
      for (const task of tasks) {
        const response = await call('/rollout/task/submit', { method: 'POST', body: JSON.stringify(task) });
        const body = await response.text();
        if (response.ok) {
          submitted.push(task.task_id);
          if (!opts.wait) console.log(body);
        } else {
          failed++;
          console.error(`polar: ${task.task_id}: HTTP ${response.status} ${body}`);
        }
      }
      if (opts.wait) {
        // A restart of the rollout server never cancels work (README, "As a service"), so an unreachable server, or a
        // 502/503/504 from a proxy in front of it, is asked again at the next poll; said once per outage on stderr.
        let down = false;
        for (const taskId of submitted) {
          let status: Record<string, unknown>;
          for (;;) {
            await Bun.sleep((opts.pollInterval ?? 2) * 1000);
            let response: Response;
            try {
              response = await call(`/rollout/task/${encodeURIComponent(taskId)}`);
            } catch (error) {
              if (!down) console.error(`polar: ${(error as Error).message}; still waiting for ${taskId}`);
              down = true;
              continue;
            }
            if (RESTARTING_STATUS.has(response.status)) {
              if (!down) console.error(`polar: rollout server ${base} answered HTTP ${response.status}; still waiting for ${taskId}`);
              down = true;
              continue;
            }
            if (down) console.error(`polar: rollout server ${base} is back`);
            down = false;
            status = (await response.json().catch(() => ({}))) as Record<string, unknown>;
            if (!response.ok) throw new Error(`${taskId}: HTTP ${response.status} ${JSON.stringify(status)}`);
            if (FINAL_TASK.has(String(status.status).toLowerCase())) break;
          }
          console.log(opts.json ? JSON.stringify(status, null, 2) : taskSummary(status));
          // Our polar_status tells a task with no usable session (FAILED) from a completed one; the reference word does not.
          if (String(status.polar_status ?? status.status).toLowerCase() !== 'completed') failed++;
        }
      }
      if (failed > 0) process.exitCode = 1;
    });
}

function parsePositiveSeconds(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`--poll-interval must be a positive number of seconds, got ${JSON.stringify(value)}`);
  return n;
}
