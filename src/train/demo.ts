/**
 * `polar train-demo`: a closed GRPO loop through the whole system. This process runs the rollout server, one gateway
 * node with a real harness CLI, and the simulator (its learnable variant policy, src/sim/variant-policy.ts); the
 * trainer is the Python client (examples/closed-loop/train.py, stdlib + clients/python), started as a child with the
 * servers' URLs and the control-plane token. Afterwards every trajectory the trainer used is checked with
 * `verifyTraces`, re-scoring each sampled token (the variant choice included) from the simulator's exported policy,
 * and pass@1 per step is plotted (every `steps-<mode>.jsonl` in the output directory, so sync and async runs into
 * one directory share a plot).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { TaskRequest } from '../core/records.ts';
import { getHarnessAdapter } from '../gateway/harnesses/index.ts';
import { defaultHarnessCache, installHarness } from '../gateway/harnesses/install.ts';
import { startLocalStack } from '../stack/local-stack.ts';
import { loadTaskDir, toTaskRequest } from '../rollout/task-file.ts';
import { sessionRescorer, type PolicyExport } from '../sim/variant-policy.ts';
import type { Store } from '../store/index.ts';
import { verifyTraces } from '../trace/index.ts';
import { renderLineChartSvg, type PlotSeries } from './plot.ts';

export interface TrainDemoOptions {
  tasksDir: string;
  harness: string;
  steps: number;
  samples: number;
  asyncMode: boolean;
  /** K: async sampling runs up to K versions ahead; groups more than K behind are dropped. */
  maxStaleness: number;
  lr: number;
  outDir: string;
  store: Store;
  /** Python interpreter (default python3). */
  python?: string;
  /** The trainer script (default examples/closed-loop/train.py of this checkout). */
  trainer?: string;
  /** Harness runs at once (gateway max_run_workers). */
  concurrency: number;
  /** Seconds to wait for one step's tasks. */
  taskTimeoutS: number;
  /** Table rows and trainer output. */
  print: (line: string) => void;
  log: (line: string) => void;
}

export interface StepRow {
  step: number;
  mode: 'sync' | 'async';
  policy_version: string | string[];
  pass_at_1: number;
  mean_reward: number;
  groups_used: number;
  stale_groups_dropped: number;
  wall_s: number;
  [key: string]: unknown;
}

export interface TrainDemoReport {
  steps: StepRow[];
  verified: { sessions: number; clean: number; rescored_tokens: number; failures: string[] };
  plot: string;
  policyFile: string;
}

/** The trainer script in this checkout, found from this file's location (src/train → examples/closed-loop). */
export function defaultTrainerScript(): string {
  return resolve(import.meta.dir, '..', '..', 'examples', 'closed-loop', 'train.py');
}

/**
 * TaskRequests of the task directories for the trainer: every task needs a behaviour script (its variants are what
 * the policy chooses among). @throws Error naming a task without `sim_script`.
 */
export function demoTaskRequests(tasksDir: string, harness: string, samples: number): TaskRequest[] {
  const adapter = getHarnessAdapter(harness);
  return loadTaskDir(tasksDir).map((loaded) => {
    if (!loaded.simScript) throw new Error(`${loaded.file}: task ${loaded.task.task_id} has no sim_script; train-demo learns the simulator's choice among a script's variants`);
    return toTaskRequest(loaded, { num_samples: samples, agent: { harness: adapter.name, model_name: 'polar-sim' }, builder: { strategy: 'prefix_merging' } });
  });
}

