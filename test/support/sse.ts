/**
 * SSE helpers for tests: a spec-conformant incremental parser (byte chunks may split anywhere, including inside UTF-8
 * sequences and between \r and \n), and per-dialect `reassemble` functions that rebuild the final message from events
 * so a stream can be compared with the non-streaming body.
 * Source: https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation
 */

/** One dispatched SSE event (`event` is null when the frame had no `event:` line). Comments are kept for keep-alive checks. */
export interface SseEvent {
  event: string | null;
  data: string;
}

export interface SseParseResult {
  events: SseEvent[];
  /** Text of comment lines (without the leading colon), in order. */
  comments: string[];
}

/** Incremental parser: feed text or bytes in any pieces; `finish()` returns everything dispatched. */
export class SseParser {
  private readonly decoder = new TextDecoder('utf-8', { fatal: true });
  private buffer = '';
  private pendingCr = false;
  private eventName: string | null = null;
  private dataLines: string[] | null = null;
  readonly result: SseParseResult = { events: [], comments: [] };

  /** Feed the next piece of the stream. */
  push(chunk: Uint8Array | string): void {
    let text = typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true });
    if (this.pendingCr && text.startsWith('\n')) text = text.slice(1); // a \r\n split across chunks is one line end
    this.pendingCr = false;
    this.buffer += text;
    let start = 0;
    for (let i = 0; i < this.buffer.length; i++) {
      const c = this.buffer[i];
      if (c !== '\n' && c !== '\r') continue;
      this.line(this.buffer.slice(start, i));
      if (c === '\r') {
        if (i + 1 === this.buffer.length) this.pendingCr = true;
        else if (this.buffer[i + 1] === '\n') i++;
      }
      start = i + 1;
    }
    this.buffer = this.buffer.slice(start);
  }

  /** End of stream: flush the decoder; an unterminated final event is discarded, as the spec says. */
  finish(): SseParseResult {
    this.push(this.decoder.decode());
    return this.result;
  }

  private line(line: string): void {
    if (line === '') {
      if (this.dataLines !== null) this.result.events.push({ event: this.eventName, data: this.dataLines.join('\n') });
      this.eventName = null;
      this.dataLines = null;
      return;
    }
    if (line.startsWith(':')) {
      this.result.comments.push(line.slice(1).trimStart());
      return;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.eventName = value;
    else if (field === 'data') (this.dataLines ??= []).push(value);
  }
}

/** Parse a complete SSE text (or bytes) into events and comments. */
export function parseSse(input: string | Uint8Array): SseParseResult {
  const parser = new SseParser();
  parser.push(input);
  return parser.finish();
}

/** Parse a stream delivered in `chunks`. */
export function parseSseChunks(chunks: Iterable<Uint8Array | string>): SseParseResult {
  const parser = new SseParser();
  for (const chunk of chunks) parser.push(chunk);
  return parser.finish();
}

/** Read a fetch Response body to the end and parse it. */
export async function collectSse(response: Response): Promise<SseParseResult> {
  const parser = new SseParser();
  if (response.body) for await (const chunk of response.body) parser.push(chunk as Uint8Array);
  return parser.finish();
}

/**
 * Split bytes into pieces of 1–17 bytes chosen by a seeded LCG (seed 0 = one piece). Cuts land anywhere, including
 * inside multi-byte UTF-8 sequences and between \r and \n.
 */
export function splitAtRandom(bytes: Uint8Array, seed: number): Uint8Array[] {
  if (seed === 0) return [bytes];
  const pieces: Uint8Array[] = [];
  let state = seed;
  for (let at = 0; at < bytes.length; ) {
    state = (Math.imul(state, 1103515245) + 12345) & 0x7fffffff;
    const size = (state % 17) + 1;
    pieces.push(bytes.subarray(at, at + size));
    at += size;
  }
  return pieces;
}

const parseData = (event: SseEvent): Record<string, any> => JSON.parse(event.data);

/**
 * Rebuild an Anthropic Message from `message_start` … `message_stop` events, checking the ordering rules Claude Code
 * relies on (one start and one stop per index, deltas only inside an open block, nothing after message_stop).
 * @throws Error describing the first violation.
 */
