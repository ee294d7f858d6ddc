/**
 * The one-shot job (`polar run`): submit task files as TaskRequests to a local stack, report progress, wait for every
 * task and summarise.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { AgentSpec, BuilderName, SessionResult, TaskRequest } from '../core/records.ts';
import { promptIdsLength } from '../core/int32-twin.ts';
import type { CaptureMode } from '../engines/index.ts';
import { engineLivenessCheck, waitForEngine } from '../engines/health.ts';
import { getHarnessAdapter } from '../gateway/harnesses/index.ts';
import { defaultHarnessCache, installHarness } from '../gateway/harnesses/install.ts';
import { formatProblems, runnableProblems, samplingSettings } from '../core/contracts/index.ts';
import { toTaskRequest, type LoadedTask } from '../rollout/task-file.ts';
import type { SimServerOptions } from '../sim/server.ts';
import type { RuntimeSpec } from '../gateway/runtimes/index.ts';
import type { Store } from '../store/index.ts';
import { startLocalStack, type EngineSpec } from './local-stack.ts';
import type { RunSnapshot } from './run-progress.ts';
import { finalAttempts, retryRequests } from '../rollout/run-retries.ts';
import { evaluatedReward } from '../observe/results.ts';
import { summarizeRun, type RunSummary } from './run-summary.ts';

export interface RunTasksOptions {
  tasks: readonly LoadedTask[];
  /**
   * Harness adapter name (pi, claude_code, codex, qwen_code, gemini_cli, opencode, shell). Absent: each task file's
   * own `agent` block (harness or command, model_name, env, settings) is run, with `modelName`, `command` and
   * `settings` laid over it when given (`command` only on a shell or custom agent). Given: it replaces the file's
   * harness and model name; the file's `agent.env` and `agent.settings` are kept (flag settings win per key).
   */
  harness?: string;
  /** Shell harness: the command line (`{{INSTRUCTION}}` is replaced). */
  command?: string;
  /** num_samples per task (absent: each task file's own, else 1). */
  samples?: number;
  /** Model name the harness asks for (absent: each task file's agent.model_name; with `harness`, polar-sim). */
  modelName?: string;
  /** Trajectory builder (absent: each task file's own, else prefix_merging). */
  builder?: BuilderName;
  /** Agent settings passed to the adapter (e.g. pi's `api`). */
  settings?: Record<string, unknown>;
  store: Store;
  engine?: EngineSpec | null;
  sim?: SimServerOptions;
  /** Capture mode with the in-process simulator (default chat). */
  mode?: CaptureMode;
  /** Chat mode: restore reasoning a harness dropped from its history (ProxyOptions.restoreReasoning). */
  restoreReasoning?: boolean;
  /** Harness runs at once (max_run_workers); INIT and POSTRUN scale with it. */
  concurrency: number;
  workRoot: string;
  harnessCacheDir?: string;
  /** Called about every `progressIntervalMs` (default 500) and once at the end. */
  onProgress?: (snapshot: RunSnapshot) => void;
  progressIntervalMs?: number;
  log?: (line: string) => void;
  /** Wall-clock limit of the whole job, ms (default: none); on expiry unfinished tasks are cancelled. */
  deadlineMs?: number;
  /**
   * Start over: tasks the database holds as running are cancelled (their sessions CANCELLED with the reason) and every
   * task runs again as a new run of its id (the old runs stay stored under `<task_id>@run<n>`). Default false: resume.
   */
  fresh?: boolean;
  /**
   * Aborting it (SIGINT/SIGTERM in `polar run`) stops the run: the node interrupts the unfinished sessions (their
   * harness process groups end) and they stay queued in the database as new attempts, so a run on the same database
   * resumes them; the report covers what finished. (The run deadline, `deadlineMs`, cancels them instead.)
   */
  signal?: AbortSignal;
  /** How long an external engine may take to answer before the run fails without starting anything, ms (default 10 000). */
  engineWaitMs?: number;
  /** Rounds of re-running sessions that failed for infrastructure reasons (src/rollout/run-retries.ts; default 0). */
  maxRetries?: number;
  /**
   * Runtime settings for every session: `kind`, `image` and `run_args` replace each task's own (its prepare actions
   * stay); `isolation`, `network`, `limits` and `binary` are the node's. Default: the tasks' own (local, bubblewrap).
   */
  runtime?: Partial<Omit<RuntimeSpec, 'prepare'>>;
}

