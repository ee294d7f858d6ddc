/**
 * `polar run TASKS [--harness NAME] [--samples N] [--engine KIND --engine-url URL[,URL…]] [--mode chat|token] [--tokenizer DIR] [--db FILE] [--out DIR]
 * [--builder prefix_merging] [--concurrency N]`: the one-shot job. Everything runs in this process:
 * the simulator (when no engine is given), a rollout server and one gateway node with the proxy, the same path as
 * `polar serve`. Prints live progress and a summary table, writes the SQLite results file (for `polar export`,
 * `polar trace verify`) and summary.json into the output directory.
 * Exit 0 when every session COMPLETED (reward may be 0) and no harness CLI reported a failure in its result event,
 * 1 otherwise, 2 on bad usage; with --max-retries a sample counts by its last attempt, in the summary as in the exit code.
 */
import { Option, type Command } from 'commander';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { BuilderName } from '../core/records.ts';
import { ENGINE_KINDS, type CaptureMode, type EngineKind } from '../engines/index.ts';
import { HARNESS_ADAPTERS } from '../gateway/harnesses/index.ts';
import { assertSandboxAvailable, describeSandbox, parseRuntimeSpec, sandboxLine, type RuntimeSpec } from '../gateway/runtimes/index.ts';
import { createProgressView } from '../stack/run-progress.ts';
import { formatSummaryTable } from '../stack/run-summary.ts';
import { engineReplicasLivenessCheck, waitForEngine } from '../engines/health.ts';
import { collectEngineUrls, engineUrlFields } from './engine-urls.ts';
import { DEFAULT_MODEL_NAME, defaultRunDir, requestDifferences, RunRequestError, runRequests, runTasks } from '../stack/run-tasks.ts';
import { addDatasetFlags, loadTasksArg, type DatasetFlags } from './dataset-flags.ts';
import { printTaskNotes } from './harbor-flags.ts';
import { formatSplits, parseAccept, summarizeSplits, writeAccepted, type AcceptFilter } from '../stack/run-outputs.ts';
import { openStore } from '../store/index.ts';
import { BUILDER_NAMES } from '../trace/index.ts';
import { EXIT_FAILED, harnessFlag, refuseGivenFlags, UsageError, parsePositiveInt, polarCommand } from './common.ts';
import type { SystemMessagePlacement } from '../engines/chat-request.ts';

interface RunFlags extends DatasetFlags {
  harness?: string;
  command?: string;
  samples?: number;
  fresh?: boolean;
  engine?: string;
  engineUrl?: string[];
  engineApiKey?: string;
  servedModel?: string;
  systemMessages: SystemMessagePlacement | 'auto';
  mode: string;
  tokenizer?: string;
  allowGoldenMismatch?: boolean;
  db?: string;
  out?: string;
  builder?: string;
  concurrency: number;
  model?: string;
  piApi?: string;
  agentSettings?: Record<string, unknown>;
  restoreReasoning?: boolean;
  decodeTps?: number;
  prefillTps?: number;
  timeoutS?: number;
  engineWaitS: number;
  quiet?: boolean;
  maxRetries: number;
  accept?: string;
  runtime?: string;
  image?: string;
  runtimeArg: string[];
  runtimeBinary?: string;
  network?: string;
  roPath: string[];
  sandbox: boolean;
}

/** A flag whose value is a JSON object; anything else is a usage error naming the flag. */
function parseJsonObject(flag: string) {
  return (value: string): Record<string, unknown> => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch (error) {
      throw new UsageError(`${flag} must be a JSON object: ${(error as Error).message}`);
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new UsageError(`${flag} must be a JSON object, got ${JSON.stringify(value)}`);
    return parsed as Record<string, unknown>;
  };
}

function parseNonNegativeInt(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) throw new UsageError(`${flag} must be an integer ≥ 0, got ${JSON.stringify(value)}`);
    return n;
  };
}

function parseNonNegative(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n < 0) throw new UsageError(`${flag} must be a number ≥ 0, got ${JSON.stringify(value)}`);
    return n;
  };
}

