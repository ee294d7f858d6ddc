/** Test helpers for the trace tests: CompletionRecord factory and a seeded PRNG. */
import type { FinishReason, IRMessage, IRToolCall } from '../../src/core/ir.ts';
import type { CompletionRecord } from '../../src/core/records.ts';

/** A deterministic float32 logprob for a sampled token (stand-in for an engine's). */
export const lp = (token: number, i: number): number => Math.fround(-(((token * 31 + i * 7) % 97) + 1) / 50);

export interface RecSpec {
  seq: number;
  prompt: number[];
  response: number[];
  logprobs?: number[];
  finish?: FinishReason['unified'];
  id?: string;
  session?: string;
  captureError?: string | null;
  messages?: IRMessage[];
  toolCalls?: IRToolCall[];
  engineId?: string;
  /** The proxy's mode (default chat). */
  mode?: 'chat' | 'token';
}

const text = (t: string) => [{ type: 'text' as const, text: t }];

export function rec(s: RecSpec): CompletionRecord {
  const finish = s.finish ?? 'stop';
  return {
    completion_id: s.id ?? `c${s.seq}`,
    session_id: s.session ?? 'sess',
    seq: s.seq,
    dialect: 'openai-chat',
    request_body: {},
    ir_request: {
      version: 1, model: 'm', messages: s.messages ?? [{ role: 'user', content: text(`turn ${s.seq}`) }],
      tools: [], sampling: {}, stream: false, warnings: [],
    },
    ir_response: {
      id: `r${s.seq}`, model: 'm', content: text(`answer ${s.seq}`), toolCalls: s.toolCalls ?? [],
      finishReason: { unified: finish }, usage: { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 },
      warnings: [], createdAt: 0,
    },
    finish_reason: { unified: finish, raw: finish },
    prompt_ids: s.prompt,
    response_ids: s.response,
    logprobs: s.logprobs ?? s.response.map(lp),
    policy_version: 'v1',
    engine_id: s.engineId ?? 'vllm@http://127.0.0.1:1',
    logprob_semantics: 'raw',
    mode: s.mode ?? 'chat',
    capture_error: s.captureError ?? null,
    warnings: [],
    timings: { engine_ms: 1, total_ms: 1 },
    created_at: 1_700_000_000_000 + s.seq,
  };
}

/** mulberry32: a small seeded PRNG returning floats in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const randInt = (rnd: () => number, lo: number, hi: number): number => lo + Math.floor(rnd() * (hi - lo + 1));
export const randTokens = (rnd: () => number, n: number, lo = 100, hi = 999): number[] =>
  Array.from({ length: n }, () => randInt(rnd, lo, hi));

export const BASE = { session_id: 'sess', task_id: 'task', harness: 'pi', status: 'COMPLETED' as const };
