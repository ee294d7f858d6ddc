/**
 * IR stream events → the Responses API SSE sequence (docs/protocol-notes.md#openai-responses):
 * `response.created`, `response.in_progress`, then per output item `response.output_item.added` → content events →
 * `response.output_item.done`, and last `response.completed` (or `response.incomplete` on truncation, `response.failed`
 * on an error after the first byte). Every event carries `sequence_number` (0, 1, 2, … per response); keep-alives are
 * SSE comments. Content events per item type:
 * - reasoning: `content_part.added` (reasoning_text) / `reasoning_text.delta`* / `reasoning_text.done` / `content_part.done`;
 * - message: `content_part.added` (output_text) / `output_text.delta`* / `output_text.done` / `content_part.done`;
 * - function_call: `function_call_arguments.delta`* / `function_call_arguments.done`;
 * - custom_tool_call: `custom_tool_call_input.delta` / `custom_tool_call_input.done` (the input is only known once the
 *   `{"input": …}` arguments are complete, so it comes as one delta).
 * An item's `output_item.done` waits until the next item is added or the response ends, so that the one a length
 * limit cut short says `incomplete` there, as in the final object (items close before the finish reason is known).
 * Output items never interleave, as OpenAI's API sends them (a recorded gpt-4o stream with two parallel function calls:
 * item 0's `output_item.added` … `output_item.done`, then item 1's): the IR may start a second tool call while the first
 * one's arguments are still arriving (engines/delta-emitter.ts ends every call only at `finish`), so only the earliest
 * unfinished call streams; a later one is held (its arguments buffered) and goes out, with its `output_index`, once every
 * call before it is done.
 * `ResponseAssembler` is the state machine; `encodeResponse` runs the same machine, so the non-streaming body equals the
 * stream's final `response` object (same item ids, same order).
 * Source: https://platform.openai.com/docs/api-reference/responses-streaming; the recorded stream:
 * https://github.com/prism-php/prism/blob/main/tests/Fixtures/openai/stream-multi-tool-conversation-responses-1.json
 */
import type { CodecContext } from '../../core/dialect.ts';
import { GatewayError } from '../../core/errors.ts';
import type { FinishReason, IRRequest, IRUsage } from '../../core/ir.ts';
import { SSE_COMMENT_KEEPALIVE, sseFrame, type IRStreamEvent, type StreamEncoder } from '../../core/stream.ts';
import { encodeResponseError } from './errors.ts';
import { encodeFinishReason } from './finish-reason.ts';
import { encodeReasoningPayload } from './reasoning-payload.ts';
import { isRecord } from '../shared/validate.ts';
import { customInputFromArguments, echoToolChoice, echoTools, encodeToolChoice, encodeTools, resolveCallTarget, type CallTarget } from './tools.ts';
import { encodeUsage, type ResponsesUsage } from './usage.ts';

/** One wire event before SSE framing (`sequence_number` is added by the assembler). */
export interface WireEvent {
  type: string;
  [key: string]: unknown;
}

export type OutputItem = Record<string, unknown> & { id: string; type: string };

export interface ResponseBody {
  id: string;
  object: 'response';
  created_at: number;
  status: 'in_progress' | 'completed' | 'incomplete' | 'failed';
  error: { code: string; message: string } | null;
  incomplete_details: { reason: string } | null;
  model: string;
  output: OutputItem[];
  usage: ResponsesUsage | null;
  [key: string]: unknown;
}

const ZERO_USAGE: IRUsage = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 };

/** `resp_…` as the Responses API spells response ids (engine ids like `chatcmpl-…` get the prefix). */
export function responseId(id: string): string {
  return id.startsWith('resp_') ? id : `resp_${id}`;
}

