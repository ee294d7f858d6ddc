/**
 * Completion-record storage: bytes on disk per session and insert CPU per record for 64-turn agent sessions whose
 * final prompt is ~25k or ~100k tokens, in the old row format (format 1: full prompt_ids and plain JSON text in every
 * row, O(turns²) per session) against format 2 (prefix-delta prompt ids + delta JSON, with and without zstd).
 * Each turn's prompt is the previous prompt + response + a new ~`ls -l` tool result (token mode: exact extension);
 * the request body is a recorded qwen-code request (system prompt + tools) with the turns appended, handed to insert
 * as the proxy does (its exact text as `requestBodyJson`); the IR request is a fresh object per turn, serialised inside
 * insert. Sessions are interleaved round-robin, as concurrent sessions reach the proxy.
 * Run: bun bench/store.ts [--quick] [25k/format-1 …]
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CompletionRecord } from '../src/core/records.ts';
import { openStore, type CompletionRepositoryOptions } from '../src/store/index.ts';
import { defineBench } from './lib/bench.ts';
import { fixtureBody, type Json } from './lib/requests.ts';

const TURNS = 64;
const SIZES: Record<string, number> = { '25k': 25_000, '100k': 100_000 };
const MODES: Record<string, { label: string; options: CompletionRepositoryOptions }> = {
  'format-1': { label: 'before: full ids, plain JSON (format 1)', options: { format: 1 } },
  delta: { label: 'after: prefix-delta ids + delta JSON, no zstd', options: { format: 2, compress: false } },
  'delta-zstd': { label: 'after: prefix-delta ids + delta JSON + zstd-1 (default)', options: { format: 2, compress: true, zstdLevel: 1 } },
};
/** Response tokens per turn (a tool call). */
const RESPONSE_TOKENS = 60;
/** Characters of JSON text per prompt token, roughly (English/code with the Qwen3 tokenizer). */
const CHARS_PER_TOKEN = 4;

function toolResult(session: number, turn: number, chars: number): string {
  const lines: string[] = [];
  let size = 0;
  for (let i = 0; size < chars; i++) {
    const n = session * 1_000_003 + turn * 1000 + i;
    const line = `-rw-r--r-- 1 dev dev ${String(1000 + ((n * 7919) % 90000)).padStart(6)} Mar ${String(1 + (n % 28)).padStart(2)} 12:${String(n % 60).padStart(2, '0')} src/pkg_${n % 37}/module_${(n * 31) % 977}.py`;
    lines.push(line);
    size += line.length + 2;
  }
  return lines.join('\n');
}

/** xorshift32 token ids (real ids do not compress either). */
function idStream(seed: number): (n: number) => number[] {
  let state = (seed * 2654435761) >>> 0 || 1;
  return (n) => {
    const out = new Array<number>(n);
    for (let j = 0; j < n; j++) {
      state ^= state << 13;
      state >>>= 0;
      state ^= state >>> 17;
      state ^= state << 5;
      state >>>= 0;
      out[j] = state % 151_936;
    }
    return out;
  };
}

interface Turn {
  rec: CompletionRecord;
  requestText: string;
}

/** The 64 turns of one session, built before timing starts. */
function buildSession(session: number, finalTokens: number, head: Json[], tools: unknown[]): Turn[] {
  const ids = idStream(session + 1);
  const headTokens = Math.round(JSON.stringify({ head, tools }).length / CHARS_PER_TOKEN);
  const perTurn = Math.max(1, Math.round((finalTokens - headTokens) / TURNS) - RESPONSE_TOKENS);
  let history = ids(headTokens);
  const messages: Json[] = [...head];
  const turns: Turn[] = [];
  for (let t = 0; t < TURNS; t++) {
    const result = toolResult(session, t, perTurn * CHARS_PER_TOKEN);
    messages.push({ role: 'assistant', content: null, tool_calls: [{ id: `call_${t}`, type: 'function', function: { name: 'run_shell_command', arguments: `{"command":"ls -l src/pkg_${t}"}` } }] });
    messages.push({ role: 'tool', tool_call_id: `call_${t}`, content: result });
    const prompt_ids = history.concat(ids(perTurn));
    const response_ids = ids(RESPONSE_TOKENS);
    const body = { model: 'qwen3', messages, tools, stream: true };
    // The IR request: same content in another shape, a new object graph per call as the dialect decoder makes it.
    const ir = {
      model: 'qwen3',
      system: [{ type: 'text', text: String((head[0] as { content?: unknown }).content ?? '') }],
      messages: messages.slice(1).map((m) => ({ role: m.role, content: [{ type: 'text', text: typeof m.content === 'string' ? m.content : '' }] })),
      tools,
      warnings: [],
    };
    turns.push({
      requestText: JSON.stringify(body),
      rec: {
        completion_id: `ps_${session}-c${t}`,
        session_id: `ps_${session}`,
        seq: t,
        dialect: 'openai-chat',
        request_body: null, // stored from requestText, as the proxy does
        ir_request: structuredClone(ir) as unknown as CompletionRecord['ir_request'],
        ir_response: { id: `r${t}`, content: [{ type: 'tool-call', toolCallId: `call_${t + 1}`, toolName: 'run_shell_command', input: `{"command":"ls -l src/pkg_${t + 1}"}` }], finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, warnings: [] } as unknown as CompletionRecord['ir_response'],
        finish_reason: { unified: 'tool-calls', raw: 'tool_calls' },
        prompt_ids,
        response_ids,
        logprobs: response_ids.map((v) => Math.fround(-(v % 1000) / 100)),
        policy_version: 'v1',
        engine_id: 'vllm@http://127.0.0.1:8000',
        logprob_semantics: 'processed',
        mode: 'token',
        capture_error: null,
        warnings: [],
        timings: { engine_ms: 100, total_ms: 101 },
        created_at: 1_700_000_000_000 + t,
      },
    });
    history = prompt_ids.concat(response_ids);
  }
  return turns;
}

