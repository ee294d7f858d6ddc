/**
 * POSTRUN of a gateway session: build the trajectory from the stored completions of this attempt, evaluate, apply
 * rewards, tear the runtimes down, store the SessionResult and deliver it to its callback URL.
 */
import type { EvaluationResult, SessionResult, SessionTiming, Trajectory } from '../core/records.ts';
import { applyRewards, buildTrajectory } from '../trace/index.ts';
import { postWithRetry } from './callback.ts';
import type { Evaluator } from './evaluators/types.ts';
import { cancelledError, errorText, StageAborted, type NodeContext, type Session } from './node-types.ts';
import { sessionDiff } from './prepare.ts';
import type { Runtime } from './runtimes/types.ts';
import { prepareFreshRuntime } from './session-stages.ts';

/** Run POSTRUN for `s` to its SessionResult; never throws for the session's own failures (they become its status). */
export async function postrun(ctx: NodeContext, s: Session): Promise<void> {
  const task = s.spec.task;
  let status: SessionResult['status'] = s.end === null ? 'COMPLETED' : s.end.kind === 'timeout' ? 'TIMEOUT' : 'ERROR';
  let error: string | null = s.end === null ? null : s.end.kind === 'cancelled' ? cancelledError(s.end) : s.end.kind === 'error' ? s.end.error : `${s.end.timeoutKind === 'agent' ? 'agent_timeout' : 'timeout_seconds'} exceeded`;
  const harnessName = task.agent.harness ?? 'shell';
  let trajectory: Trajectory;
  try {
    ctx.setStatus(s, 'BUILDING');
    const buildStart = ctx.clock();
    const records = ctx.opts.store.completions.listBySession(s.id);
    const buildOptions = {
      strategy: task.builder.strategy, config: task.builder.config, eotIds: ctx.opts.eotIds, session_id: s.id, task_id: task.task_id, harness: harnessName,
      // Only this dispatch's calls: a killed or re-dispatched earlier attempt of the same session id left its own.
      attempt: s.spec.attempt ?? 0,
    };
    trajectory = buildTrajectory(records, { ...buildOptions, status, ...(s.end?.kind === 'timeout' ? { timeoutKind: s.end.timeoutKind } : {}) });
    s.t.build = ctx.clock() - buildStart;
    let evaluation: EvaluationResult = { outcome_reward: 0, details: { skipped: `session ${status}` } };
    if (status === 'COMPLETED' && s.evaluator && s.runtime) {
      ctx.setStatus(s, 'EVALUATING');
      const evalStart = ctx.clock();
      // The session's one deadline (timeout_seconds from INIT) bounds the evaluation too: an evaluator that hangs must
      // not hold a POSTRUN slot, and so other tasks' sessions, past it. The time the session waited for a POSTRUN slot
      // is not charged to it (slow evaluations of other sessions must not time this one out). Building and clean-up
      // always finish.
      const slotWait = s.t.postrunStart !== undefined && s.t.runEnd !== undefined ? Math.max(0, s.t.postrunStart - s.t.runEnd) : 0;
      const deadlineAt = (s.t.initStart ?? evalStart) + task.timeout_seconds * 1000 + slotWait;
      const deadline = setTimeout(() => {
        if (s.end !== null) return;
        s.end = { kind: 'timeout', timeoutKind: 'total' };
        s.abort.abort(new StageAborted('timeout'));
      }, Math.max(0, deadlineAt - evalStart));
      let failure: { error: unknown } | null = null;
      try {
        evaluation = await evaluate(ctx, s, s.evaluator, s.runtime);
      } catch (evalError) {
        failure = { error: evalError };
      } finally {
        clearTimeout(deadline);
      }
      // Cut by the deadline, whether the evaluator threw or returned what it had (a killed command's result): TIMEOUT,
      // its trajectory built as a timed-out one, never a COMPLETED session with a reward from a cut-short evaluation.
      if (s.end?.kind === 'timeout') {
        status = 'TIMEOUT';
        error = 'timeout_seconds exceeded while evaluating';
        trajectory = buildTrajectory(records, { ...buildOptions, status, timeoutKind: 'total' });
        evaluation = { outcome_reward: 0, details: { error } };
      } else if (failure !== null) {
        status = 'ERROR';
        error = s.end?.kind === 'cancelled' ? cancelledError(s.end) : `evaluation failed: ${errorText(failure.error)}`;
        trajectory = { ...trajectory, status: 'ERROR' };
        evaluation = { outcome_reward: 0, details: { error } };
      }
      s.t.eval = ctx.clock() - evalStart;
    }
    trajectory = applyRewards(trajectory, evaluation);
    trajectory.metadata.harness_outcome = s.harness
      ? { exit_code: s.harness.exitCode, ...s.harness.outcome, ...(s.harnessLog !== null ? { log: s.harnessLog } : {}) }
      : null;
  } catch (buildError) {
    status = 'ERROR';
    error = `building the trajectory failed: ${errorText(buildError)}`;
    trajectory = emptyTrajectory(error);
    trajectory.metadata.attempt = s.spec.attempt ?? 0;
  }
  await teardown(ctx, s);
  if (s.end?.kind === 'cancelled' && (status !== 'ERROR' || error !== cancelledError(s.end))) {
    // Cancelled while in POSTRUN: whatever was evaluated, the session ends as ERROR "cancelled" (untrainable).
    status = 'ERROR';
    error = cancelledError(s.end);
    trajectory = applyRewards({ ...trajectory, status: 'ERROR' }, { outcome_reward: 0, details: { cancelled: true } });
  }
  // This node is stopping (SIGINT/SIGTERM): the session was interrupted, not failed, and nothing is cancelled because
  // we restarted. Its result is neither stored nor sent: the rollout server runs the session again as a new attempt
  // (the node's leave notice, a missed heartbeat, or this node's re-registration after a restart tells it). The
  // completions it captured stay stored under this attempt.
  const end = s.end;
  const interrupted = end?.kind === 'cancelled' && end.interrupted === true;
  if (interrupted) {
    status = 'CANCELLED';
    error = end.reason ?? 'interrupted';
  }
  const now = ctx.clock();
  const result: SessionResult = {
    session_id: s.id, task_id: task.task_id, status, trajectory, timing: timing(s, now), node_id: ctx.nodeId, error, attempt: s.spec.attempt ?? 0,
  };
  let stored = false;
  try {
    if (!interrupted) stored = ctx.opts.store.results.put(result);
  } catch (storeError) {
    ctx.opts.log?.(`storing the result of ${s.id} failed: ${errorText(storeError)}`);
  }
  s.result = result;
  s.stage = 'done';
  ctx.setStatus(s, status === 'CANCELLED' ? 'ERROR' : status); // the node's own view: untrainable, ended
  for (const cb of ctx.resultListeners) {
    try { cb(result); } catch { /* listeners must not break delivery */ }
  }
  const callbackUrl = interrupted ? undefined : s.spec.callback_url ?? task.callback_url;
  const delivery = callbackUrl ? deliver(ctx, callbackUrl, result) : null;
  if (delivery) ctx.track(delivery);
  ctx.finished(s, stored, delivery);
  s.resolveDone(result);
}

