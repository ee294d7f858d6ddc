/**
 * Turns an engine's streamed pieces (reasoning text, content text, tool-call fragments) into the ordered IR deltas a
 * client's stream encoder takes, and at the end reconciles what was sent with the completion as recorded, so the
 * client's stream and the record say the same thing:
 * - whitespace is held back until something else follows it: whitespace-only text next to a tool call is never sent
 *   (the recorded response drops it too), and trailing whitespace the record trims is never sent;
 * - with `trimLeadingNewlines` (token mode trims newlines around the parsed text) leading newlines are dropped;
 * - with `stops` (token mode applies stop strings to the text after sampling) text stops at the first match, and a
 *   tail that could be the start of a stop string is held back;
 * - `finish(response)` sends whatever the recorded response has beyond what was streamed (the rest of the text, tool
 *   calls not yet sent, normalised arguments) and closes every open block. When the stream already sent something
 *   the record does not start with (it cannot be unsent), a `stream-diverged` warning says so.
 */
import type { IRResponse, Warning } from '../core/ir.ts';
import { textOf } from '../core/ir.ts';
import type { EngineStreamEvent } from './types.ts';

export interface DeltaEmitterOptions {
  trimLeadingNewlines?: boolean;
  stops?: readonly string[];
}

type Sink = (event: EngineStreamEvent) => void;

/** The length of `s` without its trailing whitespace. */
function solidLength(s: string): number {
  return s.replace(/\s+$/, '').length;
}

export class DeltaEmitter {
  private reasoningSent = '';
  private reasoningHeld = '';
  private reasoningClosed = false;
  private textSent = '';
  private textHeld = '';
  private textClosed = false;
  private textCut = false;
  private readonly tools = new Map<number, { id: string; name: string; args: string; ended: boolean }>();
  private readonly maxStop: number;

  constructor(
    private readonly sink: Sink,
    private readonly opts: DeltaEmitterOptions = {},
  ) {
    this.maxStop = Math.max(0, ...(opts.stops ?? []).map((s) => s.length));
  }

  /** Whether any content delta has been sent. */
  get started(): boolean {
    return this.reasoningSent !== '' || this.textSent !== '' || this.tools.size > 0;
  }

  reasoning(delta: string): void {
    if (delta === '' || this.reasoningClosed) return;
    let held = this.reasoningHeld + delta;
    if (this.reasoningSent === '' && this.opts.trimLeadingNewlines) held = held.replace(/^\n+/, '');
    const cut = solidLength(held);
    if (cut > 0) {
      this.sink({ type: 'reasoning-delta', text: held.slice(0, cut) });
      this.reasoningSent += held.slice(0, cut);
    }
    this.reasoningHeld = held.slice(cut);
  }

  /** Held whitespace after sent text belongs to it (minus the trailing newlines token mode trims). */
  private tailOf(held: string): string {
    return this.opts.trimLeadingNewlines ? held.replace(/\n+$/, '') : held;
  }

  private closeReasoning(): void {
    if (this.reasoningClosed) return;
    this.reasoningClosed = true;
    const tail = this.reasoningSent === '' ? '' : this.tailOf(this.reasoningHeld);
    if (tail !== '') {
      this.sink({ type: 'reasoning-delta', text: tail });
      this.reasoningSent += tail;
    }
    this.reasoningHeld = '';
    if (this.reasoningSent !== '') this.sink({ type: 'reasoning-end' });
  }

  text(delta: string): void {
    if (delta === '' || this.textClosed || this.textCut) return;
    this.closeReasoning();
    let held = this.textHeld + delta;
    if (this.textSent === '' && this.opts.trimLeadingNewlines) held = held.replace(/^\n+/, '');
    let limit = held.length;
    if (this.opts.stops?.length) {
      const full = this.textSent + held;
      let at = -1;
      for (const stop of this.opts.stops) {
        const i = stop === '' ? -1 : full.indexOf(stop);
        if (i >= 0 && (at < 0 || i < at)) at = i;
      }
      if (at >= 0) {
        limit = Math.max(0, at - this.textSent.length);
        this.textCut = true;
      } else limit = Math.max(0, held.length - (this.maxStop - 1));
    }
    const cut = Math.min(limit, solidLength(held.slice(0, limit)));
    if (cut > 0) {
      this.sink({ type: 'text-delta', text: held.slice(0, cut) });
      this.textSent += held.slice(0, cut);
    }
    this.textHeld = this.textCut ? '' : held.slice(cut);
  }

