/**
 * Per-session token buffers of token mode: the next prompt of a conversation is the previous prompt ids + the exact
 * sampled ids + the canonical tokens of only the new messages and the generation prompt. The canonical suffix comes
 * from rendering a minimal context (an anchor user turn, the echoed assistant turn, then the new messages) and
 * encoding only what follows the assistant turn's end-of-turn token, so the cost of a
 * turn depends on the size of the new messages, not on the context. Anything that does not extend a buffer
 * (compaction, edited history, another system prompt or tool list) gets a full render and starts a new buffer; that
 * render reuses the session's own sampled ids for every assistant turn that matches one it sampled (reasoning the
 * harness dropped included), so a reset does not re-tokenise what the model actually said. A retry of the same prompt
 * refreshes its buffer instead of adding one, and when a session has too many buffers the main conversation (the one
 * with the most messages) is kept and a side conversation is dropped.
 * Pure computation: no I/O. Sources: docs/architecture.md#chat-mode-and-token-mode, docs/protocol-notes.md#prefix-breakers.
 */
import { appendInt32, int32Of, sameIds, type TokenIds } from '../core/int32-twin.ts';
import { contentText, type ChatMessage, type ChatTool } from './chat-messages.ts';
import { promptThinking, resolveFamilyIds, type FamilyIds, type ModelFamily } from './families.ts';
import type { LoadedTokenizer } from './tokenizer.ts';

/** Template settings that must stay the same for a request to extend a buffer. */
export interface RenderSettings {
  /** OpenAI-shaped tools; empty = none. */
  tools: ChatTool[];
  /** The thinking switch (`enable_thinking`); undefined = the template's default. */
  enableThinking?: boolean;
}

/** Why a prompt was rendered in full instead of extending a buffer. */
export type FullRenderReason =
  /** The session has no buffer (first turn, evicted, or the proxy restarted). */
  | 'no-buffer'
  /** The tools or the thinking switch differ from every buffer of the session. */
  | 'settings-changed'
  /** The messages do not extend any buffer (compaction, edited history, another system prompt, a sub-agent). */
  | 'history-changed'
  /** The template's rendering of the minimal context did not have the expected shape. */
  | 'render-mismatch';

interface BufferContext {
  settingsKey: string;
  /** The request messages of the last turn followed by the assistant message answered with. */
  messages: readonly ChatMessage[];
  /** The last turn's prompt ids (its plan's, shared with its record: never mutated). */
  promptIds: TokenIds;
  /** The ids sampled for it. */
  responseIds: readonly number[];
  /**
   * The prompt ids followed by the sampled ids as an Int32Array (core/int32-twin.ts), from which the next prompt is
   * extended in place; undefined when an id is not an int32.
   */
  twin: Int32Array | undefined;
  /** Whether the sampled ids ended with a stop id (else the template's end-of-turn token is appended). */
  closed: boolean;
  /** Bumped on every commit, so two turns planned from the same buffer do not overwrite each other. */
  version: number;
}

/** The prompt of one turn, from `prepare`; hand it back to `commit` with what was sampled. */
export interface PromptPlan {
  /**
   * The prompt to send to the engine, token ids: an Int32Array whenever they are int32 (always for a tokenizer's
   * ids), so no JS array of the whole conversation is built per turn (the record builds one only when read,
   * core/int32-twin.ts `definePromptIds`). Never mutated.
   */
  readonly promptIds: TokenIds;
  /** True when the prompt extends a buffer (previous prompt + sampled ids + suffix, or a repeat of a prompt). */
  readonly incremental: boolean;
  /** Why the prompt was rendered in full (null when incremental). */
  readonly reason: FullRenderReason | null;
  /** Tokens encoded for this turn: the suffix (incremental) or the whole prompt (full render). */
  readonly encodedTokens: number;
  /** The rendered generation prompt ends with an opened think block: text without the closing tag is reasoning. */
  readonly promptOpenedThinking: boolean;
  readonly sessionId: string;
  readonly messages: readonly ChatMessage[];
  readonly settingsKey: string;
  /** The buffer this plan extends (or repeats) and its version at planning time. */
  readonly base: { context: BufferContext; version: number; repeat: boolean } | null;
  /** Full render only: assistant turns whose sampled ids were reused instead of their re-rendered tokens. */
  readonly reusedTurns: number;
}

/** One sampled assistant turn of a session, kept so a full re-render can reuse its exact ids. */
interface SampledTurn {
  message: ChatMessage;
  ids: readonly number[];
  closed: boolean;
}