/**
 * The response object around `output` (https://platform.openai.com/docs/api-reference/responses/object). It echoes
 * the request's settings as the API does:
 * - as the client sent them (`requestBody`, when the proxy passes it): `instructions`, `tools` (those the model was
 *   shown: `echoTools`), `tool_choice` (`echoToolChoice`), `text.format`, `metadata`, `user`, `safety_identifier`,
 *   `prompt_cache_key`;
 * - as sampled (`request`, the decoded IR, which task sampling may have set): `temperature`, `top_p`,
 *   `max_output_tokens`, `parallel_tool_calls`, `reasoning.effort`;
 * - what this proxy does whatever was asked: `store: false` (nothing is stored), `truncation: "disabled"` (an overlong
 *   prompt is an error), `background: false`, `reasoning.summary: null` (no summaries are made), and no
 *   `text.verbosity` (ignored with a warning).
 * Without `requestBody` the echo comes from the IR alone (tools re-encoded from their model-side form).
 */
export function responseEnvelope(fields: {
  id: string;
  createdAt: number;
  model: string;
  status: ResponseBody['status'];
  error: ResponseBody['error'];
  incompleteDetails: ResponseBody['incomplete_details'];
  output: OutputItem[];
  usage: ResponsesUsage | null;
  request: IRRequest | undefined;
  requestBody: unknown;
}): ResponseBody {
  const request = fields.request;
  const sent = isRecord(fields.requestBody) ? fields.requestBody : undefined;
  const string = (value: unknown): string | null => (typeof value === 'string' ? value : null);
  const format = isRecord(sent?.text) && isRecord(sent.text.format) ? sent.text.format : { type: 'text' };
  return {
    id: fields.id,
    object: 'response',
    created_at: Math.floor(fields.createdAt / 1000),
    status: fields.status,
    background: false,
    error: fields.error,
    incomplete_details: fields.incompleteDetails,
    instructions: string(sent?.instructions),
    max_output_tokens: request?.sampling.maxTokens ?? null,
    model: fields.model,
    output: fields.output,
    parallel_tool_calls: request?.parallelToolCalls ?? true,
    previous_response_id: null,
    prompt_cache_key: string(sent?.prompt_cache_key),
    reasoning: { effort: request?.reasoning?.effort ?? null, summary: null },
    safety_identifier: string(sent?.safety_identifier),
    store: false,
    temperature: request?.sampling.temperature ?? null,
    text: { format },
    tool_choice: sent ? echoToolChoice(sent.tool_choice, request?.toolChoice) : (encodeToolChoice(request?.toolChoice) ?? 'auto'),
    tools: sent ? echoTools(sent.tools) : encodeTools(request?.tools ?? []),
    top_p: request?.sampling.topP ?? null,
    truncation: 'disabled',
    usage: fields.usage,
    user: sent ? string(sent.user) : (request?.user ?? null),
    metadata: isRecord(sent?.metadata) ? sent.metadata : {},
  };
}

interface OpenReasoning { item: OutputItem; index: number; text: string; partOpen: boolean }
interface OpenMessage { item: OutputItem; index: number; text: string }
interface OpenCall { item: OutputItem; index: number; args: string; target: CallTarget }
/**
 * A tool call the IR started: `open` once its `output_item.added` went out (the earliest unfinished call's); until
 * then its arguments are `held`.
 */
interface StartedCall { id: string; name: string; held: string; ended: boolean; open: OpenCall | null }

/** The Responses stream state machine: IR events in, wire events out; `final` holds the finished response object. */
export class ResponseAssembler {
  private sequence = 0;
  private started = false;
  private id = '';
  private createdAt = 0;
  private model = '';
  private readonly output: OutputItem[] = [];
  private reasoning: OpenReasoning | null = null;
  private message: OpenMessage | null = null;
  /** Started, not yet done tool calls by IR index, in start order (= output order). */
  private readonly calls = new Map<number, StartedCall>();
  /** The last closed item, whose `output_item.done` is not sent yet (`hold`). */
  private heldDone: { item: OutputItem; index: number } | null = null;
  /** The finished response object (after `finish` or `error`). */
  final: ResponseBody | null = null;

