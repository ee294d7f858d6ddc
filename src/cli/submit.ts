/**
 * `polar submit FILE --server URL`: send a TaskRequest (JSON or YAML file) or task directory to a rollout server.
 * Task files (src/rollout/task-file.ts) need --harness (or an agent in the file); --samples sets num_samples. A task's behaviour
 * script (`sim_script:`) travels in the TaskRequest as `metadata.sim_script`, for gateways whose engine is the simulator.
 */
import type { Command } from 'commander';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { TaskRequest } from '../core/records.ts';
import { loadTaskDir, toTaskRequest } from '../rollout/task-file.ts';
import { parseTaskRequest } from '../core/contracts/index.ts';
import { UsageError, parsePositiveInt } from './common.ts';

interface SubmitOptions {
  server: string;
  harness?: string;
  command?: string;
  model: string;
  samples?: number;
  builder?: 'per_request' | 'prefix_merging';
  token?: string;
}

/** TaskRequests from a file: a full TaskRequest (JSON/YAML, or a list of them), or task file(s) plus flags. */
export function taskRequestsFromPath(path: string, opts: Omit<SubmitOptions, 'server' | 'token'>): TaskRequest[] {
  if (!existsSync(path)) throw new UsageError(`no such file or directory: ${path}`);
  if (opts.command !== undefined && opts.harness === undefined) opts = { ...opts, harness: 'shell' };
  const agent = opts.harness ? { harness: opts.harness, model_name: opts.model, ...(opts.command !== undefined ? { command: opts.command } : {}) } : undefined;
  const builder = opts.builder ? { strategy: opts.builder } : undefined;
  if (statSync(path).isFile()) {
    let raw: unknown;
    try {
      const text = readFileSync(path, 'utf8');
      raw = path.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
    } catch (error) {
      throw new UsageError(`${path}: cannot parse: ${(error as Error).message}`);
    }
    const list = Array.isArray(raw) ? raw : [raw];
    const isFull = list.every((t) => typeof t === 'object' && t !== null && 'agent' in t && 'num_samples' in t && !('sim_script' in t));
    if (isFull) {
      return list.map((t) => {
        const merged = { ...(t as object), ...(opts.samples ? { num_samples: opts.samples } : {}), ...(agent ? { agent } : {}), ...(builder ? { builder } : {}) };
        try {
          return parseTaskRequest(merged);
        } catch (error) {
          throw new UsageError(`${path}: ${(error as Error).message}`);
        }
      });
    }
  }
  try {
    return loadTaskDir(path).map((loaded) => toTaskRequest(loaded, { num_samples: opts.samples, agent, builder }));
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

export function register(program: Command): void {
  program
    .command('submit')
    .description('submit a TaskRequest (JSON/YAML) or a task directory to a rollout server')
    .argument('<file>', 'TaskRequest file, task.yaml, or a directory of task directories')
    .requiredOption('--server <url>', 'rollout server base URL')
    .option('--harness <name>', 'agent harness for task files that name none (pi, claude_code, codex, qwen_code, gemini_cli, opencode, shell)')
    .option('--command <cmd>', 'shell harness: command line to run ({{INSTRUCTION}} is replaced); implies --harness shell')
    .option('--model <name>', 'model name the harness asks for', 'polar-sim')
    .option('--samples <n>', 'num_samples (sessions per task)', parsePositiveInt('--samples'))
    .option('--builder <strategy>', 'per_request or prefix_merging')
    .option('--token <token>', 'control-plane token (default: env POLAR_CONTROL_TOKEN)')
    .action(async (file: string, opts: SubmitOptions) => {
      if (opts.builder && opts.builder !== 'per_request' && opts.builder !== 'prefix_merging') throw new UsageError('--builder must be per_request or prefix_merging');
      const tasks = taskRequestsFromPath(file, opts);
      const token = opts.token ?? process.env.POLAR_CONTROL_TOKEN;
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (token) headers.authorization = `Bearer ${token}`;
      let failed = 0;
      for (const task of tasks) {
        const response = await fetch(`${opts.server.replace(/\/+$/, '')}/rollout/task/submit`, { method: 'POST', headers, body: JSON.stringify(task) }).catch((error: Error) => {
          throw new Error(`cannot reach rollout server ${opts.server}: ${error.message}`);
        });
        const body = await response.text();
        if (response.ok) console.log(body);
        else {
          failed++;
          console.error(`polar: ${task.task_id}: HTTP ${response.status} ${body}`);
        }
      }
      if (failed > 0) process.exitCode = 1;
    });
}
