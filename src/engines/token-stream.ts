/**
 * Token mode's streaming side: sampled ids → text as they arrive (a token that ends inside a UTF-8 sequence waits for
 * the next), and that text split into reasoning and content for the client while the model writes. The split follows
 * the Qwen3 / Qwen3.5 output shape (tokenization/parsers.ts): `<think>…</think>` is reasoning (or everything until
 * `</think>` when the prompt opened the think block; a `<think>` the text starts with then re-opens it and is
 * dropped, as splitQwen3Reasoning drops it), what follows is content until the first `<tool_call>` or the
 * end-of-turn token. Tool calls are not streamed: they are parsed from the whole text at the end (their syntax must be
 * complete to be parsed), and DeltaEmitter.finish sends them then.
 */
import type { DeltaEmitter } from './delta-emitter.ts';

const THINK_OPEN = '<think>';
const THINK_CLOSE = '</think>';
const TOOL_OPEN = '<tool_call>';
const END_TAGS = ['<|im_end|>', '<|endoftext|>'];

/** Ids → text increments; `decode` keeps special tokens (as token mode's parser needs). */
export class IncrementalDecoder {
  private pending: number[] = [];

  constructor(private readonly decode: (ids: number[]) => string) {}

  /** The text the new ids complete (empty while a multi-byte character is still open). */
  push(ids: readonly number[]): string {
    this.pending.push(...ids);
    if (this.pending.length === 0) return '';
    const text = this.decode(this.pending);
    if (text.endsWith('\uFFFD')) return '';
    this.pending = [];
    return text;
  }
}

/** The longest suffix of `text` that is a proper prefix of one of `tags` (it may become the tag). */
function tagPrefixLength(text: string, tags: readonly string[]): number {
  let best = 0;
  for (const tag of tags) {
    for (let n = Math.min(tag.length - 1, text.length); n > best; n--) {
      if (text.endsWith(tag.slice(0, n))) {
        best = n;
        break;
      }
    }
  }
  return best;
}

export class TaggedTextSplitter {
  private state: 'start' | 'reasoning' | 'content' | 'done';
  private buffer = '';
  /** The prompt opened the think block: the text starts as reasoning whether or not it re-opens it. */
  private readonly promptOpened: boolean;

  constructor(
    private readonly emitter: DeltaEmitter,
    promptOpenedThinking: boolean,
  ) {
    this.state = 'start';
    this.promptOpened = promptOpenedThinking;
  }

  push(text: string): void {
    this.buffer += text;
    for (;;) {
      if (this.state === 'done') {
        this.buffer = '';
        return;
      }
      if (this.state === 'start') {
        const lead = this.buffer.replace(/^\s+/, '');
        if (lead.length < THINK_OPEN.length && THINK_OPEN.startsWith(lead)) return;
        if (lead.startsWith(THINK_OPEN)) {
          this.buffer = lead.slice(THINK_OPEN.length);
          this.state = 'reasoning';
        } else this.state = this.promptOpened ? 'reasoning' : 'content';
        continue;
      }
      const ends = this.state === 'reasoning' ? [THINK_CLOSE, ...END_TAGS] : [TOOL_OPEN, ...END_TAGS];
      let at = -1;
      let tag = '';
      for (const candidate of ends) {
        const i = this.buffer.indexOf(candidate);
        if (i >= 0 && (at < 0 || i < at)) [at, tag] = [i, candidate];
      }
      if (at < 0) {
        const keep = tagPrefixLength(this.buffer, ends);
        this.send(this.buffer.slice(0, this.buffer.length - keep));
        this.buffer = this.buffer.slice(this.buffer.length - keep);
        return;
      }
      this.send(this.buffer.slice(0, at));
      this.buffer = this.buffer.slice(at + tag.length);
      this.state = this.state === 'reasoning' && tag === THINK_CLOSE ? 'content' : 'done';
    }
  }

  private send(text: string): void {
    if (text === '') return;
    if (this.state === 'reasoning') this.emitter.reasoning(text);
    else this.emitter.text(text);
  }
}
