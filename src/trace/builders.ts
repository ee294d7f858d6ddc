/**
 * The builder registry and `buildTrajectory` (docs/architecture.md#trajectory-builders). A builder turns one session's
 * CompletionRecords into traces; adding a strategy is one entry in `BUILDERS`.
 */
import type { BuilderName, CompletionRecord, ReconstructionStats, Trace, Trajectory, TrajectoryStatus } from '../core/records.ts';
import { selectAttempt } from './attempts.ts';
import { applyTrainingFilter } from './filter.ts';
import { buildPrefixMerged } from './prefix-merging.ts';
import { keepsTrace, labelChainRoles, parseBuilderConfig } from './roles.ts';
import { BREAK_REASONS, type BuildContext, singleTrace } from './trace-parts.ts';

export interface BuilderOutput {
  traces: Trace[];
  stats: ReconstructionStats;
  /** End-of-turn ids the builder used (configured or detected; empty when it needs none or found none). */
  eotIds: number[];
}

/** A trajectory builder: records of one session, in seq order → traces. Must place every record in one trace. */
export interface TraceBuilder {
  readonly name: BuilderName;
  build(records: readonly CompletionRecord[], ctx: BuildContext): BuilderOutput;
}

const perRequest: TraceBuilder = {
  name: 'per_request',
  build(records, ctx) {
    const breaks: Record<string, number> = {};
    for (const reason of BREAK_REASONS) breaks[reason] = 0;
    const traces = records.map((rec, i) => {
      const trace = singleTrace(rec, 'per_request', ctx, i, 'first');
      if (typeof trace.metadata.capture_error === 'string') {
        trace.metadata.started_by = 'capture_error';
        breaks.capture_error = (breaks.capture_error ?? 0) + 1;
      }
      return trace;
    });
    return { traces, stats: { completions: records.length, chains: traces.length, merged: records.length, breaks }, eotIds: [] };
  },
};

const prefixMerging: TraceBuilder = {
  name: 'prefix_merging',
  build: (records, ctx) => buildPrefixMerged(records, ctx),
};

/** Every registered builder by name. */
export const BUILDERS: Readonly<Record<BuilderName, TraceBuilder>> = {
  per_request: perRequest,
  prefix_merging: prefixMerging,
};

/** The names `--builder` and `TaskRequest.builder.strategy` accept. */
export const BUILDER_NAMES = Object.keys(BUILDERS) as BuilderName[];

/** Look up a builder. @throws Error naming the valid strategies when `name` is unknown. */
export function getBuilder(name: string): TraceBuilder {
  if (!Object.hasOwn(BUILDERS, name)) {
    throw new Error(`unknown builder strategy ${JSON.stringify(name)}; expected one of ${BUILDER_NAMES.join(', ')}`);
  }
  return BUILDERS[name as BuilderName];
}

export interface BuildTrajectoryOptions {
  strategy: BuilderName;
  /** End-of-turn ids from the tokenizer config (e.g. Qwen3 [151645, 151643]); default: detect from the records. */
  eotIds?: number[];
  session_id: string;
  task_id: string;
  harness: string;
  status: TrajectoryStatus;
  /** Which budget ran out when status is TIMEOUT: `agent` (agent_timeout during the run) stays trainable. */
  timeoutKind?: 'agent' | 'total';
  /**
   * The session's dispatch attempt (0-based) whose records form the trajectory; records of its other attempts (a
   * killed run, a re-dispatch) are left out and counted. Default: the latest attempt among `records`.
   */
  attempt?: number;
  /** `TaskRequest.builder.config` (src/trace/roles.ts): which side and retry chains training keeps, side rewards. */
  config?: unknown;
}

/**
 * Build a session's trajectory from the records of one dispatch attempt (`opts.attempt`, default the latest): traces
 * with reward 0 (rewards come from `applyRewards`), the training filter for its status applied, and
 * `metadata.reconstruction_stats`. Records are sorted by seq; none of the attempt's is ever dropped, and those of
 * other attempts are counted in `reconstruction_stats.other_attempt_completions`.
 * @param records CompletionRecords of this one session (any order, any attempts)
 * Every trace is labelled with its chain role (`metadata.chain_role`: main / side / retry / compaction, see
 * roles.ts); `opts.config` may drop side chains and retries from the traces (counted in `dropped_traces`).
 * @returns Trajectory with metadata {reconstruction_stats (incl. chain_roles, dropped_traces), evaluation: null,
 *   training_filter, builder, session_id, task_id, eot_ids, timeout_kind, attempt}
 * @throws Error on an unknown strategy, a record of another session, a duplicate completion_id, a bad attempt or a
 *   bad `config` (naming `builder.config.<key>`)
 */
export function buildTrajectory(records: readonly CompletionRecord[], opts: BuildTrajectoryOptions): Trajectory {
  const builder = getBuilder(opts.strategy);
  const config = parseBuilderConfig(opts.config);
  if (!Array.isArray(records)) throw new Error('records must be an array of CompletionRecords');
  if (opts.eotIds !== undefined && (!Array.isArray(opts.eotIds) || !opts.eotIds.every((id) => Number.isInteger(id)))) {
    throw new Error('eotIds must be an array of integer token ids');
  }
  const seen = new Set<string>();
  for (const rec of records) {
    if (rec.session_id !== opts.session_id) {
      throw new Error(`record ${rec.completion_id} belongs to session ${rec.session_id}, not ${opts.session_id}`);
    }
    if (seen.has(rec.completion_id)) throw new Error(`duplicate completion_id ${rec.completion_id}`);
    seen.add(rec.completion_id);
  }
  const selection = selectAttempt(records, opts.attempt);
  const ordered = selection.records.sort((a, b) => a.seq - b.seq);
  const ctx: BuildContext = {
    session_id: opts.session_id,
    task_id: opts.task_id,
    harness: opts.harness,
    eotIds: opts.eotIds && opts.eotIds.length > 0 ? opts.eotIds : null,
  };
  const out = builder.build(ordered, ctx);
  // The builder's traces are fresh objects: tag them in place so exported rows name their attempt too.
  for (const trace of out.traces) trace.metadata.attempt = selection.attempt;
  const chainRoles = labelChainRoles(out.traces, ordered, config);
  const dropped = { side: 0, retry: 0 };
  const droppedIds: string[] = [];
  const kept = out.traces.filter((trace) => {
    if (keepsTrace(trace, config)) return true;
    dropped[trace.metadata.chain_role as 'side' | 'retry']++;
    droppedIds.push(...trace.metadata.completion_ids);
    return false;
  });
  return applyTrainingFilter({
    status: opts.status,
    traces: kept,
    metadata: {
      reconstruction_stats: { ...out.stats, other_attempt_completions: selection.others.length, chain_roles: chainRoles, dropped_traces: dropped, dropped_completion_ids: droppedIds },
      evaluation: null,
      training_filter: { trainable: true, reasons: [] },
      builder: builder.name,
      session_id: opts.session_id,
      task_id: opts.task_id,
      eot_ids: out.eotIds,
      timeout_kind: opts.status === 'TIMEOUT' ? (opts.timeoutKind ?? 'total') : null,
      attempt: selection.attempt,
    },
  });
}
