import { describe, expect, test } from 'bun:test';
import type { CompletionRecord, Trajectory } from '../../src/core/records.ts';
import { buildTrajectory, formatVerifyReport, renderTrace, verifyTraces } from '../../src/trace/index.ts';
import { BASE, rec } from '../support/trace-helpers.ts';

const EOT = 99;
/** A toy scorer standing in for the simulator's: a pure function of the last 4 context ids and the token. */
const score = (ctx: ArrayLike<number>, token: number): number => {
  let h = token * 2654435761;
  for (let i = Math.max(0, ctx.length - 4); i < ctx.length; i++) h = Math.imul(h ^ ctx[i]!, 16777619);
  return Math.fround(-((h >>> 0) % 1000) / 300 - 0.001);
};
const scored = (prompt: number[], response: number[]) => response.map((t, j) => score([...prompt, ...response.slice(0, j)], t));

function session(): CompletionRecord[] {
  const p0 = [1, 2, 3];
  const a0 = [10, 11, EOT];
  const p1 = [...p0, 10, 11, EOT, 50, 51];
  const a1 = [20, 21, EOT];
  const p2 = [...p1, 20, 21, EOT, 52];
  const a2 = [30, EOT];
  return [
    rec({ seq: 0, prompt: p0, response: a0, logprobs: scored(p0, a0) }),
    rec({ seq: 1, prompt: p1, response: a1, logprobs: scored(p1, a1) }),
    rec({ seq: 2, prompt: p2, response: a2, logprobs: scored(p2, a2) }),
  ];
}
const build = (records: CompletionRecord[], strategy: 'prefix_merging' | 'per_request' = 'prefix_merging') =>
  buildTrajectory(records, { ...BASE, strategy });
const clone = (t: Trajectory): Trajectory => structuredClone(t);