  constructor(private readonly ctx: CodecContext) {}

  /** Wire events for one IR event (empty after the response finished, and for keep-alives). */
  push(event: IRStreamEvent): WireEvent[] {
    if (this.final) return [];
    const out: WireEvent[] = [];
    if (event.type === 'keep-alive') return out;
    if (event.type === 'start') {
      this.start(event.id, event.model, event.createdAt, out);
      return out;
    }
    if (!this.started) {
      // Defensive: a producer that skipped `start` still yields a well-formed stream.
      const response = event.type === 'finish' ? event.response : undefined;
      this.start(response?.id ?? this.ctx.newId('resp'), response?.model ?? this.ctx.request?.model ?? '', response?.createdAt ?? this.ctx.now(), out);
    }
    switch (event.type) {
      case 'reasoning-delta': {
        const reasoning = this.openReasoning(out);
        if (!reasoning.partOpen) {
          reasoning.partOpen = true;
          out.push(this.itemEvent('response.content_part.added', reasoning, { content_index: 0, part: { type: 'reasoning_text', text: '' } }));
        }
        reasoning.text += event.text;
        out.push(this.itemEvent('response.reasoning_text.delta', reasoning, { content_index: 0, delta: event.text }));
        break;
      }
      case 'reasoning-end':
        this.closeReasoning(out, event.signature);
        break;
      case 'text-delta': {
        const message = this.openMessage(out);
        message.text += event.text;
        out.push(this.itemEvent('response.output_text.delta', message, { content_index: 0, delta: event.text, logprobs: [] }));
        break;
      }
      case 'text-end':
        this.closeMessage(out);
        break;
      case 'tool-call-start':
        this.closeReasoning(out);
        this.closeMessage(out);
        if (!this.calls.has(event.index)) this.calls.set(event.index, { id: event.id, name: event.name, held: '', ended: false, open: null });
        this.advanceCalls(out);
        break;
      case 'tool-call-delta': {
        const call = this.calls.get(event.index);
        if (!call) break;
        if (call.open) this.callDelta(call.open, event.argumentsDelta, out);
        else call.held += event.argumentsDelta;
        break;
      }
      case 'tool-call-end': {
        const call = this.calls.get(event.index);
        if (!call) break;
        call.ended = true;
        this.advanceCalls(out);
        break;
      }
      case 'finish':
        this.finish(event.finishReason, event.usage, out);
        break;
      case 'error':
        this.fail(event.error, out);
        break;
    }
    return out;
  }

  private start(id: string, model: string, createdAt: number, out: WireEvent[]): void {
    this.started = true;
    this.id = responseId(id);
    this.model = model;
    this.createdAt = createdAt;
    const response = this.envelope('in_progress', null, null, null);
    out.push(this.event('response.created', { response }));
    out.push(this.event('response.in_progress', { response }));
  }

  private envelope(status: ResponseBody['status'], error: ResponseBody['error'], incomplete: ResponseBody['incomplete_details'], usage: ResponsesUsage | null): ResponseBody {
    return responseEnvelope({
      id: this.id,
      createdAt: this.createdAt,
      model: this.model,
      status,
      error,
      incompleteDetails: incomplete,
      output: this.output.map((item) => ({ ...item })),
      usage,
      request: this.ctx.request,
      requestBody: this.ctx.requestBody,
    });
  }

  private event(type: string, fields: Record<string, unknown>): WireEvent {
    return { type, ...fields, sequence_number: this.sequence++ };
  }

  private itemEvent(type: string, open: { item: OutputItem; index: number }, fields: Record<string, unknown>): WireEvent {
    return this.event(type, { item_id: open.item.id, output_index: open.index, ...fields });
  }

