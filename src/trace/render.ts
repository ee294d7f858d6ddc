/**
 * `polar trace show`: a trace decoded for humans. Sampled tokens (loss_mask 1) print as they are (green on a TTY);
 * masked spans (prompt glue, tool results; loss_mask 0) are wrapped in ⟦…⟧ (and dimmed on a TTY), so the two stay
 * apart even without colour.
 */
import type { Trace } from '../core/records.ts';

export interface RenderOptions {
  /** Token ids → text (a tokenizer's decode); without it, ids are printed. */
  decode?: (ids: number[]) => string;
  /** ANSI colours (use when stdout is a TTY). */
  color?: boolean;
  /** Also print the prompt (masked, not trained on). Default false: prompt is summarised by its length. */
  showPrompt?: boolean;
  /**
   * Whether the trace carries an evaluator's reward. Default true; false (a proxy capture, a session whose
   * evaluation was skipped, a trace rebuilt from the records) prints the reward as —, never as the builder's 0.
   */
  evaluated?: boolean;
}

export interface TraceStats {
  completions: number;
  prompt_tokens: number;
  response_tokens: number;
  /** Tokens with loss_mask 1. */
  sampled_tokens: number;
  /** Tokens with loss_mask 0 inside the response (interstitials). */
  masked_tokens: number;
  /** Mean logprob over sampled tokens (null when there are none or no logprobs). */
  mean_logprob: number | null;
}

/** Token counts of one trace. */
export function traceStats(trace: Trace): TraceStats {
  let sampled = 0;
  let lpSum = 0;
  for (let i = 0; i < trace.loss_mask.length; i++) {
    if (trace.loss_mask[i] === 1) {
      sampled++;
      lpSum += trace.response_logprobs?.[i] ?? 0;
    }
  }
  return {
    completions: trace.metadata.completion_ids.length,
    prompt_tokens: trace.prompt_ids.length,
    response_tokens: trace.response_ids.length,
    sampled_tokens: sampled,
    masked_tokens: trace.response_ids.length - sampled,
    mean_logprob: sampled > 0 && trace.response_logprobs !== null ? lpSum / sampled : null,
  };
}

/** Runs of equal mask value over the response: [start, end) half-open index pairs with their mask. */
export function maskSpans(mask: readonly number[]): { start: number; end: number; mask: number }[] {
  const spans: { start: number; end: number; mask: number }[] = [];
  let start = 0;
  for (let i = 1; i <= mask.length; i++) {
    if (i === mask.length || mask[i] !== mask[start]) {
      spans.push({ start, end: i, mask: mask[start] === 1 ? 1 : 0 });
      start = i;
    }
  }
  return spans;
}

const ansi = { dim: '\x1b[2m', green: '\x1b[32m', bold: '\x1b[1m', reset: '\x1b[0m' };

/**
 * Render one trace: a header with its stats, then the response with masked spans bracketed as ⟦…⟧.
 * @param index the trace's position in its trajectory (for the header)
 */
export function renderTrace(trace: Trace, index: number, opts: RenderOptions = {}): string {
  const c = (code: string, text: string) => (opts.color ? `${code}${text}${ansi.reset}` : text);
  const text = (ids: number[]) => (opts.decode ? opts.decode(ids) : ids.join(' '));
  const s = traceStats(trace);
  const meta = trace.metadata;
  const lines: string[] = [];
  const role = typeof meta.chain_role === 'string' ? `, ${meta.chain_role}${typeof meta.source_chain === 'number' ? ` of chain ${meta.source_chain}` : ''}` : '';
  lines.push(c(ansi.bold, `── trace ${index} ── ${meta.builder}${role}, ${s.completions} completion(s) [${meta.completion_ids.join(', ')}]`));
  lines.push(
    `   prompt ${s.prompt_tokens} tok · response ${s.response_tokens} tok · sampled (mask 1) ${s.sampled_tokens} · ` +
      `masked (mask 0) ${s.masked_tokens} · mean logprob ${s.mean_logprob === null ? 'n/a' : s.mean_logprob.toFixed(4)} · ` +
      `reward ${opts.evaluated === false ? '—' : trace.reward} · finish ${trace.finish_reason.unified}` +
      (meta.started_by && meta.started_by !== 'first' ? ` · started by ${String(meta.started_by)}` : '') +
      (meta.training_filter ? ` · filter ${JSON.stringify(meta.training_filter)}` : '') +
      (typeof meta.capture_error === 'string' ? ` · capture error: ${meta.capture_error}` : ''),
  );
  if (opts.showPrompt) lines.push(c(ansi.dim, `⟦${text(trace.prompt_ids)}⟧`));
  let body = '';
  for (const span of maskSpans(trace.loss_mask)) {
    const piece = text(trace.response_ids.slice(span.start, span.end));
    body += span.mask === 1 ? c(ansi.green, piece) : c(ansi.dim, `⟦${piece}⟧`);
    if (!opts.decode) body += ' ';
  }
  lines.push(body.trimEnd());
  return lines.join('\n');
}