/** Run the loop; throws Error when the trainer fails. Verification failures are reported, not thrown. */
export async function runTrainDemo(opts: TrainDemoOptions): Promise<TrainDemoReport> {
  const outDir = resolve(opts.outDir);
  mkdirSync(outDir, { recursive: true });
  const mode = opts.asyncMode ? 'async' : 'sync';
  const requests = demoTaskRequests(opts.tasksDir, opts.harness, opts.samples);
  const tasksFile = join(outDir, 'tasks.json');
  writeFileSync(tasksFile, `${JSON.stringify(requests, null, 1)}\n`);
  const adapter = getHarnessAdapter(opts.harness);
  if (adapter.package) await installHarness(adapter.package, { cacheDir: defaultHarnessCache(), log: opts.log });
  const trainer = opts.trainer ?? defaultTrainerScript();
  if (!existsSync(trainer)) throw new Error(`trainer script ${trainer} not found (run from a checkout of the repository, or pass --trainer FILE)`);

  // A token closes the gateways' admin endpoints to the harnesses on this host; only the trainer gets it.
  const token = randomBytes(24).toString('base64url');
  const n = opts.concurrency;
  const stack = await startLocalStack({
    store: opts.store,
    node: {
      workRoot: join(outDir, 'work'),
      capacity: { max_run_workers: n, init_workers: Math.max(1, Math.min(n, 8)), ready_buffer: Math.min(n, 8), postrun_workers: Math.max(1, Math.min(n, 8)) },
    },
    controlPlaneToken: token,
    heartbeatIntervalMs: 1000,
    log: opts.log,
  });
  let steps: StepRow[] = [];
  let policy: PolicyExport;
  try {
    await stack.registered;
    const args = [
      trainer, '--server', stack.server.url, '--sim', stack.sim!.url, '--tasks', tasksFile, '--steps', String(opts.steps), '--samples', String(opts.samples),
      '--lr', String(opts.lr), '--max-staleness', String(opts.maxStaleness), '--task-timeout', String(opts.taskTimeoutS), '--out', outDir,
      ...(opts.asyncMode ? ['--async'] : []),
    ];
    const code = await new Promise<number>((resolvePromise, reject) => {
      const child = spawn(opts.python ?? 'python3', args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, POLAR_CONTROL_TOKEN: token, PYTHONUNBUFFERED: '1' } });
      let buffered = '';
      child.stdout.on('data', (chunk: Buffer) => {
        buffered += chunk.toString();
        const lines = buffered.split('\n');
        buffered = lines.pop()!;
        for (const line of lines) opts.print(line);
      });
      child.stderr.on('data', (chunk: Buffer) => process.stderr.write(chunk));
      child.on('error', (error) => reject(new Error(`cannot start the trainer (${opts.python ?? 'python3'} ${trainer}): ${error.message}`)));
      child.on('close', (exitCode) => {
        if (buffered) opts.print(buffered);
        resolvePromise(exitCode ?? 1);
      });
    });
    if (code !== 0) throw new Error(`the trainer exited with code ${code}`);
    policy = stack.sim!.policy.export(stack.sim!.policyVersion);
  } finally {
    await stack.stop();
  }
  // Versions restart at 0 in every run, so each mode keeps its own policy export (and store, see demoStorePath).
  const policyFile = join(outDir, `sim-policy-${mode}.json`);
  writeFileSync(policyFile, `${JSON.stringify(policy)}\n`);
  steps = readFileSync(join(outDir, 'steps.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as StepRow);
  writeFileSync(join(outDir, `steps-${mode}.jsonl`), steps.map((s) => JSON.stringify(s)).join('\n') + '\n');

  // Every trajectory the trainer used, re-scored token by token (the variant choice's term included).
  const used = JSON.parse(readFileSync(join(outDir, 'used-sessions.json'), 'utf8')) as { session_id: string; task_id: string }[];
  const verified = { sessions: used.length, clean: 0, rescored_tokens: 0, failures: [] as string[] };
  for (const { session_id: sessionId, task_id: taskId } of used) {
    const result = opts.store.results.get(sessionId);
    const records = opts.store.completions.listBySession(sessionId);
    if (!result) {
      verified.failures.push(`${sessionId}: no stored result`);
      continue;
    }
    const report = verifyTraces(records, result.trajectory, { rescore: sessionRescorer(policy, taskId, sessionId, records) });
    verified.rescored_tokens += report.rescored_tokens;
    if (report.ok && report.rescored_tokens === report.sampled_tokens) verified.clean++;
    else verified.failures.push(`${sessionId}: ${report.violations.slice(0, 2).map((v) => v.message).join('; ') || `${report.rescored_tokens}/${report.sampled_tokens} tokens re-scored`}`);
  }

  const series: PlotSeries[] = [];
  for (const file of readdirSync(outDir).filter((f) => /^steps-(sync|async)\.jsonl$/.test(f)).sort().reverse()) {
    const rows = readFileSync(join(outDir, file), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as StepRow);
    const label = file.includes('async') ? `async (K=${rows[0] && typeof rows[0].max_staleness === 'number' ? rows[0].max_staleness : opts.maxStaleness})` : 'sync';
    series.push({ label, points: rows.map((r) => ({ step: r.step, value: r.pass_at_1 })) });
  }
  const plot = join(outDir, 'pass_at_1.svg');
  writeFileSync(plot, renderLineChartSvg(series, { title: `GRPO on the simulator's variant policy (${opts.harness}, G=${opts.samples})`, yLabel: 'pass@1' }));
  return { steps, verified, plot, policyFile };
}

/** The store of a run: one per mode, since both runs number their policy versions from 0. */
export function demoStorePath(outDir: string, asyncMode: boolean): string {
  return join(resolve(outDir), `results-${asyncMode ? 'async' : 'sync'}.db`);
}

/** The directory a relative default output goes to. */
export function defaultDemoDir(cwd: string): string {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19);
  return join(cwd, 'out', `train-demo-${stamp}`);
}