async function evaluate(ctx: NodeContext, s: Session, evaluator: Evaluator, runtime: Runtime): Promise<EvaluationResult> {
  const signal = s.abort.signal;
  let diff: Promise<string> | null = null;
  return evaluator.evaluate({
    task: s.spec.task,
    config: s.spec.task.evaluator?.config ?? {},
    runtime,
    harness: s.harness,
    signal,
    diff: () => (diff ??= sessionDiff(runtime, signal)),
    freshRuntime: () => (s.evalRuntime ??= prepareFreshRuntime(ctx, s)),
  });
}

/**
 * Stop the session and evaluation runtimes (each bounded by `teardownTimeoutMs`, default 60 000 ms); always runs, never
 * throws (failures are logged). Also used for a READY session handed back to the rollout server (node.ts).
 */
export async function teardown(ctx: NodeContext, s: Session): Promise<void> {
  const timeout = ctx.opts.teardownTimeoutMs ?? 60_000;
  const stops: Promise<void>[] = [];
  if (s.proc) stops.push(s.proc.kill().catch(() => {}));
  if (s.runtime) stops.push(s.runtime.stop());
  if (s.evalRuntime) stops.push(s.evalRuntime.then((r) => r.stop(), () => {}));
  const results = await Promise.allSettled(stops.map((p) => raceTimeout(p, timeout)));
  for (const r of results) if (r.status === 'rejected') ctx.opts.log?.(`teardown of ${s.id}: ${errorText(r.reason)}`);
}

function timing(s: Session, now: number): SessionTiming {
  const t = s.t;
  const span = (a?: number, b?: number) => (a !== undefined && b !== undefined ? Math.max(0, b - a) : 0);
  return {
    init_queue_ms: span(t.dispatched, t.initStart),
    init_ms: span(t.initStart, t.initEnd),
    ready_queue_ms: span(t.initEnd, t.runStart),
    run_ms: span(t.runStart, t.runEnd),
    postrun_ms: span(t.postrunStart, now),
    build_ms: t.build,
    eval_ms: t.eval,
    e2e_ms: Math.max(0, now - t.dispatched),
  };
}

/** POST the result to its callback URL (retried); resolves true once delivered, false when it gave up (logged). */
async function deliver(ctx: NodeContext, url: string, result: SessionResult): Promise<boolean> {
  try {
    await postWithRetry(url, result, { ...ctx.opts.callbackRetry, token: ctx.opts.controlPlaneToken, fetch: ctx.opts.fetch, signal: ctx.stopping() });
    return true;
  } catch (error) {
    ctx.opts.log?.(`callback for ${result.session_id} to ${url} failed: ${errorText(error)}`);
    return false;
  }
}

function emptyTrajectory(reason: string): Trajectory {
  return {
    status: 'ERROR',
    traces: [],
    metadata: {
      reconstruction_stats: { completions: 0, chains: 0, merged: 0, breaks: {} },
      evaluation: null,
      training_filter: { trainable: false, reasons: [reason] },
    },
  };
}

function raceTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms); })])
    .finally(() => clearTimeout(timer));
}
