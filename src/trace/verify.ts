/**
 * `verifyTraces`: check the builder invariant (docs/architecture.md#trajectory-builders) against the stored records. Every token with
 * loss_mask=1 must be a token the behaviour policy sampled, in order, with its recorded logprob, in the context the
 * trainer will use: the trace's prompt_ids and every response id before it must be exactly the context the engine
 * sampled it in (a chat-mode join whose next prompt held a re-rendered version of the sampled answer is a
 * `context_mismatch`, unless accepted knowingly), and under the simulator its scoring function, applied to that
 * merged context, must give the recorded logprob. No completion may be dropped or used twice; and no completion of
 * another dispatch attempt of the session may appear.
 */
import type { CompletionRecord, Trace, Trajectory } from '../core/records.ts';
import { attemptOf, latestAttempt, trajectoryAttempt } from './attempts.ts';
import { captureProblem } from './trace-parts.ts';

export type ViolationKind =
  | 'shape'
  | 'unknown_completion'
  | 'other_attempt_completion'
  | 'duplicate_completion'
  | 'dropped_completion'
  | 'empty_trace'
  | 'prompt_mismatch'
  | 'token_mismatch'
  | 'extra_sampled_token'
  | 'missing_sampled_tokens'
  | 'logprob_mismatch'
  | 'missing_logprobs'
  | 'interstitial_logprob'
  | 'rescore_mismatch'
  | 'context_mismatch'
  | 'masked_trace';

export interface VerifyViolation {
  kind: ViolationKind;
  /** Index of the trace in trajectory.traces (null for a violation of the whole trajectory). */
  trace: number | null;
  completion_id?: string;
  /** Position in the trace's response_ids, when the violation is about one token. */
  position?: number;
  message: string;
}

export interface VerifyReport {
  ok: boolean;
  traces: number;
  /** The session attempt checked (0-based). */
  attempt: number;
  /** Completions of that attempt. */
  completions: number;
  /** Completions of the session's other attempts: stored, not expected in (and not allowed into) the trajectory. */
  other_attempt_completions: number;
  /** Mask-1 tokens checked against the records. */
  sampled_tokens: number;
  /** Mask-1 logprobs re-scored (0 without a rescore function). */
  rescored_tokens: number;
  /**
   * Completions whose context in the merged trace differs from the prompt the engine sampled them after (re-rendered
   * joins) that were accepted with `acceptRerenderedJoins` instead of reported as `context_mismatch`.
   */
  accepted_context_mismatches: number;
  /**
   * Completions in no trace because `builder.config` left their traces out of training (`retries`, `side`; the
   * trajectory's `reconstruction_stats.dropped_completion_ids`): stored, counted here, not violations.
   */
  left_out_by_config: number;
  violations: VerifyViolation[];
  /** Violations not listed because a trace had more than `maxPerTrace`. */
  suppressed: number;
  /**
   * Set when nothing could be checked: `no_records` = the trajectory names completions but `records` is empty (the
   * records live in the store of the process that ran the proxy, e.g. a gateway's, not in the rollout server's).
   * `ok` is then false and `violations` empty: an unchecked trajectory is neither clean nor a violation.
   */
  skipped?: 'no_records';
}

export interface VerifyOptions {
  /**
   * Re-score a token: logprob of `token` after `contextIds`, the trainer's context (the trace's prompt_ids followed
   * by its response ids before this one). E.g. the simulator's `scoreLogprob` (src/sim/policy.ts). `at` names the
   * completion and the token's index in its response_ids (a scorer whose logprob also depends on the sample, like the
   * simulator's variant choice on a session's first token, reads it).
   */
  rescore?: (contextIds: ArrayLike<number>, token: number, at: { record: CompletionRecord; index: number }) => number;
  /**
   * Accept joins where the merged context differs from the engine's prompt (chat mode: the next prompt held a
   * re-rendered version of the sampled answer). They are counted in `accepted_context_mismatches` instead of reported,
   * and their tokens are re-scored in the engine's own context. Default false.
   */
  acceptRerenderedJoins?: boolean;
  /** Token-level violations listed per trace before the rest are only counted (default 5). */
  maxPerTrace?: number;
  /**
   * The dispatch attempt the trajectory must come from (0-based). Default: the trajectory's `metadata.attempt`, else
   * the latest attempt among the records.
   */
  attempt?: number;
}

const same = (a: number, b: number): boolean => Math.fround(a) === Math.fround(b);