export interface RunReport {
  /** One row per task; a sample `--max-retries` re-ran counts by its last attempt. */
  summary: RunSummary;
  /** Task ids run, retry rounds' ids (`<id>~retry<k>`) included. */
  taskIds: string[];
  /** Sessions re-run by --max-retries. */
  retriedSessions: number;
  /** Samples by the final status of their last attempt (the summary's statuses, summed over harnesses). */
  statuses: Record<string, number>;
  /** Samples whose last attempt's harness CLI reported a failure (see HarnessSummary.harness_failures). */
  harnessFailures: number;
  /**
   * True when every sample's last attempt ended COMPLETED (its reward may be 0) and no harness CLI reported a failure
   * in one: what the summary says, so a session a retry made good does not fail the run.
   */
  allCompleted: boolean;
  final: RunSnapshot;
}

/** The model name a harness given by flag asks for when no --model says otherwise. */
export const DEFAULT_MODEL_NAME = 'polar-sim';

/** The agent flags of `polar run` and `polar submit` (RunTasksOptions `harness`, `command`, `modelName`, `settings`). */
export type AgentFlags = Pick<RunTasksOptions, 'harness' | 'command' | 'modelName' | 'settings'>;

/**
 * The agent a task runs, from its file's own `agent` block and the agent flags, the one rule `polar run` and
 * `polar submit` share. No `harness`: the file's agent with `modelName`, `command` (a shell or custom agent only) and
 * `settings` laid over it (undefined when the file has none). `harness` given: that harness (canonical adapter name)
 * asking for `modelName` (default polar-sim), with the file's `env` and `settings` kept (flag settings win per key) and
 * its `command` kept only when the harness is shell.
 * @throws Error for an unknown harness (naming the known ones), or `--command` over a file agent that is neither shell
 *   nor custom.
 * Source: src/stack/run-tasks.ts.
 */
export function agentWithFlags(file: AgentSpec | undefined, flags: AgentFlags): AgentSpec | undefined {
  const adapter = flags.harness === undefined ? null : getHarnessAdapter(flags.harness);
  // Another harness than the file's takes none of the file's harness settings (each harness has its own keys,
  // contracts/harness-settings.ts), only the gateway-read sampling keys every harness shares.
  const fileHarness = (file?.harness ?? 'shell').replaceAll('-', '_');
  const sameHarness = adapter === null || fileHarness === adapter.name;
  const fileSettings = sameHarness ? file?.settings : samplingSettings(file?.settings);
  const settings = { ...fileSettings, ...flags.settings };
  if (adapter === null && file !== undefined && flags.command !== undefined && !['shell', 'custom'].includes(fileHarness)) {
    throw new Error(`--command applies to the shell and custom harnesses; this task's agent runs ${file.harness} (pass --harness shell to run the command instead)`);
  }
  if (adapter === null) {
    return file && {
      ...file,
      ...(flags.modelName !== undefined ? { model_name: flags.modelName } : {}),
      ...(flags.command !== undefined ? { command: flags.command } : {}),
      ...(Object.keys(settings).length > 0 ? { settings } : {}),
    };
  }
  return {
    ...(file?.env ? { env: file.env } : {}),
    harness: adapter.name, model_name: flags.modelName ?? DEFAULT_MODEL_NAME,
    ...(flags.command !== undefined ? { command: flags.command } : file?.command !== undefined && adapter.name === 'shell' ? { command: file.command } : {}),
    ...(Object.keys(settings).length > 0 ? { settings } : {}),
  };
}