export function reassembleAnthropic(events: readonly SseEvent[]): Record<string, any> {
  let message: Record<string, any> | null = null;
  const open = new Set<number>();
  const closed = new Set<number>();
  const json = new Map<number, string>();
  let stopped = false;
  for (const event of events) {
    if (stopped) throw new Error(`event after message_stop: ${event.event}`);
    const data = parseData(event);
    if (event.event !== data.type) throw new Error(`event name ${event.event} ≠ data.type ${data.type}`);
    switch (data.type) {
      case 'ping':
        break;
      case 'message_start':
        if (message) throw new Error('second message_start');
        message = structuredClone(data.message);
        break;
      case 'content_block_start':
        if (!message) throw new Error('content_block_start before message_start');
        if (open.has(data.index) || closed.has(data.index)) throw new Error(`second start for index ${data.index}`);
        if (data.index !== message.content.length) throw new Error(`index ${data.index} out of order`);
        open.add(data.index);
        message.content.push(structuredClone(data.content_block));
        break;
      case 'content_block_delta': {
        if (!open.has(data.index)) throw new Error(`delta for index ${data.index} that is not open`);
        const block = message!.content[data.index];
        const delta = data.delta;
        if (delta.type === 'text_delta') block.text += delta.text;
        else if (delta.type === 'thinking_delta') block.thinking += delta.thinking;
        else if (delta.type === 'signature_delta') block.signature = delta.signature;
        else if (delta.type === 'input_json_delta') json.set(data.index, (json.get(data.index) ?? '') + delta.partial_json);
        else throw new Error(`unknown delta ${delta.type}`);
        break;
      }
      case 'content_block_stop': {
        if (!open.has(data.index)) throw new Error(`stop for index ${data.index} that is not open`);
        open.delete(data.index);
        closed.add(data.index);
        const block = message!.content[data.index];
        if (block.type === 'tool_use') block.input = JSON.parse(json.get(data.index) || '{}');
        if (block.type === 'thinking' && !block.signature) throw new Error(`thinking block ${data.index} stopped without a signature`);
        break;
      }
      case 'message_delta':
        if (open.size > 0) throw new Error('message_delta with open blocks');
        Object.assign(message!, data.delta);
        message!.usage = { ...message!.usage, ...data.usage };
        break;
      case 'message_stop':
        stopped = true;
        break;
      case 'error':
        throw new Error(`in-band error: ${JSON.stringify(data.error)}`);
      default:
        throw new Error(`unknown event ${data.type}`);
    }
  }
  if (!message || !stopped) throw new Error('stream ended without message_stop');
  return message;
}

/**
 * Rebuild an OpenAI `chat.completion` from chunk events up to `[DONE]` (usage from the usage chunk, when sent).
 * @throws Error when the stream has no `[DONE]`, data after it, or an in-band error.
 */
export function reassembleOpenAIChat(events: readonly SseEvent[]): Record<string, any> {
  let head: Record<string, any> | null = null;
  let content: string | null = null;
  let reasoning: string | null = null;
  let finish: string | null = null;
  let usage: unknown;
  let done = false;
  const calls: { id: string; type: string; function: { name: string; arguments: string } }[] = [];
  for (const event of events) {
    if (done) throw new Error('data after [DONE]');
    if (event.event !== null) throw new Error(`unexpected event name ${event.event}`);
    if (event.data === '[DONE]') {
      done = true;
      continue;
    }
    const data = parseData(event);
    if (data.error) throw new Error(`in-band error: ${JSON.stringify(data.error)}`);
    if (data.object !== 'chat.completion.chunk') throw new Error(`unexpected object ${data.object}`);
    head ??= { id: data.id, created: data.created, model: data.model };
    if (data.usage) usage = data.usage;
    for (const choice of data.choices) {
      const delta = choice.delta ?? {};
      if (typeof delta.content === 'string') content = (content ?? '') + delta.content;
      if (typeof delta.reasoning_content === 'string') reasoning = (reasoning ?? '') + delta.reasoning_content;
      for (const call of delta.tool_calls ?? []) {
        const slot = (calls[call.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
        if (call.id) slot.id = call.id;
        if (call.type) slot.type = call.type;
        if (call.function?.name) slot.function.name += call.function.name;
        if (call.function?.arguments) slot.function.arguments += call.function.arguments;
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  if (!done || !head) throw new Error('stream ended without [DONE]');
  const message: Record<string, any> = { role: 'assistant', content: content === '' && calls.length > 0 ? null : content };
  if (reasoning !== null) message.reasoning_content = reasoning;
  if (calls.length > 0) message.tool_calls = calls;
  const out: Record<string, any> = {
    id: head.id,
    object: 'chat.completion',
    created: head.created,
    model: head.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
  };
  if (usage !== undefined) out.usage = usage;
  return out;
}

/** Dispatch on the dialect name. */
export function reassemble(dialect: 'anthropic-messages' | 'openai-chat', events: readonly SseEvent[]): Record<string, any> {
  return dialect === 'anthropic-messages' ? reassembleAnthropic(events) : reassembleOpenAIChat(events);
}