/**
 * Verify a trajectory's traces against the session's records. Logprobs compare at float32 precision (the store
 * keeps Float32). A trace masked by the training filter (`metadata.training_filter.masked`) or built from an unsound
 * capture must have an all-zero mask and still contain its completions' sampled ids in order. Only the records of
 * one dispatch attempt (`opts.attempt`) must appear; a trace naming a record of another attempt is a violation.
 * @param records every CompletionRecord of the session (any order, any attempts)
 * @returns a report; `ok` is true when `violations` is empty and nothing was suppressed. With no records at all while
 *   the traces name completions, nothing is checked: `skipped: 'no_records'`, `ok` false, no violations.
 */
export function verifyTraces(records: readonly CompletionRecord[], trajectory: Trajectory, opts: VerifyOptions = {}): VerifyReport {
  const maxPerTrace = opts.maxPerTrace ?? 5;
  const attempt = opts.attempt ?? trajectoryAttempt(trajectory) ?? latestAttempt(records);
  if (records.length === 0 && Array.isArray(trajectory?.traces)) {
    const named = trajectory.traces.some((t) => Array.isArray(t?.metadata?.completion_ids) && t.metadata.completion_ids.length > 0);
    if (named) {
      return {
        ok: false, traces: trajectory.traces.length, attempt, completions: 0, other_attempt_completions: 0, sampled_tokens: 0, rescored_tokens: 0,
        accepted_context_mismatches: 0, left_out_by_config: 0, violations: [], suppressed: 0, skipped: 'no_records',
      };
    }
  }
  const byId = new Map<string, CompletionRecord>();
  const otherAttempt = new Map<string, CompletionRecord>();
  for (const rec of records) (attemptOf(rec) === attempt ? byId : otherAttempt).set(rec.completion_id, rec);
  const usedIn = new Map<string, number>();
  const violations: VerifyViolation[] = [];
  let suppressed = 0;
  let sampledTokens = 0;
  let rescoredTokens = 0;
  let acceptedContextMismatches = 0;

  const traces: readonly Trace[] = Array.isArray(trajectory?.traces) ? trajectory.traces : [];
  if (!Array.isArray(trajectory?.traces)) {
    violations.push({ kind: 'shape', trace: null, message: 'trajectory has no traces array' });
  }

  traces.forEach((trace, t) => {
    let tokenViolations = 0;
    const push = (v: VerifyViolation, tokenLevel = false): void => {
      if (tokenLevel && ++tokenViolations > maxPerTrace) {
        suppressed++;
        return;
      }
      violations.push(v);
    };

    const ids = trace.metadata?.completion_ids;
    if (!Array.isArray(ids) || ids.length === 0) {
      push({ kind: 'empty_trace', trace: t, message: `trace ${t} names no completions (metadata.completion_ids)` });
      return;
    }
    const members: CompletionRecord[] = [];
    for (const id of ids) {
      const prior = usedIn.get(id);
      if (prior !== undefined) {
        push({ kind: 'duplicate_completion', trace: t, completion_id: id, message: `completion ${id} is in trace ${prior} and trace ${t}` });
      } else usedIn.set(id, t);
      const rec = byId.get(id);
      const foreign = rec ? undefined : otherAttempt.get(id);
      if (rec) members.push(rec);
      else if (foreign) {
        push({ kind: 'other_attempt_completion', trace: t, completion_id: id,
          message: `trace ${t} names completion ${id} of attempt ${attemptOf(foreign)}, but the trajectory is attempt ${attempt}'s` });
      } else push({ kind: 'unknown_completion', trace: t, completion_id: id, message: `trace ${t} names completion ${id}, which is not in the records` });
    }
    // Nothing to check the tokens against: the violations above already say why (not "masked by a capture error").
    if (members.length === 0) return;

    const { response_ids: resp, loss_mask: mask, response_logprobs: lps } = trace;
    if (!Array.isArray(resp) || !Array.isArray(mask) || resp.length !== mask.length) {
      push({ kind: 'shape', trace: t, message: `trace ${t}: loss_mask has ${mask?.length} entries for ${resp?.length} response ids` });
      return;
    }
    if (lps !== null && (!Array.isArray(lps) || lps.length !== resp.length)) {
      push({ kind: 'shape', trace: t, message: `trace ${t}: response_logprobs has ${lps?.length} entries for ${resp.length} response ids` });
      return;
    }
    const badMask = mask.findIndex((m) => m !== 0 && m !== 1);
    if (badMask >= 0) {
      push({ kind: 'shape', trace: t, position: badMask, message: `trace ${t}: loss_mask[${badMask}] is ${mask[badMask]}, not 0 or 1` });
      return;
    }

    const first = members[0];
    if (first && captureProblem(first) === null) {
      const at = firstDifference(trace.prompt_ids, first.prompt_ids);
      if (at >= 0) {
        push({ kind: 'prompt_mismatch', trace: t, completion_id: first.completion_id, position: at,
          message: `trace ${t}: prompt_ids differ from completion ${first.completion_id}'s prompt at index ${at}` });
      }
    }

    const sound = members.filter((m) => captureProblem(m) === null);
    const filterNote = trace.metadata.training_filter as { masked?: boolean } | undefined;
    if (filterNote?.masked === true || sound.length === 0) {
      const on = mask.indexOf(1);
      if (on >= 0) {
        push({ kind: 'masked_trace', trace: t, position: on,
          message: `trace ${t} is masked (${filterNote?.masked ? 'training filter' : 'capture error'}) but loss_mask[${on}] is 1` });
      }
      checkSubsequence(trace, t, sound, push);
      return;
    }

    // Walk mask-1 positions against the concatenated samples of the sound members. The trainer's context of the
    // token at `pos` is prompt_ids + response_ids[0, pos): `merged` holds it, built once per trace.
    const merged = new Int32Array(trace.prompt_ids.length + resp.length);
    merged.set(trace.prompt_ids, 0);
    merged.set(resp, trace.prompt_ids.length);
    let m = 0;
    let j = 0;
    let context: Int32Array | null = null;
    /** The current member's context in the merged trace differs from its prompt and that was accepted. */
    let ownContext = false;
    let missingLogprobsReported = false;
    const nextMember = (): CompletionRecord | undefined => {
      while (m < sound.length && j >= sound[m]!.response_ids.length) {
        m++;
        j = 0;
        context = null;
      }
      return sound[m];
    };
    for (let pos = 0; pos < resp.length; pos++) {
      if (mask[pos] === 0) {
        if (lps !== null && lps[pos] !== 0) {
          push({ kind: 'interstitial_logprob', trace: t, position: pos,
            message: `trace ${t} pos ${pos}: masked token has logprob ${lps[pos]}, expected the 0.0 placeholder` }, true);
        }
        continue;
      }
      const rec = nextMember();
      if (!rec) {
        push({ kind: 'extra_sampled_token', trace: t, position: pos,
          message: `trace ${t} pos ${pos}: token ${resp[pos]} has loss_mask 1 but every sampled token is already accounted for` }, true);
        continue;
      }
      if (j === 0 && m > 0) {
        // A member's first sampled token: the merged context must be the prompt the engine sampled it after.
        const at = firstDifferenceIn(merged, trace.prompt_ids.length + pos, rec.prompt_ids);
        ownContext = false;
        if (at >= 0) {
          if (opts.acceptRerenderedJoins) {
            acceptedContextMismatches++;
            ownContext = true;
          } else {
            push({ kind: 'context_mismatch', trace: t, completion_id: rec.completion_id, position: pos,
              message: `trace ${t} pos ${pos}: the trainer's context of completion ${rec.completion_id} differs from the prompt the engine sampled it after, at context token ${at} ` +
                '(a re-rendered join: the next prompt did not hold the sampled answer verbatim); accept knowingly with --accept-rerendered' }, true);
          }
        }
      }
      const expected = rec.response_ids[j]!;
      sampledTokens++;
      if (resp[pos] !== expected) {
        push({ kind: 'token_mismatch', trace: t, completion_id: rec.completion_id, position: pos,
          message: `trace ${t} pos ${pos}: token ${resp[pos]} has loss_mask 1, but completion ${rec.completion_id} sampled ${expected} (its token ${j})` }, true);
        j++;
        continue;
      }
      if (lps === null) {
        if (!missingLogprobsReported) {
          push({ kind: 'missing_logprobs', trace: t, message: `trace ${t}: response_logprobs is null but its completions recorded logprobs` });
          missingLogprobsReported = true;
        }
      } else {
        const recorded = rec.logprobs[j]!;
        if (!same(lps[pos]!, recorded)) {
          push({ kind: 'logprob_mismatch', trace: t, completion_id: rec.completion_id, position: pos,
            message: `trace ${t} pos ${pos}: logprob ${lps[pos]} ≠ recorded ${recorded} (completion ${rec.completion_id}, token ${j})` }, true);
        } else if (opts.rescore) {
          let scored: number;
          if (ownContext) {
            context ??= contextOf(rec);
            scored = opts.rescore(context.subarray(0, rec.prompt_ids.length + j), expected, { record: rec, index: j });
          } else scored = opts.rescore(merged.subarray(0, trace.prompt_ids.length + pos), expected, { record: rec, index: j });
          rescoredTokens++;
          if (!same(lps[pos]!, scored)) {
            push({ kind: 'rescore_mismatch', trace: t, completion_id: rec.completion_id, position: pos,
              message: `trace ${t} pos ${pos}: logprob ${lps[pos]} ≠ re-scored ${scored} (completion ${rec.completion_id}, token ${j})` }, true);
          }
        }
      }
      j++;
    }
    if (nextMember() !== undefined) {
      let left = 0;
      for (let k = m; k < sound.length; k++) left += sound[k]!.response_ids.length - (k === m ? j : 0);
      push({ kind: 'missing_sampled_tokens', trace: t, completion_id: sound[m]!.completion_id,
        message: `trace ${t}: ${left} sampled token(s) from completion ${sound[m]!.completion_id} on never appear with loss_mask 1` });
    }
  });

  // Completions of traces the builder's config left out of training (retries, side requests) are stored, not lost.
  // The list is taken only when the trajectory also counts dropped traces (a builder that names ids it did not drop
  // as traces is still caught).
  const stats = trajectory?.metadata?.reconstruction_stats;
  const droppedTraces = Object.values(stats?.dropped_traces ?? {}).reduce((n, v) => n + (typeof v === 'number' ? v : 0), 0);
  const policyDropped = new Set(droppedTraces > 0 && Array.isArray(stats?.dropped_completion_ids) ? stats.dropped_completion_ids : []);
  let leftOut = 0;
  for (const rec of byId.values()) {
    if (!usedIn.has(rec.completion_id) && policyDropped.has(rec.completion_id)) leftOut++;
    else if (!usedIn.has(rec.completion_id)) {
      violations.push({ kind: 'dropped_completion', trace: null, completion_id: rec.completion_id,
        message: `completion ${rec.completion_id} (seq ${rec.seq}) appears in no trace` });
    }
  }
  return {
    ok: violations.length === 0 && suppressed === 0,
    traces: traces.length,
    attempt,
    completions: byId.size,
    other_attempt_completions: otherAttempt.size,
    sampled_tokens: sampledTokens,
    rescored_tokens: rescoredTokens,
    accepted_context_mismatches: acceptedContextMismatches,
    left_out_by_config: leftOut,
    violations,
    suppressed,
  };
}