  private closeText(): void {
    if (this.textClosed) return;
    this.closeReasoning();
    this.textClosed = true;
    // Whitespace-only text (nothing sent yet) next to a tool call is dropped, as the record drops it.
    const tail = this.textSent === '' ? '' : this.tailOf(this.textHeld);
    if (tail !== '') {
      this.sink({ type: 'text-delta', text: tail });
      this.textSent += tail;
    }
    this.textHeld = '';
    if (this.textSent !== '') this.sink({ type: 'text-end' });
  }

  /** A tool call begins (once per index); text and reasoning end here. */
  toolStart(index: number, id: string, name: string): void {
    if (this.tools.has(index)) return;
    this.closeText();
    this.tools.set(index, { id, name, args: '', ended: false });
    this.sink({ type: 'tool-call-start', index, id, name });
  }

  toolDelta(index: number, argumentsDelta: string): void {
    const call = this.tools.get(index);
    if (!call || call.ended || argumentsDelta === '') return;
    call.args += argumentsDelta;
    this.sink({ type: 'tool-call-delta', index, argumentsDelta });
  }

  /**
   * Send what the recorded response has beyond what was streamed, then close every block.
   * @returns warnings (`stream-diverged`) for anything streamed that the record does not contain.
   */
  finish(response: IRResponse): Warning[] {
    const diverged: string[] = [];
    // The record decides the rest of each block: what is held back (whitespace, a possible stop string's start) is
    // either in the record beyond what was sent, and goes out with it below, or not in the record at all.
    this.reasoningHeld = '';
    this.textHeld = '';
    const reasoning = response.reasoning?.text ?? '';
    if (!reasoning.startsWith(this.reasoningSent)) diverged.push('reasoning');
    else if (reasoning.length > this.reasoningSent.length) {
      if (this.reasoningClosed) diverged.push('reasoning');
      else {
        this.sink({ type: 'reasoning-delta', text: reasoning.slice(this.reasoningSent.length) });
        this.reasoningSent = reasoning;
      }
    }
    this.closeReasoning();
    const text = textOf(response.content);
    if (!text.startsWith(this.textSent)) diverged.push('text');
    else if (text.length > this.textSent.length) {
      if (this.textClosed) diverged.push('text');
      else {
        this.sink({ type: 'text-delta', text: text.slice(this.textSent.length) });
        this.textSent = text;
      }
    }
    this.closeText();
    const sent = [...this.tools.entries()];
    let nextIndex = Math.max(-1, ...this.tools.keys()) + 1;
    response.toolCalls.forEach((call, k) => {
      const streamed = sent[k];
      if (streamed && streamed[1].name === call.name && call.arguments.startsWith(streamed[1].args)) {
        const [index, state] = streamed;
        this.toolDelta(index, call.arguments.slice(state.args.length));
        state.ended = true;
        this.sink({ type: 'tool-call-end', index });
        return;
      }
      if (streamed) diverged.push(`tool call ${k}`);
      const index = nextIndex++;
      this.sink({ type: 'tool-call-start', index, id: call.id, name: call.name });
      if (call.arguments !== '') this.sink({ type: 'tool-call-delta', index, argumentsDelta: call.arguments });
      this.sink({ type: 'tool-call-end', index });
    });
    for (const [index, state] of sent.slice(response.toolCalls.length)) {
      diverged.push(`tool call ${state.name}`);
      if (!state.ended) this.sink({ type: 'tool-call-end', index });
    }
    return diverged.length === 0 ? [] : [{ code: 'stream-diverged', message: `the streamed reply differs from the recorded completion in: ${diverged.join(', ')}` }];
  }
}