/**
 * The TaskRequests `runTasks` submits for `opts.tasks`: each task file's own agent (with opts.modelName, opts.command
 * and opts.settings laid over it), or the given harness with the file's agent.env and agent.settings kept
 * (opts.settings win per key), with the samples, builder and runtime given.
 * Every request is checked as the rollout server's submit checks it (runnableProblems: harness, its settings, evaluator
 * config, …), so one bad task file is a usage error naming its file before anything starts (`polar run` calls this
 * before it creates its output directory or waits for the engine).
 * @throws RunRequestError `<file>: <path>: <message>; …` for every task that cannot run; Error for an unknown harness.
 */
export function runRequests(opts: Pick<RunTasksOptions, 'tasks' | 'harness' | 'command' | 'samples' | 'modelName' | 'builder' | 'settings' | 'runtime'>): TaskRequest[] {
  if (opts.harness !== undefined) getHarnessAdapter(opts.harness);
  const problems: string[] = [];
  const requests = opts.tasks.flatMap((loaded): TaskRequest[] => {
    let agent: AgentSpec | undefined;
    try {
      agent = agentWithFlags(loaded.task.agent, opts);
    } catch (error) {
      problems.push(`${loaded.file}: ${(error as Error).message}`);
      return [];
    }
    let request: TaskRequest;
    try {
      request = toTaskRequest(loaded, { ...(opts.samples !== undefined ? { num_samples: opts.samples } : {}), ...(agent ? { agent } : {}), ...(opts.builder !== undefined ? { builder: { strategy: opts.builder } } : {}) });
    } catch (error) {
      problems.push(`${loaded.file}: ${(error as Error).message.replace(/^invalid TaskRequest: /, '')}`);
      return [];
    }
    const own = opts.runtime ? Object.fromEntries(Object.entries(opts.runtime).filter(([k]) => k === 'kind' || k === 'image' || k === 'run_args')) : {};
    if (Object.keys(own).length > 0) request = { ...request, runtime: { ...(request.runtime ?? { kind: 'local' as const }), ...own } };
    const unrunnable = runnableProblems(request);
    const kind = request.runtime?.kind ?? 'local';
    if (kind !== 'local' && !request.runtime?.image && !opts.runtime?.image) {
      unrunnable.push({ path: 'runtime.image', message: `the ${kind} runtime needs an image: give --image, or tasks with their own (a Harbor task's [environment].docker_image, a dataset row's image)` });
    }
    if (unrunnable.length > 0) problems.push(`${loaded.file}: ${formatProblems(unrunnable)}`);
    return [request];
  });
  if (problems.length > 0) throw new RunRequestError(`${problems.length === 1 ? 'a task cannot run' : `${problems.length} tasks cannot run`}; nothing was run: ${problems.join('; ')}`);
  return requests;
}

/** Finished samples of a run so far, as RunSnapshot counts them. */
type Tally = Pick<RunSnapshot, 'done' | 'completed' | 'rewardSum' | 'rewardCount'>;

/**
 * Count one finished sample (`status` of its last attempt, its stored result if any) into `tally`: it is done, and its
 * reward enters the mean only when it was evaluated (src/observe/results.ts evaluatedReward and meanReward, the
 * summary's rule): a sample that ended in ERROR or TIMEOUT, or was cancelled, has no reward and is not counted as 0.
 */
function tallySample(tally: Tally, status: string, result: SessionResult | null): void {
  tally.done++;
  if (status === 'COMPLETED') tally.completed++;
  const reward = result ? evaluatedReward(result) : null;
  if (reward === null) return;
  tally.rewardSum += reward;
  tally.rewardCount++;
}

