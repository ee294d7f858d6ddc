/**
 * Start-up detection of where an engine's chat template puts a system message that arrives after a user turn (Claude
 * Code sends one mid-conversation). vLLM's `POST /tokenize` renders `messages` with the served model's template
 * (https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html#tokenizer-api): the conversation
 * [system, user, system, user] is rendered and compared with the same conversation without the later system message.
 * - the template raises (Qwen3.5-style "System message must be at the beginning") → `merge`;
 * - it renders the later system message (more tokens) → `in-place`: prompts keep extending the previous turn;
 * - it drops it silently (same token count) → `merge`, so its text is not lost.
 * Anything else (no /tokenize, network error) keeps `merge`, with the reason.
 */
import { engineFetchJson, type EngineHttpOptions } from './http.ts';
import type { SystemMessagePlacement } from './chat-request.ts';

export interface PlacementDecision {
  placement: SystemMessagePlacement;
  /** Human-readable reason, for the start-up log line. */
  reason: string;
}

const MARK = 'Polar placement probe: a system note after the first user turn.';

/** Decide the placement for the engine at `url` serving `model` (see the module comment). Never throws. */
export function detectSystemPlacement(url: string, model: string, http: EngineHttpOptions): Promise<PlacementDecision> {
  return placementFromRenderer(async (messages) => {
    const out = (await engineFetchJson(`${url}/tokenize`, { method: 'POST', body: { model, messages, add_generation_prompt: true } }, http, 'tokenize')) as { count?: unknown; tokens?: unknown };
    if (typeof out.count === 'number') return out.count;
    if (Array.isArray(out.tokens)) return out.tokens.length;
    throw new Error('tokenize answered without count or tokens');
  });
}

/**
 * The same decision from any renderer that returns a conversation's token count (token mode: our own chat template).
 * `count` may throw (the template refused the conversation). Never throws.
 */
export async function placementFromRenderer(count: (messages: { role: 'system' | 'user'; content: string }[]) => number | Promise<number>): Promise<PlacementDecision> {
  const base = [{ role: 'system' as const, content: 'You are a helpful assistant.' }, { role: 'user' as const, content: 'Hello.' }];
  const tail = { role: 'user' as const, content: 'Go on.' };
  let without: number;
  try {
    without = await count([...base, tail]);
  } catch (error) {
    return { placement: 'merge', reason: `could not render a conversation (${(error as Error).message}); keeping merge` };
  }
  let withLater: number;
  try {
    withLater = await count([...base, { role: 'system' as const, content: MARK }, tail]);
  } catch (error) {
    return { placement: 'merge', reason: `the chat template refuses a system message after a user turn (${(error as Error).message.slice(0, 160)})` };
  }
  if (withLater > without) return { placement: 'in-place', reason: 'the chat template renders a system message after a user turn where it is' };
  return { placement: 'merge', reason: 'the chat template drops a system message after a user turn' };
}

/** The start-up log line for a probe report's placement, e.g. `system_messages: in_place (auto: …)`; null when unknown. */
export function placementLogLine(report: { systemMessages?: { placement: SystemMessagePlacement; auto: boolean; reason: string } } | null): string | null {
  const p = report?.systemMessages;
  if (!p) return null;
  return `system_messages: ${p.placement === 'in-place' ? 'in_place' : 'merge'} (${p.auto ? `auto: ${p.reason}` : 'configured'})`;
}
