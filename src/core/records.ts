/**
 * Core data that crosses process boundaries or is stored: TaskRequest, CompletionRecord, Trace, Trajectory,
 * SessionResult. Field names are the field's standard snake_case terms (prompt_ids, loss_mask, num_samples, ...).
 * The wire shapes (TaskRequest, SessionResult's envelope, statuses) are defined once in ./contracts/ and re-exported.
 */
import type { ResultStatus, SessionStatus, SessionTiming, BuilderName } from './contracts/index.ts';
import type { DialectName, FinishReason, IRRequest, IRResponse } from './ir.ts';

export type { AgentSpec, BuilderName, SessionStatus, SessionTiming, TaskRequest } from './contracts/index.ts';

/** How an engine's logprobs relate to the sampling distribution (vLLM --logprobs-mode). */
export type LogprobSemantics = 'raw' | 'processed' | 'unknown' | 'none';

/**
 * One proxied model call, stored the moment it completes and never dropped.
 * Invariants: `logprobs.length === response_ids.length` unless `capture_error` says why not.
 */
export interface CompletionRecord {
  completion_id: string;
  session_id: string;
  /** 0-based order of this completion within its session (across all of its attempts). */
  seq: number;
  /**
   * 0-based dispatch attempt of the session that made this call (a resume or a re-dispatch after a node loss runs the
   * same session id again with attempt + 1). Absent = 0. Only the records of one attempt ever form a trajectory.
   */
  attempt?: number;
  dialect: DialectName;
  /** The client's original request body (JSON). */
  request_body: unknown;
  /** The normalised IR request. */
  ir_request: IRRequest;
  /** The IR response (null when the engine failed before answering). */
  ir_response: IRResponse | null;
  finish_reason: FinishReason;
  /**
   * Token ids of the full prompt the engine saw (length = prompt tokens). On a record the proxy just built this is an
   * own accessor until its first read builds the array (core/int32-twin.ts `definePromptIds`); reading, assigning,
   * spreading and JSON behave as for a plain property. Read `recordPromptIds` (or `promptIdsInt32` / `promptIdsLength`) on a hot path.
   */
  prompt_ids: number[];
  /** Sampled token ids, including the end-of-turn token when the turn ended on it. */
  response_ids: number[];
  /** One logprob per sampled id (natural log, ≤ 0), float32 precision. */
  logprobs: number[];
  /** Policy/weight version in force when the completion was sampled (null when unknown). */
  policy_version: string | null;
  /** Which engine answered, e.g. `vllm@http://127.0.0.1:8000`. */
  engine_id: string;
  logprob_semantics: LogprobSemantics;
  /** Capture mode: chat (engine renders) or token (proxy renders). */
  mode: 'chat' | 'token';
  /** Why the token capture is incomplete or inconsistent (null when it is sound). */
  capture_error: string | null;
  warnings: string[];
  /** Timings in ms. */
  timings: { engine_ms: number; total_ms: number };
  /** Unix ms when the record was committed. */
  created_at: number;
}

/** One training sample. `loss_mask`, `response_logprobs` have the length of `response_ids`. */
export interface Trace {
  prompt_ids: number[];
  response_ids: number[];
  /** 1 on tokens the behaviour policy sampled, 0 on interstitial (template) tokens. */
  loss_mask: number[];
  /** Real logprobs on mask-1 tokens, 0.0 placeholders on mask-0 tokens; null when the engine gave none. */
  response_logprobs: number[] | null;
  prompt_messages: unknown[];
  response_messages: unknown[];
  tools: unknown[];
  finish_reason: FinishReason;
  reward: number;
  metadata: TraceMetadata;
}

export interface TraceMetadata {
  session_id: string;
  task_id: string;
  builder: BuilderName;
  harness: string;
  completion_ids: string[];
  policy_versions: (string | null)[];
  /** The session's dispatch attempt whose completions form this trace (0-based; absent = 0). */
  attempt?: number;
  [key: string]: unknown;
}

export type TrajectoryStatus = 'COMPLETED' | 'TIMEOUT' | 'ERROR';

export interface ReconstructionStats {
  completions: number;
  chains: number;
  /** Completions placed into traces (every one, since none is ever dropped; Polar's completions_merged). */
  merged: number;
  /** Chain breaks by reason, e.g. {prefix_break: 1, no_eot: 0}. */
  breaks: Record<string, number>;
  /**
   * prefix_merging: joins where the next prompt held a re-rendered version of the sampled answer rather than the
   * sampled tokens themselves (chat mode: the template dropped reasoning, re-serialised tool JSON, …); the trace trains
   * on the sampled tokens, the engine was conditioned on the re-rendered ones. Always 0 in token mode.
   */
  rerender_mismatches?: number;
  /**
   * Completions of the session's other attempts (a killed or re-dispatched run of the same session id), left out of
   * this trajectory; they stay stored.
   */
  other_attempt_completions?: number;
  /** Chains per role (`main`, `side`, `retry`, `compaction`; src/trace/roles.ts), before `builder.config` drops any. */
  chain_roles?: Record<string, number>;
  /** Traces left out of training by `builder.config` (`side`, `retry`); their completions stay stored. */
  dropped_traces?: Record<string, number>;
  /** The completions of those dropped traces, by id (`trace verify` counts them instead of reporting them missing). */
  dropped_completion_ids?: string[];
}

export interface Trajectory {
  status: TrajectoryStatus;
  traces: Trace[];
  metadata: {
    reconstruction_stats: ReconstructionStats;
    evaluation: EvaluationResult | null;
    training_filter: { trainable: boolean; reasons: string[] };
    /** The session attempt whose completions built this trajectory (absent in results stored before attempts; = 0). */
    attempt?: number;
    [key: string]: unknown;
  };
}

export interface EvaluationResult {
  /** Broadcast to every trace. */
  outcome_reward?: number;
  /** One reward per trace, in trace order (a length mismatch is an error). */
  trace_rewards?: number[];
  details?: Record<string, unknown>;
}

export const TERMINAL_SESSION_STATUSES: ReadonlySet<SessionStatus> = new Set(['COMPLETED', 'ERROR', 'TIMEOUT']);

export interface SessionResult {
  session_id: string;
  task_id: string;
  /**
   * CANCELLED: the rollout server cancelled the session (task cancel or early stop) and it did not complete; its
   * gateway's ERROR "cancelled" result is stored under this status. The trajectory's own status stays ERROR.
   */
  status: ResultStatus;
  trajectory: Trajectory;
  timing: SessionTiming;
  node_id: string;
  error: string | null;
  /** The dispatch attempt that produced this result (absent in results stored before attempts = 0). */
  attempt?: number;
}
