/**
 * Chat mode, optional (`restoreReasoning`): put back the reasoning a harness dropped from its own history before the
 * engine renders it. Gemini CLI strips thought parts and other clients drop `reasoning_content`, so the engine's
 * template renders an earlier assistant turn without its think block: the engine is then conditioned on tokens that
 * differ from the sampled ones and `prefix_merging` counts a re-rendered join. The proxy remembers, per session, the
 * reasoning of every answer it returned (keyed by the answer's text and tool calls, never by ids, which clients
 * re-mint; answers with the same key are kept in the order they were given, and the n-th such message of a history
 * gets the n-th reasoning) and restores it on an assistant message that comes back without reasoning. Only the session's own
 * records are used. In token mode the token buffers already keep the sampled ids, so this is not needed there.
 * Source: docs/architecture.md#chat-mode-and-token-mode.
 */
import type { IRMessage, IRRequest, IRResponse, IRToolCall } from '../core/ir.ts';

/** Bounds: sessions remembered (least recently used dropped first) and answers per session. */
export interface ReasoningMemoryOptions {
  maxSessions?: number;
  maxAnswersPerSession?: number;
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function argumentsKey(raw: string): string {
  try {
    return canonical(JSON.parse(raw));
  } catch {
    return raw.trim();
  }
}

/** The key of an assistant answer: its text (trimmed) and its tool calls by name and parsed arguments. */
function answerKey(text: string, calls: readonly IRToolCall[]): string {
  return `${text.trim()}\u0000${calls.map((c) => `${c.name}\u0001${argumentsKey(c.arguments)}`).join('\u0002')}`;
}

function textOf(message: { content: readonly { type: string; text?: string }[] }): string {
  return message.content.map((p) => (p.type === 'text' ? (p.text ?? '') : '')).join('');
}

export class ReasoningMemory {
  private readonly sessions = new Map<string, { answers: Map<string, string[]>; count: number }>();
  private readonly maxSessions: number;
  private readonly maxAnswers: number;

  constructor(options: ReasoningMemoryOptions = {}) {
    this.maxSessions = options.maxSessions ?? 1024;
    this.maxAnswers = options.maxAnswersPerSession ?? 2048;
  }

  /** Remember the reasoning of an answer the proxy returned to a session (no-op without reasoning). */
  remember(sessionId: string, response: IRResponse): void {
    const text = response.reasoning?.text;
    if (!text) return;
    let memory = this.sessions.get(sessionId);
    if (memory) this.sessions.delete(sessionId);
    else memory = { answers: new Map(), count: 0 };
    this.sessions.set(sessionId, memory);
    if (this.sessions.size > this.maxSessions) this.sessions.delete(this.sessions.keys().next().value!);
    // Past the bound the session stops remembering (restoring from a truncated list would misalign repeats).
    if (memory.count >= this.maxAnswers) return;
    const key = answerKey(textOf(response), response.toolCalls);
    const list = memory.answers.get(key);
    if (list) list.push(text);
    else memory.answers.set(key, [text]);
    memory.count++;
  }

  /**
   * A copy of `request` whose assistant messages without reasoning get the reasoning this session's matching answer
   * had. Returns the request itself when nothing was restored.
   * @returns the request and how many assistant messages got their reasoning back.
   */
  restore(sessionId: string, request: IRRequest): { request: IRRequest; restored: number } {
    const memory = this.sessions.get(sessionId);
    if (!memory || memory.count === 0) return { request, restored: 0 };
    let restored = 0;
    const seen = new Map<string, number>();
    const messages = request.messages.map((message): IRMessage => {
      if (message.role !== 'assistant') return message;
      const key = answerKey(textOf(message), message.toolCalls ?? []);
      const nth = seen.get(key) ?? 0;
      seen.set(key, nth + 1);
      if (message.reasoning && (message.reasoning.text !== '' || message.reasoning.redacted)) return message;
      const text = memory.answers.get(key)?.[nth];
      if (text === undefined) return message;
      restored++;
      return { ...message, reasoning: { ...message.reasoning, text } };
    });
    return restored === 0 ? { request, restored } : { request: { ...request, messages }, restored };
  }
}