export interface TokenBufferOptions {
  /** Sessions kept (least recently used are dropped first). Default 1024. */
  maxSessions?: number;
  /** Buffers (harness contexts: main agent, sub-agents) kept per session. Default 8. */
  maxContextsPerSession?: number;
  /** Sampled assistant turns kept per session for full re-renders (oldest dropped first). Default 512. */
  maxSampledTurnsPerSession?: number;
}

/** Counters of the buffers (exposed on the proxy's health document through the engine's stats). */
export interface TokenBufferStats {
  incremental: number;
  /** Repeats of an earlier prompt (a client retry with the same messages). */
  repeats: number;
  full: number;
  /** Assistant turns whose sampled ids were spliced into full renders. */
  reusedTurns: number;
  /** Buffers dropped because a session had more than `maxContextsPerSession`. */
  evicted: number;
  fullByReason: Record<FullRenderReason, number>;
  /** Tokens encoded in all (suffixes and full renders). */
  encodedTokens: number;
  sessions: number;
}

const ANCHOR: ChatMessage = { role: 'user', content: '.' };

/**
 * The token buffers of every session of one proxy. `prepare` plans a turn's prompt; `commit` records what was sampled.
 * Thread model: single-threaded JS; concurrent turns of one session each extend the buffer they matched, and a
 * second commit on an already advanced buffer opens a sibling buffer instead of overwriting it.
 */
export class SessionTokenBuffers {
  private readonly sessions = new Map<string, BufferContext[]>();
  private readonly samples = new Map<string, SampledTurn[]>();
  /** A tool list's JSON by its first tool object (the Chat encoder hands back the same objects for the same tools). */
  private readonly toolLists = new WeakMap<ChatTool, { tools: readonly ChatTool[]; json: string }>();
  /** Rendering of the anchor turn alone (system/tools header included) per settings key: constant per tool list. */
  private readonly anchorRenders = new Map<string, string>();
  private readonly ids: FamilyIds;
  private readonly stopIds: ReadonlySet<number>;
  private readonly maxSessions: number;
  private readonly maxContexts: number;
  private readonly maxSamples: number;
  private readonly counters: Omit<TokenBufferStats, 'sessions'> = {
    incremental: 0,
    repeats: 0,
    full: 0,
    reusedTurns: 0,
    evicted: 0,
    fullByReason: { 'no-buffer': 0, 'settings-changed': 0, 'history-changed': 0, 'render-mismatch': 0 },
    encodedTokens: 0,
  };

  /**
   * @throws Error when the tokenizer lacks the family's end-of-turn token.
   */
  constructor(
    private readonly tokenizer: LoadedTokenizer,
    private readonly family: ModelFamily,
    options: TokenBufferOptions = {},
  ) {
    this.ids = resolveFamilyIds(tokenizer, family);
    this.stopIds = new Set(this.ids.stopIds);
    this.maxSessions = options.maxSessions ?? 1024;
    this.maxContexts = options.maxContextsPerSession ?? 8;
    this.maxSamples = options.maxSampledTurnsPerSession ?? 512;
  }

  /**
   * Plan the prompt of one turn.
   * @param messages OpenAI-chat-shaped request messages (system first), as the harness sent them this turn.
   * @returns the prompt ids and how they were obtained. Cost: O(new messages) tokenization when the messages extend a
   *   buffer (plus a linear comparison of the messages, no tokenization), O(context) on a full render.
   * @throws Error when the chat template rejects the messages (e.g. a system message out of place).
   */
  prepare(sessionId: string, messages: readonly ChatMessage[], settings: RenderSettings): PromptPlan {
    const settingsKey = this.settingsKeyOf(settings);
    const contexts = this.touch(sessionId);
    let reason: FullRenderReason = contexts.length === 0 ? 'no-buffer' : 'settings-changed';
    for (let c = contexts.length - 1; c >= 0; c--) {
      const context = contexts[c]!;
      if (context.settingsKey !== settingsKey) continue;
      reason = 'history-changed';
      const known = context.messages.length;
      // A repeat of the last turn's request (client retry): the same prompt again.
      if (messages.length === known - 1 && messagesExtend(messages, context.messages, known - 1)) {
        this.counters.repeats++;
        return this.plan(sessionId, messages, settingsKey, context.promptIds, 0, null, this.openedThinking(context.promptIds), {
          context, version: context.version, repeat: true,
        });
      }
      if (messages.length <= known || !messagesExtend(messages, context.messages, known)) continue;
      const suffix = this.renderSuffix(messages[known - 1]!, messages.slice(known), settings, settingsKey);
      if (suffix === null) {
        reason = 'render-mismatch';
        break;
      }
      // The previous prompt, its sampled ids, the end-of-turn token unless a stop id closed the sample, the suffix:
      // only the last two are written into the buffer's Int32Array (in place while it has room), which is the prompt.
      const added = context.closed ? suffix.ids : [this.ids.endOfTurn, ...suffix.ids];
      const twin = context.twin === undefined ? undefined : appendInt32(context.twin, added);
      const promptIds = twin ?? [...context.promptIds, ...context.responseIds, ...added];
      this.counters.incremental++;
      return this.plan(sessionId, messages, settingsKey, promptIds, suffix.ids.length, null, suffix.openedThinking, { context, version: context.version, repeat: false });
    }
    this.counters.full++;
    this.counters.fullByReason[reason]++;
    const reused = this.renderReusing(sessionId, messages, settings, settingsKey);
    if (reused !== null) {
      this.counters.reusedTurns += reused.turns;
      return this.plan(sessionId, messages, settingsKey, reused.ids, reused.encoded, reason, reused.openedThinking, null, reused.turns);
    }
    const text = this.tokenizer.renderChat(messages, { tools: settings.tools, enableThinking: settings.enableThinking, addGenerationPrompt: true, family: this.family });
    const promptIds = this.tokenizer.encode(text);
    return this.plan(sessionId, messages, settingsKey, promptIds, promptIds.length, reason, this.textOpensThinking(text), null);
  }