await defineBench({
  name: 'store',
  variants: () => Object.keys(SIZES).flatMap((size) => Object.keys(MODES).map((mode) => `${size}/${mode}`)),
  async run(variant, ctx) {
    const [size, mode] = variant.split('/') as [string, string];
    const finalTokens = SIZES[size]!;
    const { label, options } = MODES[mode]!;
    const sessions = ctx.quick ? 2 : 4;
    const recorded = fixtureBody('qwen-code/quiet/003-request.json');
    const head = (recorded.messages as Json[]).slice(0, 2);
    const tools = (recorded.tools ?? []) as unknown[];
    const built = Array.from({ length: sessions }, (_, s) => buildSession(s, finalTokens, head, tools));

    const dir = mkdtempSync(join(tmpdir(), 'polar-bench-store-'));
    try {
      const path = join(dir, 'polar.db');
      const store = openStore(path, { completions: options });
      // Warm-up on a throwaway session so JIT compilation is not billed to the first records.
      for (const turn of buildSession(99, 5_000, head, tools).slice(0, 8)) store.completions.insert(turn.rec, { requestBodyJson: turn.requestText });
      const cpu0 = process.cpuUsage();
      const wall0 = performance.now();
      for (let t = 0; t < TURNS; t++) {
        for (const session of built) store.completions.insert(session[t]!.rec, { requestBodyJson: session[t]!.requestText });
      }
      const wallMs = performance.now() - wall0;
      const cpu = process.cpuUsage(cpu0);
      const records = TURNS * sessions;
      const read0 = performance.now();
      const readBack = store.completions.listBySession('ps_0');
      const readMs = performance.now() - read0;
      const get0 = performance.now();
      store.completions.get(`ps_0-c${TURNS - 1}`); // the deepest chain: every base row is read and applied
      const getMs = performance.now() - get0;
      if (readBack.length !== TURNS || readBack.at(-1)!.prompt_ids.length !== built[0]!.at(-1)!.rec.prompt_ids.length) throw new Error('read-back mismatch');
      store.close(); // checkpoints the WAL into the main file
      const walBytes = (() => {
        try {
          return statSync(`${path}-wal`).size;
        } catch {
          return 0;
        }
      })();
      const bytes = statSync(path).size + walBytes;
      const warmBytes = 8 * 4096; // the warm-up session's rows are a rounding error; the file's page overhead is counted
      const finalPrompt = built[0]!.at(-1)!.rec.prompt_ids.length;
      const finalBody = built[0]!.at(-1)!.requestText.length;
      return {
        title: `completion records · ${TURNS}-turn sessions, ${sessions} interleaved · bytes on disk and insert cost`,
        columns: ['final prompt', 'format', 'final prompt tokens', 'final body KB', 'MB on disk / session', 'insert CPU µs / record', 'insert wall µs / record', 'listBySession ms / session', 'get(last turn) ms'],
        rows: [[size, label, finalPrompt, finalBody / 1024, (bytes - warmBytes) / sessions / 1e6, ((cpu.user + cpu.system) / records), (wallMs * 1000) / records, readMs, getMs]],
        keyColumns: 2,
        notes: [
          'MB on disk = database file after close (WAL checkpointed) / sessions; CPU = process user+system time over all inserts (JSON.stringify of the IR request, encoding, SQLite, WAL) / records.',
          'request bodies are handed over as text (requestBodyJson), as the proxy does; token ids are random, so they do not compress.',
        ],
      };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
});