  /** `output_item.added` for a new item; the previous item's held `output_item.done` goes out first. */
  private added(index: number, item: OutputItem, out: WireEvent[]): WireEvent {
    this.releaseDone(out);
    return this.event('response.output_item.added', { output_index: index, item: { ...item } });
  }

  /**
   * A closed item's `output_item.done` waits for the next item or the end: only then is it known whether the item
   * was the one a length limit cut short (status `incomplete`, as in the final response object).
   */
  private hold(closed: { item: OutputItem; index: number }, out: WireEvent[]): void {
    this.releaseDone(out);
    this.heldDone = closed;
  }

  private releaseDone(out: WireEvent[]): void {
    const held = this.heldDone;
    if (!held) return;
    this.heldDone = null;
    out.push(this.event('response.output_item.done', { output_index: held.index, item: { ...held.item } }));
  }

  private openReasoning(out: WireEvent[]): OpenReasoning {
    if (this.reasoning) return this.reasoning;
    this.closeMessage(out);
    const item: OutputItem = { id: this.ctx.newId('rs'), type: 'reasoning', summary: [] };
    this.reasoning = { item, index: this.output.length, text: '', partOpen: false };
    this.output.push(item);
    out.push(this.added(this.reasoning.index, item, out));
    return this.reasoning;
  }

  private closeReasoning(out: WireEvent[], signature?: string): void {
    // A signature-only reasoning (no text) still becomes an item, so it can be replayed.
    if (!this.reasoning && signature === undefined) return;
    const reasoning = this.openReasoning(out);
    if (reasoning.partOpen) {
      const text = reasoning.text;
      out.push(this.itemEvent('response.reasoning_text.done', reasoning, { content_index: 0, text }));
      out.push(this.itemEvent('response.content_part.done', reasoning, { content_index: 0, part: { type: 'reasoning_text', text } }));
      reasoning.item.content = [{ type: 'reasoning_text', text }];
    }
    reasoning.item.encrypted_content = encodeReasoningPayload({ text: reasoning.text, ...(signature ? { signature } : {}) });
    this.hold(reasoning, out);
    this.reasoning = null;
  }

  private openMessage(out: WireEvent[]): OpenMessage {
    if (this.message) return this.message;
    this.closeReasoning(out);
    const item: OutputItem = { id: this.ctx.newId('msg'), type: 'message', role: 'assistant', status: 'in_progress', content: [] };
    this.message = { item, index: this.output.length, text: '' };
    this.output.push(item);
    out.push(this.added(this.message.index, { ...item, content: [] }, out));
    out.push(this.itemEvent('response.content_part.added', this.message, { content_index: 0, part: outputText('') }));
    return this.message;
  }

  private closeMessage(out: WireEvent[]): void {
    const message = this.message;
    if (!message) return;
    const part = outputText(message.text);
    out.push(this.itemEvent('response.output_text.done', message, { content_index: 0, text: message.text, logprobs: [] }));
    out.push(this.itemEvent('response.content_part.done', message, { content_index: 0, part }));
    message.item.status = 'completed';
    message.item.content = [part];
    this.hold(message, out);
    this.message = null;
  }

  /**
   * Stream the earliest unfinished call: open it (with the arguments buffered while it waited), and while it has
   * ended, close it and go on to the next one.
   */
  private advanceCalls(out: WireEvent[]): void {
    for (const [index, call] of this.calls) {
      call.open ??= this.openCall(call, out);
      if (!call.ended) return;
      this.closeCall(call.open, out);
      this.calls.delete(index);
    }
  }

  private openCall(call: StartedCall, out: WireEvent[]): OpenCall {
    const target = resolveCallTarget(call.name, this.ctx.request?.tools);
    const ns = target.namespace ? { namespace: target.namespace } : {};
    const item: OutputItem =
      target.kind === 'custom'
        ? { id: this.ctx.newId('ctc'), type: 'custom_tool_call', call_id: call.id, name: target.name, ...ns, input: '' }
        : { id: this.ctx.newId('fc'), type: 'function_call', call_id: call.id, name: target.name, ...ns, arguments: '', status: 'in_progress' };
    const open: OpenCall = { item, index: this.output.length, args: '', target };
    this.output.push(item);
    out.push(this.added(open.index, item, out));
    this.callDelta(open, call.held, out);
    return open;
  }