/** Human-readable report, one violation a line. */
export function formatVerifyReport(report: VerifyReport, label = 'trajectory'): string {
  if (report.skipped === 'no_records') {
    return `${label}: SKIPPED — no completion records in this database for it (its ${report.traces} trace(s) name completions); ` +
      "records live where the proxy ran, e.g. the gateway's store: verify with --db pointing there";
  }
  const others = report.other_attempt_completions > 0
    ? ` of attempt ${report.attempt} (${report.other_attempt_completions} of other attempts left out)`
    : '';
  const head = `${label}: ${report.ok ? 'OK' : 'FAILED'} — ${report.traces} trace(s), ${report.completions} completion(s)${others}, ` +
    `${report.sampled_tokens} sampled token(s) checked, ${report.rescored_tokens} re-scored` +
    (report.accepted_context_mismatches > 0 ? `, ${report.accepted_context_mismatches} re-rendered join(s) accepted` : '') +
    (report.left_out_by_config > 0 ? `, ${report.left_out_by_config} completion(s) left out by builder.config (retries/side)` : '');
  const lines = [head];
  for (const v of report.violations) lines.push(`  ✗ [${v.kind}] ${v.message}`);
  if (report.suppressed > 0) lines.push(`  … and ${report.suppressed} more token-level violation(s)`);
  return lines.join('\n');
}