  /**
   * A full render that splices in the session's own sampled ids: the messages before the first assistant turn that
   * matches a sampled one (`sameChatMessage`: reasoning the harness dropped does not prevent a match) are rendered
   * with the generation prompt, as that turn's prompt was; each matched turn contributes its sampled ids; the
   * messages between matched turns and after the last one are the canonical suffixes of the incremental path.
   * Null when no assistant turn matches or a rendering does not have the expected shape (then: a plain full render).
   */
  private renderReusing(sessionId: string, messages: readonly ChatMessage[], settings: RenderSettings, settingsKey: string): { ids: number[]; encoded: number; turns: number; openedThinking: boolean } | null {
    const samples = this.samples.get(sessionId);
    if (!samples || samples.length === 0) return null;
    let ids: number[] | null = null;
    let encoded = 0;
    let turns = 0;
    let previous = -1;
    try {
      for (let i = 0; i < messages.length; i++) {
        const message = messages[i]!;
        if (message.role !== 'assistant') continue;
        let sample: SampledTurn | undefined;
        for (let k = samples.length - 1; k >= 0 && !sample; k--) if (sameChatMessage(message, samples[k]!.message)) sample = samples[k];
        if (!sample) continue;
        if (ids === null) {
          if (i === 0) continue;
          ids = this.tokenizer.renderChatIds(messages.slice(0, i), { tools: settings.tools, enableThinking: settings.enableThinking, addGenerationPrompt: true, family: this.family });
          encoded += ids.length;
        } else {
          const between = this.renderSuffix(messages[previous]!, messages.slice(previous + 1, i), settings, settingsKey);
          if (between === null) return null;
          ids.push(...between.ids);
          encoded += between.ids.length;
        }
        ids.push(...sample.ids);
        if (!sample.closed) ids.push(this.ids.endOfTurn);
        previous = i;
        turns++;
      }
      if (ids === null) return null;
      const tail = this.renderSuffix(messages[previous]!, messages.slice(previous + 1), settings, settingsKey);
      if (tail === null) return null;
      ids.push(...tail.ids);
      return { ids, encoded: encoded + tail.ids.length, turns, openedThinking: tail.openedThinking };
    } catch {
      // The template rejected a partial conversation: fall back to the plain full render.
      return null;
    }
  }