describe('verifyTraces', () => {
  test('a sound trajectory passes, with re-scoring in the context the engine saw', () => {
    const records = session();
    for (const strategy of ['prefix_merging', 'per_request'] as const) {
      const report = verifyTraces(records, build(records, strategy), { rescore: score });
      expect(report.violations).toEqual([]);
      expect(report.ok).toBe(true);
      expect(report.sampled_tokens).toBe(8);
      expect(report.rescored_tokens).toBe(8);
    }
  });

  test('a re-rendered join (chat mode) is a context_mismatch in the merged trace, unless accepted knowingly', () => {
    // The engine's second prompt holds the first answer re-rendered (11 → 12): the trainer's merged context has the
    // sampled 11, so the second answer's tokens would be trained in a context the policy never saw.
    const p0 = [1, 2, 3];
    const a0 = [10, 11, EOT];
    const p1 = [...p0, 10, 12, EOT, 50, 51];
    const a1 = [20, 21, EOT];
    const records = [rec({ seq: 0, prompt: p0, response: a0, logprobs: scored(p0, a0) }), rec({ seq: 1, prompt: p1, response: a1, logprobs: scored(p1, a1) })];
    const traj = build(records);
    expect(traj.traces).toHaveLength(1);
    expect(traj.metadata.reconstruction_stats.rerender_mismatches).toBe(1);
    // Re-scoring in the merged context disowns only the token whose 4-id window holds the difference; the context
    // check names the join itself, and also without re-scoring.
    const report = verifyTraces(records, traj, { rescore: score });
    expect(report.violations.map((v) => [v.kind, v.completion_id, v.position])).toEqual([['context_mismatch', 'c1', 5], ['rescore_mismatch', 'c1', 5]]);
    expect(verifyTraces(records, traj).violations.map((v) => v.kind)).toEqual(['context_mismatch']);
    expect(formatVerifyReport(report)).toContain('differs from the prompt the engine sampled it after, at context token 4');
    const accepted = verifyTraces(records, traj, { rescore: score, acceptRerenderedJoins: true });
    expect(accepted.ok).toBe(true);
    expect(accepted.accepted_context_mismatches).toBe(1);
    expect(accepted.rescored_tokens).toBe(6);
    expect(formatVerifyReport(accepted)).toContain('1 re-rendered join(s) accepted');
    // Per request, each trace is its completion's own context: nothing to report.
    expect(verifyTraces(records, build(records, 'per_request'), { rescore: score }).ok).toBe(true);
  });

  test('re-scoring uses the merged context: a logprob right for the engine\'s context but not the trace\'s is caught', () => {
    const records = session();
    const traj = clone(build(records));
    // Change an interstitial (mask 0) token of the trace: the engine's prompt still says 50, the trace 60.
    traj.traces[0]!.response_ids[3] = 60;
    const kinds = verifyTraces(records, traj, { rescore: score }).violations.map((v) => v.kind);
    expect(kinds).toContain('context_mismatch');
    expect(kinds).toContain('rescore_mismatch');
  });

  test('catches a corrupted sampled token', () => {
    const records = session();
    const traj = clone(build(records));
    traj.traces[0]!.response_ids[5] = 777; // a1[0]
    const report = verifyTraces(records, traj);
    expect(report.ok).toBe(false);
    // The wrong token is also in the trainer's context of the next completion.
    expect(report.violations.map((v) => v.kind)).toEqual(['token_mismatch', 'context_mismatch']);
    expect(report.violations[0]).toMatchObject({ trace: 0, completion_id: 'c1', position: 5 });
    expect(formatVerifyReport(report, 'session sess')).toContain('token 777 has loss_mask 1, but completion c1 sampled 20');
  });

  test('catches a corrupted logprob, and a logprob that re-scoring disowns', () => {
    const records = session();
    const traj = clone(build(records));
    traj.traces[0]!.response_logprobs![1] = -0.5;
    expect(verifyTraces(records, traj).violations.map((v) => v.kind)).toEqual(['logprob_mismatch']);
    // Records and trace agree, but the policy never gave that logprob: only re-scoring can tell.
    const forged = session();
    forged[2]!.logprobs[0] = -0.125;
    const report = verifyTraces(forged, build(forged), { rescore: score });
    expect(report.violations.map((v) => v.kind)).toEqual(['rescore_mismatch']);
    expect(verifyTraces(forged, build(forged)).ok).toBe(true);
  });

  test('catches a flipped mask bit (interstitial trained on, or a sample masked away)', () => {
    const records = session();
    const on = clone(build(records));
    on.traces[0]!.loss_mask[3] = 1; // interstitial token 50
    expect(verifyTraces(records, on).ok).toBe(false);
    const off = clone(build(records));
    off.traces[0]!.loss_mask[off.traces[0]!.loss_mask.length - 1] = 0; // last EOT of a2
    const kinds = verifyTraces(records, off).violations.map((v) => v.kind);
    expect(kinds).toContain('missing_sampled_tokens');
  });

  test('catches shape errors, a dropped completion and a duplicated one', () => {
    const records = session();
    const short = clone(build(records));
    short.traces[0]!.loss_mask.pop();
    expect(verifyTraces(records, short).violations[0]!.kind).toBe('shape');

    const dropped = clone(build(records, 'per_request'));
    dropped.traces.pop();
    expect(verifyTraces(records, dropped).violations.map((v) => v.kind)).toEqual(['dropped_completion']);

    // Left out by builder.config (its ids in reconstruction_stats.dropped_completion_ids): counted, not a violation.
    const leftOut = clone(dropped);
    leftOut.metadata.reconstruction_stats.dropped_completion_ids = build(records, 'per_request').traces.at(-1)!.metadata.completion_ids;
    // Named as dropped but no trace counted as dropped: a builder bug, still reported.
    leftOut.metadata.reconstruction_stats.dropped_traces = { side: 0, retry: 0 };
    expect(verifyTraces(records, leftOut).violations.map((v) => v.kind)).toEqual(['dropped_completion']);
    leftOut.metadata.reconstruction_stats.dropped_traces = { side: 0, retry: 1 };
    const report = verifyTraces(records, leftOut);
    expect([report.ok, report.left_out_by_config, report.violations]).toEqual([true, 1, []]);
    expect(formatVerifyReport(report)).toContain('1 completion(s) left out by builder.config');

    const dup = clone(build(records, 'per_request'));
    dup.traces.push(structuredClone(dup.traces[0]!));
    expect(verifyTraces(records, dup).violations.map((v) => v.kind)).toEqual(['duplicate_completion']);
  });

  test('a filtered (masked) trajectory verifies when its mask is all zero', () => {
    const records = session();
    const traj = buildTrajectory(records, { ...BASE, strategy: 'prefix_merging', status: 'ERROR' });
    expect(verifyTraces(records, traj).ok).toBe(true);
    const leaked = clone(traj);
    leaked.traces[0]!.loss_mask[0] = 1;
    expect(verifyTraces(records, leaked).violations.map((v) => v.kind)).toEqual(['masked_trace']);
  });

  test('token-level violations are capped per trace', () => {
    const records = session();
    const traj = clone(build(records));
    traj.traces[0]!.response_ids = traj.traces[0]!.response_ids.map((id) => id + 1000);
    const report = verifyTraces(records, traj, { maxPerTrace: 3 });
    expect(report.violations).toHaveLength(3);
    // 8 sampled tokens + the shifted contexts of the 2 later completions.
    expect(report.suppressed).toBe(7);
    expect(formatVerifyReport(report)).toContain('and 7 more');
  });
});

describe('renderTrace', () => {
  test('masked spans are bracketed, sampled spans are not; stats in the header', () => {
    const traj = build(session());
    const out = renderTrace(traj.traces[0]!, 0);
    expect(out).toContain('10 11 99 ⟦50 51⟧ 20 21 99 ⟦52⟧ 30 99');
    expect(out).toContain('sampled (mask 1) 8');
    expect(out).toContain('masked (mask 0) 3');
    const decoded = renderTrace(traj.traces[0]!, 0, { decode: (ids) => ids.map((i) => String.fromCharCode(64 + (i % 26))).join(''), color: true });
    expect(decoded).toContain('\x1b[2m⟦');
  });

  test('an unevaluated trace shows its reward as —, not the builder\'s 0', () => {
    const trace = build(session()).traces[0]!;
    expect(renderTrace(trace, 0)).toContain(' · reward 0 · ');
    const out = renderTrace(trace, 0, { evaluated: false });
    expect(out).toContain(' · reward — · ');
    expect(out).not.toContain('reward 0');
  });
});