  /** Arguments of an open call; a custom tool's input is only known whole, so it goes out at its close. */
  private callDelta(call: OpenCall, delta: string, out: WireEvent[]): void {
    if (delta === '') return;
    call.args += delta;
    if (call.target.kind === 'function') out.push(this.itemEvent('response.function_call_arguments.delta', call, { delta }));
  }

  private closeCall(call: OpenCall, out: WireEvent[]): void {
    if (call.target.kind === 'custom') {
      const input = customInputFromArguments(call.args);
      if (input) out.push(this.itemEvent('response.custom_tool_call_input.delta', call, { delta: input }));
      out.push(this.itemEvent('response.custom_tool_call_input.done', call, { input }));
      call.item.input = input;
    } else {
      out.push(this.itemEvent('response.function_call_arguments.done', call, { name: call.target.name, arguments: call.args }));
      call.item.arguments = call.args;
      call.item.status = 'completed';
    }
    this.hold(call, out);
  }

  /**
   * Close every open item in output order, so the last one closed (whose `output_item.done` is held for `finish`) is
   * the last of `output`, the one a length limit marks incomplete. A tool call can be open before a reasoning or
   * message item that started after it (the IR ends calls only at finish); at most one call is open at a time.
   */
  private closeAll(out: WireEvent[]): void {
    for (const call of this.calls.values()) call.ended = true;
    const [earliest] = this.calls;
    const text = this.reasoning ?? this.message;
    if (earliest?.[1].open && text && earliest[1].open.index < text.index) {
      this.closeCall(earliest[1].open, out);
      this.calls.delete(earliest[0]);
    }
    this.closeReasoning(out);
    this.closeMessage(out);
    this.advanceCalls(out);
  }

  private finish(reason: FinishReason, usage: IRUsage, out: WireEvent[]): void {
    this.closeAll(out);
    const { status, incomplete_details } = encodeFinishReason(reason);
    if (status === 'incomplete') {
      // The item the limit cut short is incomplete, as the API reports it; its `output_item.done` is still held.
      const last = this.output.at(-1);
      if (last && 'status' in last) last.status = 'incomplete';
    }
    this.releaseDone(out);
    const error = status === 'failed' ? { code: 'server_error', message: `generation failed (${reason.raw ?? 'error'})` } : null;
    this.final = this.envelope(status, error, incomplete_details, encodeUsage(usage));
    const type = status === 'completed' ? 'response.completed' : status === 'incomplete' ? 'response.incomplete' : 'response.failed';
    out.push(this.event(type, { response: this.final }));
  }

  private fail(error: GatewayError, out: WireEvent[]): void {
    this.closeAll(out);
    this.releaseDone(out);
    this.final = this.envelope('failed', encodeResponseError(error), null, encodeUsage(ZERO_USAGE));
    out.push(this.event('response.failed', { response: this.final }));
  }
}

function outputText(text: string): Record<string, unknown> {
  return { type: 'output_text', text, annotations: [], logprobs: [] };
}

/** A fresh SSE encoder for one streamed Responses reply (`event: <type>` + `data: <json>` frames). */
export function createStreamEncoder(ctx: CodecContext): StreamEncoder {
  const assembler = new ResponseAssembler(ctx);
  return {
    push(event: IRStreamEvent): string {
      if (event.type === 'keep-alive') return SSE_COMMENT_KEEPALIVE;
      let frames = '';
      for (const wire of assembler.push(event)) frames += sseFrame(wire, wire.type);
      return frames;
    },
    end(): string {
      return '';
    },
  };
}
