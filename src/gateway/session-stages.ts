/**
 * What a gateway session does in INIT (harness install, runtime start, prepare actions, harness config) and RUNNING
 * (the harness process group), as functions of the node's context (./node-types.ts) and the session.
 */
import { join } from 'node:path';
import { harnessSettings } from '../core/contracts/index.ts';
import { defaultHarnessCache, harnessPaths, installHarness, nodeShimDir } from './harnesses/install.ts';
import type { HarnessOutcome } from './harnesses/types.ts';
import { harnessFailureError, writeHarnessLog } from './harness-output.ts';
import { errorText, raceAbort, type NodeContext, type Session } from './node-types.ts';
import { commitBaseline, runPrepare } from './prepare.ts';
import type { Runtime } from './runtimes/types.ts';

/**
 * The `beforeSession` hook threw (nothing of the session was started yet). Its message is the hook's; the node puts
 * the session back in its queue when the engine is down at that moment (the hook registers sim scripts with it).
 */
export class BeforeSessionFailed extends Error {
  constructor(cause: unknown) {
    super(errorText(cause), { cause });
    this.name = 'BeforeSessionFailed';
  }
}

/**
 * INIT: the `beforeSession` hook, the harness package (installed on first use), the runtime, prepare actions, the
 * diff baseline when the evaluator needs one, and the harness's files and links. Throws on any failure (the session
 * then goes to POSTRUN with `init failed: …`).
 */
export async function initSession(ctx: NodeContext, s: Session): Promise<void> {
  const signal = s.abort.signal;
  const task = s.spec.task;
  let binPath: string | null = null;
  let installDir: string | null = null;
  if (ctx.opts.beforeSession) {
    try {
      await raceAbort(ctx.opts.beforeSession(task, signal), signal);
    } catch (error) {
      throw signal.aborted ? error : new BeforeSessionFailed(error);
    }
  }
  const pkg = s.adapter.package;
  if (pkg) {
    const cacheDir = ctx.opts.harnessCacheDir ?? defaultHarnessCache();
    const paths = harnessPaths(cacheDir, pkg);
    if (!paths.installed && ctx.opts.autoInstallHarness === false) throw new Error(`harness ${s.adapter.name} is not installed (run \`polar harness install ${s.adapter.name}\`)`);
    binPath = paths.installed ? paths.bin : await raceAbort(installHarness(pkg, { cacheDir, log: ctx.opts.log }), signal);
    installDir = paths.nodeModules;
    // A JavaScript CLI on a host without node runs on this process's Bun (a `node` shim after the CLI's own .bin).
    const shim = nodeShimDir(cacheDir, pkg);
    s.toolDirs = shim ? [paths.binDir, shim] : [paths.binDir];
  }
  const runtime = ctx.runtimeFactory(s.runtimeSpec, { instanceKey: s.id, workRoot: ctx.opts.workRoot, toolDirs: s.toolDirs, gateway: ctx.gatewayEndpoint() });
  s.runtime = runtime;
  await runtime.start(signal);
  signal.throwIfAborted();
  await runPrepare(runtime, s.runtimeSpec.prepare, signal);
  if (s.needsDiff) await commitBaseline(runtime, signal);
  const launch = s.adapter.launch({
    sessionId: s.id, instruction: task.instruction, modelName: task.agent.model_name, gatewayUrl: ctx.gatewayUrl(),
    home: runtime.homeDir, workDir: runtime.workDir, binPath, installDir, settings: harnessSettings(task.agent.settings), command: task.agent.command,
  });
  for (const file of launch.files) await runtime.writeFile(file.path, file.content);
  for (const link of launch.links ?? []) {
    const r = await runtime.exec(['sh', '-c', 'mkdir -p "$(dirname "$1")" && ln -sfn "$0" "$1"', link.target, link.path], { signal });
    if (r.exitCode !== 0) throw new Error(`linking ${link.path} failed: ${r.stderr.trim()}`);
  }
  s.launch = launch;
}

/** RUNNING: spawn the harness as its own process group, wait for its leader, judge its outcome, keep its log. */
export async function runHarness(ctx: NodeContext, s: Session): Promise<void> {
  const runtime = s.runtime!;
  const launch = s.launch!;
  if (s.abort.signal.aborted) return;
  // The agent's own env first: the adapter's base URL and key must win, or nothing is captured.
  const proc = runtime.spawn(launch.argv, { env: { ...(s.spec.task.agent.env ?? {}), ...launch.env }, closeStdin: true });
  s.proc = proc;
  const onAbort = () => void proc.kill();
  s.abort.signal.addEventListener('abort', onAbort, { once: true });
  try {
    const { exitCode } = await proc.exited;
    const run = { exitCode, stdout: proc.stdout(), stderr: proc.stderr() };
    const killed = s.abort.signal.aborted;
    const outcome: HarnessOutcome = killed ? { success: false, reason: 'killed' } : s.adapter.outcome(run);
    s.harness = { exitCode, outcome };
    keepHarnessLog(ctx, s, run, outcome);
    // A CLI that reported failure did not do the task: the session is ERROR (never trained on), with the output tail
    // in the error so the cause is visible. A kill (timeout, cancel) already set s.end.
    if (!killed && !outcome.success && s.end === null) s.end = { kind: 'error', error: harnessFailureError(s.adapter.name, run, outcome) };
  } finally {
    s.abort.signal.removeEventListener('abort', onAbort);
  }
}

function keepHarnessLog(ctx: NodeContext, s: Session, run: { exitCode: number | null; stdout: string; stderr: string }, outcome: HarnessOutcome): void {
  const dir = ctx.opts.harnessLogDir === undefined ? join(ctx.opts.workRoot, 'harness-logs') : ctx.opts.harnessLogDir;
  if (dir === null) return;
  try {
    s.harnessLog = writeHarnessLog(dir, {
      sessionId: s.id, taskId: s.spec.task.task_id, sampleIndex: s.spec.sample_index, harness: s.adapter.name, command: s.launch?.argv[0] ?? '',
    }, run, outcome);
  } catch (error) {
    ctx.opts.log?.(`writing the harness log of ${s.id} failed: ${errorText(error)}`);
  }
}

/** A second runtime prepared like the session's (prepare actions + baseline), for refresh_runtime evaluators. */
export async function prepareFreshRuntime(ctx: NodeContext, s: Session): Promise<Runtime> {
  const runtime = ctx.runtimeFactory(s.runtimeSpec, { instanceKey: `${s.id}:eval`, workRoot: ctx.opts.workRoot, toolDirs: s.toolDirs, gateway: ctx.gatewayEndpoint() });
  const signal = ctx.stopping();
  try {
    await runtime.start(signal);
    await runPrepare(runtime, s.runtimeSpec.prepare, signal);
    await commitBaseline(runtime, signal);
    return runtime;
  } catch (error) {
    await runtime.stop().catch(() => {});
    throw error;
  }
}