/**
 * Run every task × sample through the local stack and summarise.
 * An external engine is checked first (retried for `engineWaitMs`) so an unreachable one fails the run before any
 * session starts. Behaviour scripts travel in the TaskRequests (`metadata.sim_script`) and the gateway registers them
 * with the simulator; the harness CLI is installed first when missing. A task_id the store holds as running (a run
 * that died) is resumed: its unfinished sessions are adopted or re-dispatched; a finished one is reported as stored.
 * With `fresh`, both run again as new runs.
 * @throws RunRequestError before anything starts for a task that cannot run (runRequests) or tasks the store holds
 *   under another request; Error when the engine is unreachable, the harness is unknown or its install fails.
 */
export async function runTasks(opts: RunTasksOptions): Promise<RunReport> {
  const startedAt = Date.now();
  const requests = runRequests(opts);
  if (!opts.fresh) {
    const conflicts = storedRunConflicts(opts.store, requests);
    if (conflicts.length > 0) {
      throw new RunRequestError(`the database already holds ${conflicts.length === 1 ? 'task' : 'tasks'} run differently (${conflicts.join('; ')}); use another --db / --out, or --fresh to run them again as new runs`);
    }
  }
  if (opts.engine) {
    await waitForEngine(engineLivenessCheck(opts.engine), { describe: `engine ${opts.engine.kind} at ${opts.engine.url}`, timeoutMs: opts.engineWaitMs });
  }
  // Installed once, before any session starts, so a registry failure is one clear error and not N session errors.
  const packages = new Set(requests.map((r) => getHarnessAdapter(r.agent.harness ?? 'shell').package).filter((p) => p !== undefined && p !== null));
  for (const pkg of packages) await installHarness(pkg!, { cacheDir: opts.harnessCacheDir ?? defaultHarnessCache(), log: opts.log });
  const counters = { completions: 0, tokens: 0 };
  const n = opts.concurrency;
  const stack = await startLocalStack({
    store: opts.store,
    engine: opts.engine,
    sim: opts.sim,
    mode: opts.mode,
    ...(opts.restoreReasoning ? { proxyOptions: { restoreReasoning: true } } : {}),
    node: {
      workRoot: opts.workRoot, harnessCacheDir: opts.harnessCacheDir,
      ...(opts.runtime ? { runtimeDefaults: opts.runtime } : {}),
      // Uploads may come from the task directories this run loaded (and nowhere else).
      uploadRoots: [...new Set(opts.tasks.map((t) => t.dir))],
      capacity: { max_run_workers: n, init_workers: Math.max(1, Math.min(n, 8)), ready_buffer: Math.min(n, 8), postrun_workers: Math.max(1, Math.min(n, 8)) },
    },
    // Nothing outside this process needs the proxy's admin endpoints during a run, while the harnesses on this host
    // reach its port over loopback: a random token closes them to everyone (pause/version stay in-process only).
    adminToken: randomBytes(24).toString('base64url'),
    onRecord: (rec) => {
      counters.completions++;
      counters.tokens += promptIdsLength(rec) + rec.response_ids.length;
    },
    log: opts.log,
  });
  try {
    const taskIds = requests.map((r) => r.task_id);
    let total = requests.reduce((sum, r) => sum + (opts.store.tasks.get(r.task_id)?.task.num_samples ?? r.num_samples), 0);
    const resumed: string[] = [];
    const alreadyFinished: string[] = [];
    for (const request of requests) {
      const existing = opts.store.tasks.get(request.task_id);
      if (existing?.status === 'RUNNING') {
        // Left running by a run that died: the restarted server adopts or re-dispatches its unfinished sessions.
        if (!opts.fresh) {
          resumed.push(request.task_id);
          continue;
        }
        await stack.server.cancelTask(request.task_id, { reason: 'superseded by polar run --fresh' });
      } else if (existing && !opts.fresh) {
        alreadyFinished.push(request.task_id); // finished in this database: reported as it is
        continue;
      }
      stack.server.submit(request);
    }
    if (resumed.length > 0) opts.log?.(`resuming ${resumed.length} unfinished task(s) from the database: ${resumed.join(', ')}`);
    // Said so, not silently reprinted as if this run had produced it.
    if (alreadyFinished.length > 0) {
      opts.log?.(alreadyFinished.length === requests.length
        ? `all ${alreadyFinished.length} task(s) already finished in this database: nothing was run, their stored results follow (--fresh runs them again)`
        : `${alreadyFinished.length} task(s) already finished in this database are not run again, their stored results are reported (--fresh runs them again): ${alreadyFinished.join(', ')}`);
    }
    // Finished sessions are counted from the server's result events, not by re-reading stored trajectories (large
    // JSON) on every tick; a resumed db, and each retry round, seed the counts from the store, and so does the final
    // snapshot. The store is read by last attempts (finalAttempts): a sample a retry re-runs counts once, by the
    // retry's session, so `done` never passes `total` (the run's samples) and rewards are those the summary gives.
    // Both paths count a sample through tallySample, so the live mean reward is the final one's rule.
    const fromStore = () => {
      const tally: Tally = { done: 0, completed: 0, rewardSum: 0, rewardCount: 0 };
      for (const task of finalAttempts(opts.store, taskIds)) {
        for (const sample of task.samples) {
          const result = opts.store.results.get(sample.session_id);
          const status = result?.status ?? opts.store.sessions.get(sample.session_id)?.status;
          if (result || status === 'CANCELLED') tallySample(tally, status!, result);
        }
      }
      return tally;
    };
    const live = fromStore();
    const ours = new Set(taskIds);
    const unsubscribe = stack.server.events.subscribe((e) => {
      if (e.type !== 'session_result') return;
      const d = e.data as { session_id: string; task_id: string; status: string };
      if (!ours.has(d.task_id)) return;
      // The event's `reward` is rewardOf's (0 for a session that ended without one); the stored result says whether
      // the session was evaluated. It was stored before the event was published (src/rollout/task-results.ts).
      tallySample(live, d.status, opts.store.results.get(d.session_id));
    });
    const snapshot = (tally = live): RunSnapshot => ({
      total, stages: stack.node.stageCounts(), ...tally, completions: counters.completions, tokens: counters.tokens,
    });
    const finished = () => taskIds.every((id) => opts.store.tasks.get(id)?.status !== 'RUNNING');
    const interval = opts.progressIntervalMs ?? 500;
    const wake = Promise.withResolvers<void>();
    opts.signal?.addEventListener('abort', () => wake.resolve(), { once: true });
    let round = 0;
    let latest = requests;
    let retriedSessions = 0;
    for (;;) {
      if (finished()) {
        const again = round < (opts.maxRetries ?? 0) && !opts.signal?.aborted ? retryRequests(opts.store, latest, round + 1) : [];
        if (again.length === 0) break;
        round++;
        latest = again;
        for (const r of again) {
          opts.log?.(`retry ${round}: ${r.num_samples} session(s) of ${r.metadata?.retry_of} failed for infrastructure reasons; running them as ${r.task_id}`);
          stack.server.submit(r);
          taskIds.push(r.task_id);
          ours.add(r.task_id);
          retriedSessions += r.num_samples;
        }
        // The re-run samples are not done any more: their failed attempts leave the counts, `total` stays the run's
        // samples, and the retry's results count as they arrive.
        Object.assign(live, fromStore());
      }
      const deadline = opts.deadlineMs !== undefined && Date.now() - startedAt > opts.deadlineMs;
      if (deadline) {
        const reason = `run deadline of ${opts.deadlineMs} ms reached`;
        opts.log?.(`${reason}: cancelling unfinished tasks`);
        for (const id of taskIds) if (opts.store.tasks.get(id)?.status === 'RUNNING') await stack.server.cancelTask(id, { reason });
        // Let the node end the cancelled sessions (process groups killed, results stored) before the summary; the
        // results it stored itself read CANCELLED like the task.
        await stack.node.stop();
        opts.store.results.relabelCancelled();
        break;
      }
      if (opts.signal?.aborted) {
        // Nothing is cancelled because we stopped: the node interrupts what runs and the server queues it again.
        const reason = `interrupted: ${String(opts.signal.reason ?? 'signal')}`;
        opts.log?.(`${reason}: stopping; unfinished sessions stay queued for the next run on this database`);
        await stack.node.stop({ reason });
        break;
      }
      opts.onProgress?.(snapshot());
      await Promise.race([Bun.sleep(interval), wake.promise]);
    }
    unsubscribe();
    const final = snapshot(fromStore());
    opts.onProgress?.(final);
    const busy = stack.sim ? stack.sim.metrics().busyFraction : null;
    const summary = summarizeRun(opts.store, taskIds, { engineBusyFraction: busy, wallMs: Date.now() - startedAt });
    const statuses: Record<string, number> = {};
    for (const h of summary.harnesses) for (const [k, v] of Object.entries(h.statuses)) statuses[k] = (statuses[k] ?? 0) + v;
    const sessions = summary.harnesses.reduce((sum, h) => sum + h.sessions, 0);
    // The summary counts a sample that was re-run by its retry's outcome, so a harness crash or an infrastructure
    // failure counts only where no retry made it good (in the last round, or without --max-retries).
    const harnessFailures = summary.harnesses.reduce((sum, h) => sum + h.harness_failures, 0);
    return { summary, taskIds, retriedSessions, statuses, harnessFailures, allCompleted: sessions > 0 && (statuses.COMPLETED ?? 0) === sessions && harnessFailures === 0, final };
  } finally {
    await stack.stop();
  }
}