export function register(program: Command): void {
  addDatasetFlags(program.command('run'))
    .description('one-shot job: run every task × sample through a local gateway (simulator unless --engine), print a summary, write results')
    .argument('<tasks>', 'task.yaml, a task directory (ours or Harbor\'s), a directory of them (e.g. examples/tasks), or a dataset file with --dataset-format')
    .option('--harness <name>', `agent harness: ${Object.keys(HARNESS_ADAPTERS).join(', ')} (default: each task file's agent block; with it, the file's agent.env and agent.settings are kept)`)
    .option('--command <cmd>', 'shell or custom harness: command line to run ({{INSTRUCTION}} is replaced by the quoted instruction); without --harness it replaces the task file\'s agent.command')
    .option('--samples <n>', "num_samples: sessions per task (default: the task file's num_samples, else 1)", parsePositiveInt('--samples'))
    .option('--engine <kind>', `inference engine: ${ENGINE_KINDS.join(', ')} (default: start the simulator in-process)`)
    .option('--engine-url <url>', 'engine base URL without /v1 (required with --engine); repeat it or separate URLs with commas for replicas of one engine (session affinity, least outstanding requests)', collectEngineUrls)
    .option('--engine-api-key <key>', 'bearer token for the engine (default: $POLAR_ENGINE_API_KEY)')
    .option('--served-model <name>', 'model name sent to the engine (default: the first it lists)')
    .addOption(new Option('--system-messages <placement>', "with --engine: auto (detect whether the engine's chat template renders a system message after a user turn), merge later system messages into the leading one, or keep them in place (templates that allow it, e.g. Qwen3)").choices(['auto', 'merge', 'in-place']).default('auto'))
    .option('--mode <mode>', 'capture mode: chat (the engine renders the template) or token (the proxy renders and sends token ids)', 'chat')
    .option('--tokenizer <dir>', 'Hugging Face directory of the model (tokenizer.json + chat template): token mode renders with it, and the built-in simulator serves it (default: embedded Qwen3)')
    .option('--allow-golden-mismatch', 'token mode: start even when our chat template rendering differs from the engine\'s (default: refuse)')
    .option('--model <name>', `model name the harness asks for (default: the task file's agent.model_name; with --harness, ${DEFAULT_MODEL_NAME})`)
    .option('--restore-reasoning', "chat mode: restore reasoning a harness dropped from its history (from the session's own answers) before the engine renders it")
    .option('--db <file>', 'SQLite results file (default: <out>/results.db)')
    .option('--out <dir>', 'output directory (default: out/polar-run-<timestamp>)')
    .option('--builder <strategy>', `trajectory builder for the stored results: ${BUILDER_NAMES.join(' or ')} (default: the task file's builder, else prefix_merging)`)
    .option('--concurrency <n>', 'harness runs at once (gateway max_run_workers)', parsePositiveInt('--concurrency'), 8)
    .option('--agent-settings <json>', 'agent.settings as a JSON object: the harness\'s own keys (README.md#harnesses, e.g. pi: {"context_window": 131072}), checked before the run starts', parseJsonObject('--agent-settings'))
    .option('--pi-api <api>', 'pi harness: provider API (anthropic-messages, openai-completions, openai-responses, google-generative-ai)')
    .option('--decode-tps <n>', 'simulator: generated tokens per second per sequence (0 = instant)', parseNonNegative('--decode-tps'))
    .option('--prefill-tps <n>', 'simulator: prompt tokens per second (0 = instant)', parseNonNegative('--prefill-tps'))
    .option('--timeout-s <s>', 'wall-clock limit of the whole job in seconds; unfinished tasks are cancelled', parsePositiveInt('--timeout-s'))
    .option('--engine-wait-s <s>', 'with --engine: how long to wait for the engine to answer before failing (exit 1) without running anything', parseNonNegative('--engine-wait-s'), 10)
    .option('--fresh', 'start over: cancel what the database holds as running and run every task again as a new run (default: resume unfinished sessions)')
    .option('--quiet', 'no live progress')
    .option('--max-retries <n>', 'rounds of re-running sessions that failed for infrastructure reasons (status ERROR); never policy failures', parseNonNegativeInt('--max-retries'), 0)
    .option('--accept <expr>', "write the traces of accepted sessions to <out>/accepted.jsonl, e.g. 'reward>0' or 'reward>=0.5 && reward<1'")
    .option('--runtime <kind>', 'run every task in this runtime: local, docker, podman or apptainer (default: the task\'s own, local)')
    .option('--image <ref>', 'container image for --runtime docker|podman|apptainer')
    .option('--runtime-arg <arg>', 'extra argument for the container `run` (repeatable, e.g. --runtime-arg=-v --runtime-arg=/usr:/usr:ro)', (v: string, prev: string[]) => [...prev, v], [] as string[])
    .option('--runtime-binary <path>', 'container CLI to call (default: the runtime kind\'s name on PATH)')
    .option('--network <mode>', 'sandbox network: gateway (only the model API, default), none or host')
    .option('--ro-path <path>', 'host path every sandbox sees read-only (repeatable)', (v: string, prev: string[]) => [...prev, v], [] as string[])
    .option('--no-sandbox', 'local runtime without bubblewrap: harnesses run as plain host processes (trusted tasks only)')
    .action(async (tasksPath: string, flags: RunFlags, command: Command) => {
      if (flags.builder !== undefined && !(BUILDER_NAMES as string[]).includes(flags.builder)) throw new UsageError(`--builder must be one of ${BUILDER_NAMES.join(', ')}, got ${JSON.stringify(flags.builder)}`);
      if (flags.harness !== undefined) harnessFlag(flags.harness);
      if (flags.harness === 'custom' && !flags.command && typeof flags.agentSettings?.command !== 'string') {
        throw new UsageError('--harness custom needs --command (or "command" in --agent-settings)');
      }
      if (flags.mode !== 'chat' && flags.mode !== 'token') throw new UsageError(`--mode must be chat or token, got ${JSON.stringify(flags.mode)}`);
      assertFlagsTakeEffect(flags, command);
      if (flags.mode !== 'token' && flags.engine !== undefined && flags.tokenizer !== undefined) throw new UsageError('--tokenizer applies to --mode token (or to the built-in simulator)');
      if (flags.tokenizer !== undefined && !existsSync(flags.tokenizer)) throw new UsageError(`--tokenizer ${flags.tokenizer} does not exist`);
      if (flags.engine !== undefined) {
        if (!(ENGINE_KINDS as readonly string[]).includes(flags.engine)) throw new UsageError(`--engine must be one of ${ENGINE_KINDS.join(', ')}, got ${JSON.stringify(flags.engine)}`);
        if (!flags.engineUrl) throw new UsageError('--engine needs --engine-url');
      } else if (flags.engineUrl) throw new UsageError('--engine-url needs --engine KIND');
      if (!existsSync(tasksPath)) throw new UsageError(`no such task file or directory: ${tasksPath}`);
      let runtime: Partial<Omit<RuntimeSpec, 'prepare'>> | undefined;
      try {
        runtime = runtimeOverride(flags);
        if (flags.runtime === undefined || flags.runtime === 'local') assertSandboxAvailable({ kind: 'local', ...(runtime ?? {}) });
      } catch (error) {
        throw new UsageError((error as Error).message);
      }
      const sandbox = describeSandbox({ kind: 'local', ...(runtime ?? {}) });
      let accept: AcceptFilter | null = null;
      try {
        accept = flags.accept !== undefined ? parseAccept(flags.accept) : null;
      } catch (error) {
        throw new UsageError((error as Error).message);
      }
      // Harbor tasks and dataset rows map onto a container runtime (their own image) with --runtime docker|podman;
      // with --image every task gets that image anyway (runtimeOverride), so they load as local tasks.
      const taskRuntime = (flags.runtime === 'docker' || flags.runtime === 'podman') && flags.image === undefined ? flags.runtime : 'local';
      const tasks = await loadTasksArg(tasksPath, { ...flags, taskRuntime });
      printTaskNotes(tasks, (line) => console.error(`polar run: ${line}`));
      for (const task of tasks) {
        const agent = task.task.agent;
        if (flags.harness === undefined && agent === undefined) {
          throw new UsageError(`${task.file}: no agent to run task ${JSON.stringify(task.task.task_id)}: pass --harness NAME (e.g. --harness pi) or give \`agent: {harness: NAME, model_name: MODEL}\` in the task file`);
        }
        if (flags.harness === 'shell' && !flags.command && agent?.command === undefined) throw new UsageError('--harness shell needs --command (or a task file agent.command)');
      }
      const settings = flags.piApi || flags.agentSettings ? { ...flags.agentSettings, ...(flags.piApi ? { api: flags.piApi } : {}) } : undefined;
      const requestOptions = {
        tasks, harness: flags.harness, command: flags.command, modelName: flags.model, settings,
        ...(flags.samples !== undefined ? { samples: flags.samples } : {}),
        ...(flags.builder !== undefined ? { builder: flags.builder as BuilderName } : {}),
        ...(runtime ? { runtime } : {}),
      };
      // Every task as the server's submit checks it (harness settings included), before the engine wait and before
      // the output directory or database exists: a bad task file leaves nothing behind.
      try {
        runRequests(requestOptions);
      } catch (error) {
        if (error instanceof RunRequestError) throw new UsageError(error.message);
        throw error;
      }

      const engine = flags.engine
        ? {
            kind: flags.engine as EngineKind, ...engineUrlFields(flags.engineUrl!), mode: flags.mode as CaptureMode, apiKey: flags.engineApiKey ?? process.env.POLAR_ENGINE_API_KEY,
            servedModel: flags.servedModel, systemMessages: flags.systemMessages,
            tokenizerDir: flags.tokenizer, allowGoldenMismatch: flags.allowGoldenMismatch === true,
          }
        : null;
      if (engine) {
        // Before anything is created or dispatched: an engine that never answers would otherwise fail every session.
        try {
          await waitForEngine(engineReplicasLivenessCheck(engine), { describe: `engine ${engine.kind} at ${flags.engineUrl!.join(', ')}`, timeoutMs: flags.engineWaitS * 1000 });
        } catch (error) {
          console.error(`polar run: ${(error as Error).message}`);
          console.error('polar run: start the engine (or fix --engine/--engine-url); nothing was run.');
          process.exitCode = EXIT_FAILED;
          return;
        }
      }

      const outDir = resolve(flags.out ?? defaultRunDir(process.cwd()));
      const dbPath = resolve(flags.db ?? join(outDir, 'results.db'));
      mkdirSync(outDir, { recursive: true });
      checkRunRequest(outDir, {
        harness: flags.harness ?? null, command: flags.command ?? null, model: flags.model ?? DEFAULT_MODEL_NAME,
        tasks: tasks.map((t) => t.task.task_id).sort(),
      }, flags.fresh === true);
      // SIGINT/SIGTERM: stop dispatching, interrupt what runs (its process groups end with the node; the sessions stay
      // queued, so a run with the same --out resumes them), write the summary so far and exit 130 (143 for SIGTERM);
      // a second signal exits at once.
      const interrupt = new AbortController();
      const onSignal = (signal: NodeJS.Signals) => {
        if (interrupt.signal.aborted) {
          stopView();
          process.exit(130);
        }
        console.error(`\npolar run: ${signal}: stopping (interrupting running sessions; ${signal === 'SIGINT' ? 'Ctrl-C' : signal} again to force)`);
        interrupt.abort(signal);
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      const store = openStore(dbPath, { checkpoint: 'background' });
      const view = flags.quiet ? null : createProgressView({ stream: process.stdout });
      let last: Parameters<NonNullable<typeof view>['update']>[0] | null = null;
      let viewStopped = false;
      const stopView = () => {
        if (view && last && !viewStopped) view.stop(last);
        viewStopped = true;
      };
      try {
        const sampleCounts = new Set(tasks.map((t) => flags.samples ?? t.task.num_samples ?? 1));
        const samplesText = sampleCounts.size === 1 ? `${[...sampleCounts][0]} sample(s)` : `${[...sampleCounts].sort((a, b) => a - b).join('–')} sample(s) (each task file's num_samples)`;
        console.log(`polar run: ${tasks.length} task(s) × ${samplesText} with harness ${flags.harness ?? 'from each task file'} on ${flags.engine ? `${flags.engine} at ${flags.engineUrl!.join(', ')}` : 'the built-in simulator'}; results → ${dbPath}`);
        console.log(`polar run: sandbox: ${sandboxLine(sandbox)}`);
        let report: Awaited<ReturnType<typeof runTasks>>;
        try {
          report = await runTasks({
            ...requestOptions,
            store,
            engine,
            engineWaitMs: flags.engineWaitS * 1000,
            sim: {
              ...(flags.tokenizer !== undefined ? { tokenizerDir: flags.tokenizer } : {}),
              ...(flags.decodeTps !== undefined ? { decodeTps: flags.decodeTps } : {}),
              ...(flags.prefillTps !== undefined ? { prefillTps: flags.prefillTps } : {}),
            },
            mode: flags.mode,
            ...(flags.restoreReasoning ? { restoreReasoning: true } : {}),
            concurrency: flags.concurrency,
            workRoot: join(outDir, 'work'),
            onProgress: (s) => {
              last = s;
              view?.update(s);
            },
            deadlineMs: flags.timeoutS !== undefined ? flags.timeoutS * 1000 : undefined,
            fresh: flags.fresh === true,
            signal: interrupt.signal,
            log: (line) => (isProblem(line) ? console.error : console.log)(`polar run: ${line}`),
            maxRetries: flags.maxRetries,
          });
        } catch (error) {
          if (error instanceof RunRequestError) throw new UsageError(error.message);
          throw error;
        }
        stopView();
        console.log('');
        console.log(formatSummaryTable(report.summary));
        const splits = summarizeSplits(store, report.taskIds);
        for (const line of formatSplits(splits)) console.log(line);
        let accepted: { traces: number; sessions: number; path: string } | null = null;
        if (accept) {
          const path = join(outDir, 'accepted.jsonl');
          accepted = { ...writeAccepted(store, report.taskIds, accept, path), path };
          console.log(`accepted (${flags.accept}): ${accepted.sessions} session(s), ${accepted.traces} trace(s) → ${path}`);
        }
        const summaryPath = join(outDir, 'summary.json');
        writeFileSync(summaryPath, `${JSON.stringify({
          ...report.summary, statuses: report.statuses, all_completed: report.allCompleted, harness_failures: report.harnessFailures, sandbox, db: dbPath,
          splits, retried_sessions: report.retriedSessions, ...(accepted ? { accepted } : {}),
        }, null, 2)}\n`);
        console.log('');
        console.log(`sandbox: ${sandboxLine(sandbox)}`);
        console.log(`results: ${dbPath}`);
        console.log(`summary: ${summaryPath}`);
        const polar = polarCommand();
        console.log(`list:    ${polar} results --db ${dbPath}`);
        console.log(`export:  ${polar} export --db ${dbPath} --format jsonl --out ${join(outDir, 'traces.jsonl')}`);
        if (interrupt.signal.aborted) {
          console.error(`polar run: interrupted by ${String(interrupt.signal.reason)}; unfinished sessions stay queued (run again with the same --out to resume them)`);
          process.exitCode = interrupt.signal.reason === 'SIGTERM' ? 143 : 130;
        } else if (!report.allCompleted) {
          const failures = report.harnessFailures > 0 ? `; harness CLI failures: ${report.harnessFailures}` : '';
          console.error(`polar run: not every session completed its work: ${Object.entries(report.statuses).map(([k, v]) => `${k} ${v}`).join(', ')}${failures}`);
          process.exitCode = EXIT_FAILED;
        }
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
        stopView(); // restores the cursor and line wrap, also when the run threw
        store.close();
      }
    });
}

/**
 * Refuse flags that would be silently ignored: the external-engine flags without --engine (the built-in simulator runs
 * instead), the simulator's speed flags with --engine, and --restore-reasoning in token mode.
 * @throws UsageError naming the flags.
 */
function assertFlagsTakeEffect(flags: RunFlags, command: Command): void {
  if (flags.engine === undefined) {
    refuseGivenFlags(command, [['engineApiKey', '--engine-api-key'], ['servedModel', '--served-model'], ['systemMessages', '--system-messages'], ['allowGoldenMismatch', '--allow-golden-mismatch'], ['engineWaitS', '--engine-wait-s']],
      'to an external engine: pass --engine KIND --engine-url URL (without them polar run starts the built-in simulator)');
  } else {
    refuseGivenFlags(command, [['decodeTps', '--decode-tps'], ['prefillTps', '--prefill-tps']], 'the built-in simulator, which --engine replaces', ['sets', 'set']);
  }
  if (flags.mode === 'token' && flags.restoreReasoning === true) throw new UsageError('--restore-reasoning applies to --mode chat only (in token mode the proxy renders the sampled tokens itself)');
}

/** The `runtime` laid over every task from the command line (undefined when no flag says anything). */
function runtimeOverride(flags: RunFlags): Partial<Omit<RuntimeSpec, 'prepare'>> | undefined {
  const raw: Record<string, unknown> = {
    ...(flags.runtime !== undefined ? { kind: flags.runtime } : {}),
    ...(flags.image !== undefined ? { image: flags.image } : {}),
    ...(flags.runtimeArg.length > 0 ? { run_args: flags.runtimeArg } : {}),
    ...(flags.runtimeBinary !== undefined ? { binary: flags.runtimeBinary } : {}),
    ...(flags.network !== undefined ? { network: flags.network } : {}),
    ...(flags.roPath.length > 0 ? { read_only_paths: flags.roPath.map((p) => resolve(p)) } : {}),
    ...(flags.sandbox === false ? { isolation: 'none' } : {}),
  };
  if (Object.keys(raw).length === 0) return undefined;
  if (raw.kind !== undefined && raw.kind !== 'local' && raw.isolation === 'none') throw new Error('--no-sandbox applies to the local runtime only');
  // Without --image, each task's own image (Harbor `docker_image`, a dataset row's image) is used; a task without one
  // is refused before anything runs (runTasks checks every task as the server would).
  const { prepare: _prepare, ...spec } = parseRuntimeSpec(undefined, { kind: 'local', ...raw } as Partial<RuntimeSpec>);
  return Object.fromEntries(Object.entries(spec).filter(([k]) => k in raw)) as Partial<Omit<RuntimeSpec, 'prepare'>>;
}

/**
 * Whether a log line reports a problem (stderr, which terminals and CI logs often show in red) rather than progress
 * (stdout): failures, warnings, errors, an unreachable or refusing engine.
 */
export function isProblem(line: string): boolean {
  return /\b(warning|error|fail(ed|s|ure)?|unreachable|not reachable|refused|cannot|invalid)\b/i.test(line);
}

/** What a run directory was created for; a later run into it must ask for the same (or pass --fresh). */
interface RunRequest {
  /** null: each task file's own agent block. */
  harness: string | null;
  command: string | null;
  model?: string;
  tasks: string[];
}

/**
 * Record the request in `<out>/run.json`, or check it against the one recorded there: a different harness, model or
 * task set would mix two experiments in one database and report the old results as new. (Sample counts and builders
 * are checked per task against the database itself: run-tasks.ts storedRunConflicts. Keys an older run.json holds
 * beyond these are not compared.)
 * @throws UsageError (exit 2) saying what differs, unless `fresh`.
 */
function checkRunRequest(outDir: string, request: RunRequest, fresh: boolean): void {
  const file = join(outDir, 'run.json');
  if (existsSync(file) && !fresh) {
    let previous: Partial<RunRequest> = {};
    try {
      previous = JSON.parse(readFileSync(file, 'utf8')) as Partial<RunRequest>;
    } catch {
      // unreadable: treated as a different request below
    }
    const differs = requestDifferences(previous, { ...request }, ': ');
    if (differs.length > 0) {
      const what = differs.join('; ');
      throw new UsageError(`${outDir} holds a different run (${what}); use another --out, or --fresh to start over there`);
    }
  }
  writeFileSync(file, `${JSON.stringify(request, null, 2)}\n`);
}