  /**
   * Record what was sampled for a planned turn, so the next turn can extend it.
   * @param responseIds the exact sampled ids (the stop id included when the sample ended on one).
   * @param assistant the assistant message the client was answered with (parsed content, reasoning, tool calls).
   */
  commit(plan: PromptPlan, responseIds: readonly number[], assistant: ChatMessage): void {
    const last = responseIds[responseIds.length - 1];
    const promptTwin = int32Of(plan.promptIds);
    const next: BufferContext = {
      settingsKey: plan.settingsKey,
      messages: [...plan.messages, assistant],
      promptIds: plan.promptIds,
      responseIds,
      twin: promptTwin === undefined ? undefined : appendInt32(promptTwin, responseIds),
      closed: last !== undefined && this.stopIds.has(last),
      version: 0,
    };
    const contexts = this.touch(plan.sessionId);
    const base = plan.base;
    // The buffer this turn extended or repeated (a retry refreshes it with the new sample), unless another turn
    // advanced it meanwhile; else any buffer with exactly this prompt (a repeat that was rendered in full).
    let at = base && base.context.version === base.version ? contexts.indexOf(base.context) : -1;
    if (at < 0) at = contexts.findIndex((c) => c.settingsKey === next.settingsKey && sameIds(c.promptIds, plan.promptIds));
    if (at >= 0) {
      next.version = contexts[at]!.version + 1;
      contexts.splice(at, 1);
    }
    contexts.push(next);
    if (contexts.length > this.maxContexts) {
      // Keep the main conversation (most messages; the newest on a tie): drop the least recently used other one.
      let main = 0;
      for (let c = 1; c < contexts.length; c++) if (contexts[c]!.messages.length >= contexts[main]!.messages.length) main = c;
      contexts.splice(main === 0 ? 1 : 0, 1);
      this.counters.evicted++;
    }
    if (responseIds.length > 0) {
      let samples = this.samples.get(plan.sessionId);
      if (!samples) this.samples.set(plan.sessionId, (samples = []));
      samples.push({ message: assistant, ids: responseIds.slice(), closed: next.closed });
      if (samples.length > this.maxSamples) samples.shift();
    }
  }

  /** Drop a session's buffers (its session ended). A later request of it simply gets a full render. */
  endSession(sessionId: string): void {
    this.sessions.delete(sessionId);
    this.samples.delete(sessionId);
  }

  /** A snapshot of the counters. */
  stats(): TokenBufferStats {
    return { ...this.counters, fullByReason: { ...this.counters.fullByReason }, sessions: this.sessions.size };
  }

  private plan(
    sessionId: string,
    messages: readonly ChatMessage[],
    settingsKey: string,
    ids: TokenIds,
    encodedTokens: number,
    reason: FullRenderReason | null,
    promptOpenedThinking: boolean,
    base: PromptPlan['base'],
    reusedTurns = 0,
  ): PromptPlan {
    this.counters.encodedTokens += encodedTokens;
    // A full render's ids become an Int32Array here (an incremental prompt is one already), which the next turn
    // extends in place, the engine client writes as JSON incrementally and the store compares and packs natively.
    const promptIds = int32Of(ids) ?? appendInt32(undefined, ids as readonly number[]) ?? ids;
    return { promptIds, incremental: reason === null, reason, encodedTokens, promptOpenedThinking, sessionId, messages, settingsKey, base, reusedTurns };
  }

  /**
   * `JSON.stringify([tools, enableThinking ?? null])`, with the tool list's JSON (~60 KB for Claude Code) kept while
   * its tool objects stay the same.
   */
  private settingsKeyOf(settings: RenderSettings): string {
    const tools = settings.tools;
    let json = '[]';
    if (tools.length > 0) {
      const kept = this.toolLists.get(tools[0]!);
      if (kept !== undefined && kept.tools.length === tools.length && kept.tools.every((tool, i) => tool === tools[i])) json = kept.json;
      else {
        json = JSON.stringify(tools);
        this.toolLists.set(tools[0]!, { tools: tools.slice(), json });
      }
    }
    return `[${json},${JSON.stringify(settings.enableThinking ?? null)}]`;
  }

  /** The session's buffers, marked most recently used (evicting the least recently used session when over the bound). */
  private touch(sessionId: string): BufferContext[] {
    let contexts = this.sessions.get(sessionId);
    if (contexts) this.sessions.delete(sessionId);
    else contexts = [];
    this.sessions.set(sessionId, contexts);
    if (this.sessions.size > this.maxSessions) {
      const oldest = this.sessions.keys().next().value!;
      this.sessions.delete(oldest);
      this.samples.delete(oldest);
    }
    return contexts;
  }

