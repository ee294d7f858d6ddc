/**
 * IR stream events: what a dialect's stream encoder consumes. Synthetic streaming replays one IRResponse as these
 * events (`responseToStreamEvents`); true streaming will push them as the engine produces deltas.
 */
import type { FinishReason, IRResponse, IRUsage } from './ir.ts';
import type { GatewayError } from './errors.ts';

export type IRStreamEvent =
  /** First event, sent at once. `inputTokens` is 0 when not yet known (the finish event carries the real count). */
  | { type: 'start'; id: string; model: string; createdAt: number; inputTokens: number }
  | { type: 'keep-alive' }
  | { type: 'reasoning-delta'; text: string }
  /** Ends the reasoning block; carries its signature (Claude Code drops a thinking block without one). */
  | { type: 'reasoning-end'; signature?: string }
  | { type: 'text-delta'; text: string }
  | { type: 'text-end' }
  | { type: 'tool-call-start'; index: number; id: string; name: string }
  | { type: 'tool-call-delta'; index: number; argumentsDelta: string }
  | { type: 'tool-call-end'; index: number }
  | { type: 'finish'; finishReason: FinishReason; usage: IRUsage; response: IRResponse }
  | { type: 'error'; error: GatewayError };

/** An SSE stream encoder for one response. `push` returns the bytes (SSE frames as text) to write now. */
export interface StreamEncoder {
  push(event: IRStreamEvent): string;
  /** Called once after the last event; returns trailing frames (e.g. `data: [DONE]`). */
  end(): string;
}

/** Replay a complete response as the event sequence of a synthetic stream (after the `start` event). */
export function responseToStreamEvents(response: IRResponse): IRStreamEvent[] {
  const events: IRStreamEvent[] = [];
  if (response.reasoning && (response.reasoning.text || response.reasoning.signature)) {
    if (response.reasoning.text) events.push({ type: 'reasoning-delta', text: response.reasoning.text });
    events.push({ type: 'reasoning-end', signature: response.reasoning.signature });
  }
  let text = '';
  for (const part of response.content) if (part.type === 'text') text += part.text;
  if (text) {
    events.push({ type: 'text-delta', text });
    events.push({ type: 'text-end' });
  }
  response.toolCalls.forEach((call, index) => {
    events.push({ type: 'tool-call-start', index, id: call.id, name: call.name });
    if (call.arguments) events.push({ type: 'tool-call-delta', index, argumentsDelta: call.arguments });
    events.push({ type: 'tool-call-end', index });
  });
  events.push({ type: 'finish', finishReason: response.finishReason, usage: response.usage, response });
  return events;
}

/** Format one SSE frame. `event` is omitted for data-only protocols (OpenAI Chat, Gemini). */
export function sseFrame(data: unknown, event?: string): string {
  const json = typeof data === 'string' ? data : JSON.stringify(data);
  return event ? `event: ${event}\ndata: ${json}\n\n` : `data: ${json}\n\n`;
}

/** An SSE comment line: ignored by every SSE parser; used as a keep-alive before real events exist. */
export const SSE_COMMENT_KEEPALIVE = ': keep-alive\n\n';
