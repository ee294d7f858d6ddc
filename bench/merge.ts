/**
 * Merge throughput of the trajectory builders (docs/architecture.md#trajectory-builders): ~1,000 completions split into sessions of
 * 8…64 turns whose prompts grow to ~100k tokens at turn 64 (2k-token system prompt; per turn a ~150-token answer and
 * a ~1.4k-token tool result). Prints tokens/s (prompt + response tokens of the input records) and the heap held by
 * the built traces. Numbers only, never pass/fail. Run: node_modules/.bin/bun bench/merge.ts [--completions N]
 */
import type { CompletionRecord } from '../src/core/records.ts';
import { buildTrajectory, verifyTraces } from '../src/trace/index.ts';

const EOT = 151645;
const GEN_PROMPT = [151644, 77091, 198];
const args = process.argv.slice(2);
const totalCompletions = Number(args[args.indexOf('--completions') + 1] ?? 1000) || 1000;

let seed = 12345;
const nextId = (): number => {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  return 1000 + (seed % 150000);
};
const tokens = (n: number): number[] => {
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) out[i] = nextId();
  return out;
};

function session(id: string, turns: number): CompletionRecord[] {
  const records: CompletionRecord[] = [];
  let prompt = [...tokens(2000), ...GEN_PROMPT];
  for (let seq = 0; seq < turns; seq++) {
    const response = [...tokens(150), EOT];
    records.push({
      completion_id: `${id}-${seq}`, session_id: id, seq, dialect: 'openai-chat', request_body: null,
      ir_request: { version: 1, model: 'm', messages: [], tools: [], sampling: {}, stream: false, warnings: [] },
      ir_response: { id: 'r', model: 'm', content: [], toolCalls: [], finishReason: { unified: 'tool-calls' },
        usage: { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 }, warnings: [], createdAt: 0 },
      finish_reason: { unified: 'tool-calls', raw: 'tool_calls' },
      prompt_ids: prompt, response_ids: response, logprobs: response.map((t) => Math.fround(-(t % 97) / 50)),
      policy_version: null, engine_id: 'bench', logprob_semantics: 'raw', mode: 'chat', capture_error: null,
      warnings: [], timings: { engine_ms: 0, total_ms: 0 }, created_at: 0,
    });
    // A fresh array per turn, as records read from the store are: the canonical answer, EOT, a tool result, glue.
    prompt = prompt.concat(response.slice(0, -1), [EOT, 198, 151644, 872, 198], tokens(1400), [151645, 198], GEN_PROMPT);
  }
  return records;
}

const heap = (): number => {
  Bun.gc(true);
  return process.memoryUsage().heapUsed;
};

const rows: string[][] = [];
for (const turns of [8, 16, 32, 64]) {
  const sessions = Math.ceil(totalCompletions / turns);
  for (const strategy of ['per_request', 'prefix_merging'] as const) {
    let buildMs = 0;
    let verifyMs = 0;
    let inputTokens = 0;
    let traces = 0;
    let heldBytes = 0;
    let maxPrompt = 0;
    seed = 12345;
    for (let s = 0; s < sessions; s++) {
      const records = session(`s${s}`, turns);
      for (const r of records) inputTokens += r.prompt_ids.length + r.response_ids.length;
      maxPrompt = Math.max(maxPrompt, records[records.length - 1]!.prompt_ids.length);
      const before = s === 0 ? heap() : 0;
      const t0 = performance.now();
      const traj = buildTrajectory(records, { strategy, eotIds: [EOT], session_id: `s${s}`, task_id: 't', harness: 'bench', status: 'COMPLETED' });
      const t1 = performance.now();
      if (s === 0) heldBytes = heap() - before;
      const report = verifyTraces(records, traj);
      verifyMs += performance.now() - t1;
      if (!report.ok) throw new Error(`bench session ${s} failed verification: ${report.violations[0]?.message}`);
      buildMs += t1 - t0;
      traces += traj.traces.length;
    }
    const completions = sessions * turns;
    rows.push([
      String(turns), strategy, String(completions), String(traces), `${(maxPrompt / 1000).toFixed(1)}k`,
      `${(inputTokens / 1e6).toFixed(1)}M`, buildMs.toFixed(0), `${(inputTokens / (buildMs / 1000) / 1e6).toFixed(0)}M`,
      `${(heldBytes / 2 ** 20).toFixed(1)}`, `${(inputTokens / (verifyMs / 1000) / 1e6).toFixed(0)}M`,
    ]);
  }
}

const header = ['turns', 'builder', 'completions', 'traces', 'max prompt', 'input tok', 'build ms', 'build tok/s', 'MiB held/session', 'verify tok/s'];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i]!)).join('  ');
console.log(`trajectory builders, Bun ${Bun.version}: ~${totalCompletions} completions per row`);
console.log(line(header));
for (const row of rows) console.log(line(row));