/** The prompt followed by the sampled ids: what the engine had seen before each sampled token. */
function contextOf(rec: CompletionRecord): Int32Array {
  const buf = new Int32Array(rec.prompt_ids.length + rec.response_ids.length);
  buf.set(rec.prompt_ids, 0);
  buf.set(rec.response_ids, rec.prompt_ids.length);
  return buf;
}

function firstDifference(a: readonly number[] | undefined, b: readonly number[]): number {
  if (!Array.isArray(a)) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

/** Index of the first difference between `a[0, aLength)` and `b`, or -1 when equal. */
function firstDifferenceIn(a: Int32Array, aLength: number, b: readonly number[]): number {
  const n = Math.min(aLength, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return aLength === b.length ? -1 : n;
}

function checkSubsequence(
  trace: Trace,
  t: number,
  sound: readonly CompletionRecord[],
  push: (v: VerifyViolation, tokenLevel?: boolean) => void,
): void {
  const resp = trace.response_ids;
  let pos = 0;
  for (const rec of sound) {
    for (let j = 0; j < rec.response_ids.length; j++) {
      const want = rec.response_ids[j];
      while (pos < resp.length && resp[pos] !== want) pos++;
      if (pos >= resp.length) {
        push({ kind: 'missing_sampled_tokens', trace: t, completion_id: rec.completion_id,
          message: `trace ${t}: masked trace lacks sampled token ${j} (${want}) of completion ${rec.completion_id}` });
        return;
      }
      pos++;
    }
  }
}