/**
 * What runTasks throws, before anything starts, for a request that cannot run as asked (a task file the server would
 * refuse, or tasks the database holds under another request): `polar run` exits 2 with it.
 */
export class RunRequestError extends Error {}

/**
 * `key<sep>before there, now now` for each key of `now` whose value (as JSON) differs in `before`: what a stored
 * request and this run's disagree on. Keys only `before` has are not compared.
 */
export function requestDifferences(before: Record<string, unknown>, now: Record<string, unknown>, sep: string): string[] {
  return Object.keys(now).filter((k) => JSON.stringify(before[k]) !== JSON.stringify(now[k])).map((k) => `${k}${sep}${JSON.stringify(before[k])} there, ${JSON.stringify(now[k])} now`);
}

/** What makes two runs of a task the same experiment: samples, builder and agent (harness, command, model, settings). */
function runIdentity(task: TaskRequest): Record<string, unknown> {
  const { harness, command, model_name, settings } = task.agent;
  return { num_samples: task.num_samples, builder: task.builder.strategy, harness: harness ?? null, command: command ?? null, model: model_name, settings: settings ?? {} };
}

/**
 * Tasks of `requests` that the store already holds (finished, or left running by a run that died, which would be
 * resumed) under a different samples / builder / agent request: reporting those results as this run's, or resuming
 * them with another request, would mix two experiments. One line per difference.
 */
export function storedRunConflicts(store: Store, requests: readonly TaskRequest[]): string[] {
  const out: string[] = [];
  for (const request of requests) {
    const stored = store.tasks.get(request.task_id);
    if (!stored) continue;
    const before = runIdentity(stored.task);
    const now = runIdentity(request);
    const differs = requestDifferences(before, now, ' ');
    if (differs.length > 0) out.push(`${request.task_id}: ${differs.join(', ')}`);
  }
  return out;
}

/** Default output directory of a run: `out/polar-run-<UTC timestamp>` under `cwd`. */
export function defaultRunDir(cwd: string, now: Date = new Date()): string {
  return join(cwd, 'out', `polar-run-${now.toISOString().replace(/[:.]/g, '-')}`);
}