  /**
   * The canonical tokens that follow the echoed assistant turn: render [anchor, assistant, ...newMessages] + the
   * generation prompt and cut right after the assistant turn's end-of-turn token, found after the rendering of
   * [anchor] alone. (The assistant turn itself is not cut from a rendering where it is the last message: templates
   * render the last turn differently, e.g. Qwen3 adds an empty think block.) The anchor user turn keeps templates that
   * look for the last user query (reasoning placement) or reject a conversation without one working on the minimal
   * context. The assistant turn ends at the family's end-of-turn token (or `historyEnd` of the message: gpt-oss closes
   * a tool call with `<|call|>`); for templates that render one tool call per turn only the first call is rendered
   * (the sampled ids keep them all). Null when the rendering does not have that shape.
   */
  private renderSuffix(assistant: ChatMessage, newMessages: readonly ChatMessage[], settings: RenderSettings, settingsKey: string): { ids: number[]; openedThinking: boolean } | null {
    // When the template reads the tools only in its system header (tokenizer.ts `templateToolsOnlyInHeader`), the
    // text after the echoed assistant turn is the same without them, and leaving them out saves converting and
    // JSON-dumping the whole tool list (~60 KB for Claude Code) in the template engine on every turn.
    const headerOnly = this.tokenizer.toolsOnlyInHeader;
    const options = { tools: headerOnly ? [] : settings.tools, enableThinking: settings.enableThinking, family: this.family };
    const anchorKey = headerOnly ? `no-tools:${settings.enableThinking ?? null}` : settingsKey;
    let head = this.anchorRenders.get(anchorKey);
    if (head === undefined) {
      head = this.tokenizer.renderChat([ANCHOR], { ...options, addGenerationPrompt: false });
      this.anchorRenders.set(anchorKey, head);
      if (this.anchorRenders.size > 16) this.anchorRenders.delete(this.anchorRenders.keys().next().value!);
    }
    const echoed = this.family.singleToolCall && (assistant.tool_calls?.length ?? 0) > 1 ? { ...assistant, tool_calls: assistant.tool_calls!.slice(0, 1) } : assistant;
    const extended = this.tokenizer.renderChat([ANCHOR, echoed, ...newMessages], { ...options, addGenerationPrompt: true });
    if (!extended.startsWith(head)) return null;
    const end = this.family.historyEnd?.(echoed) ?? this.family.endOfTurn;
    const eot = extended.indexOf(end, head.length);
    if (eot < 0) return null;
    const suffix = extended.slice(eot + end.length);
    return { ids: this.tokenizer.encode(suffix), openedThinking: this.textOpensThinking(suffix) };
  }

  private textOpensThinking(text: string): boolean {
    return promptThinking(this.family, text) === 'opened';
  }

  private openedThinking(promptIds: TokenIds): boolean {
    return this.textOpensThinking(this.tokenizer.decode(Array.prototype.slice.call(promptIds, Math.max(0, promptIds.length - 8))));
  }
}

/** True when `incoming[0..count)` equals `known[0..count)` after normalisation (see `sameChatMessage`). */
function messagesExtend(incoming: readonly ChatMessage[], known: readonly ChatMessage[], count: number): boolean {
  for (let i = 0; i < count; i++) if (!sameChatMessage(incoming[i]!, known[i]!)) return false;
  return true;
}

/**
 * Message equality for buffer matching: same role, same text (surrounding whitespace ignored), same tool calls by
 * name and arguments compared as parsed JSON (spacing and key order ignored), ids ignored (they are ours or the
 * dialect's minted ones), reasoning ignored when either side dropped it and compared when both have it.
 */
export function sameChatMessage(a: ChatMessage, b: ChatMessage): boolean {
  if (a === b) return true; // the chat encoder hands back the same object for a message it already encoded
  if (a.role !== b.role) return false;
  const ca = contentText(a.content);
  const cb = contentText(b.content);
  if (ca !== cb && ca.trim() !== cb.trim()) return false;
  const ra = reasoningOf(a);
  const rb = reasoningOf(b);
  if (ra !== '' && rb !== '' && ra !== rb && ra.trim() !== rb.trim()) return false;
  const ta = a.tool_calls ?? [];
  const tb = b.tool_calls ?? [];
  if (ta.length !== tb.length) return false;
  for (let i = 0; i < ta.length; i++) {
    const fa = ta[i]!.function;
    const fb = tb[i]!.function;
    if (fa.name !== fb.name || !sameArguments(fa.arguments, fb.arguments)) return false;
  }
  return true;
}

function reasoningOf(message: ChatMessage): string {
  const value = message.reasoning_content ?? message.reasoning;
  return typeof value === 'string' ? value : '';
}

function sameArguments(a: string | Record<string, unknown>, b: string | Record<string, unknown>): boolean {
  if (a === b) return true;
  const pa = parseArguments(a);
  const pb = parseArguments(b);
  if (pa.ok && pb.ok) return canonicalJson(pa.value) === canonicalJson(pb.value);
  return typeof a === 'string' && typeof b === 'string' && a.trim() === b.trim();
}

function parseArguments(value: string | Record<string, unknown>): { ok: true; value: unknown } | { ok: false } {
  if (typeof value !== 'string') return { ok: true, value };
  if (value.trim() === '') return { ok: true, value: {} };
  try {
    return { ok: true, value: JSON.parse(value) as unknown };
  } catch {
    return { ok: false };
  }
}

/** JSON with object keys sorted, so key order does not matter. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value as Record<string, unknown>).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
