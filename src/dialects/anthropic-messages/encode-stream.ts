/**
 * IR stream events → Anthropic Messages SSE. The sequence is exactly the one Claude Code and the SDK accept
 * (docs/protocol-notes.md#anthropic-messages): `message_start` → per block `content_block_start` / `content_block_delta`* / `content_block_stop`
 * → `message_delta` (stop_reason, full usage incl. the real input_tokens) → `message_stop`, nothing after it; `ping`
 * for keep-alives; `error` for a failure after the first byte.
 *
 * Guarantees: one start and one stop per block index; a thinking block always ends with a non-empty `signature_delta`
 * (minted from its text when the engine gave none); each tool call is one block whose whole `input_json_delta` precedes
 * its stop. Tool arguments are held until the call ends, because the input must be a JSON object: text that is not one
 * is sent as `{"_raw": text}`, exactly like the non-streaming reply. Holding also keeps interleaved parallel calls in
 * separate, sequential blocks.
 * Source: https://docs.anthropic.com/en/docs/build-with-claude/streaming
 */
import type { CodecContext } from '../../core/dialect.ts';
import type { IRStreamEvent, StreamEncoder } from '../../core/stream.ts';
import { sseFrame } from '../../core/stream.ts';
import { mintReasoningSignature } from '../shared/signature.ts';
import { toolInputFromArguments } from '../shared/tool-input.ts';
import { encodeError } from './errors.ts';
import { encodeStopReason, encodeStopSequence } from './finish-reason.ts';
import { encodeUsage } from './usage.ts';
import { createToolCallBuffer, type BufferedToolCall } from '../shared/tool-call-buffer.ts';

/** A fresh encoder for one streamed reply; `push` returns the SSE text to write now (possibly empty). */
export function createStreamEncoder(ctx: CodecContext): StreamEncoder {
  let started = false;
  let done = false;
  let nextIndex = 0;
  let open: { kind: 'thinking' | 'text'; index: number } | null = null;
  let thinkingText = '';
  let toolUseSent = false;
  const pendingTools = createToolCallBuffer();

  const frame = (type: string, data: Record<string, unknown>) => sseFrame({ type, ...data }, type);

  function start(id: string, model: string, inputTokens: number): string {
    started = true;
    return frame('message_start', {
      message: {
        id,
        type: 'message',
        role: 'assistant',
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: inputTokens, output_tokens: 0, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
      },
    });
  }

  /** Events that arrive before `start` (a misbehaving caller) still produce a valid stream. */
  function ensureStarted(): string {
    return started ? '' : start(ctx.newId('msg'), 'unknown', 0);
  }

  function closeOpen(signature?: string): string {
    if (!open) return '';
    let out = '';
    if (open.kind === 'thinking') {
      const sig = signature || mintReasoningSignature(thinkingText);
      out += frame('content_block_delta', { index: open.index, delta: { type: 'signature_delta', signature: sig } });
      thinkingText = '';
    }
    out += frame('content_block_stop', { index: open.index });
    open = null;
    return out;
  }

  function openBlock(kind: 'thinking' | 'text'): string {
    if (open?.kind === kind) return '';
    let out = closeOpen();
    open = { kind, index: nextIndex++ };
    const block = kind === 'thinking' ? { type: 'thinking', thinking: '', signature: '' } : { type: 'text', text: '' };
    out += frame('content_block_start', { index: open.index, content_block: block });
    return out;
  }

  function emitToolCall(call: BufferedToolCall): string {
    const index = nextIndex++;
    toolUseSent = true;
    const input = JSON.stringify(toolInputFromArguments(call.args));
    return (
      frame('content_block_start', { index, content_block: { type: 'tool_use', id: call.id, name: call.name, input: {} } }) +
      frame('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: input } }) +
      frame('content_block_stop', { index })
    );
  }

  function flushTools(): string {
    return pendingTools.drain().map(emitToolCall).join('');
  }

  return {
    push(event: IRStreamEvent): string {
      if (done) return '';
      switch (event.type) {
        case 'start':
          return started ? '' : start(event.id, event.model, event.inputTokens);
        case 'keep-alive':
          return sseFrame({ type: 'ping' }, 'ping');
        case 'reasoning-delta': {
          if (event.text === '') return ensureStarted();
          const out = ensureStarted() + openBlock('thinking');
          thinkingText += event.text;
          return out + frame('content_block_delta', { index: open!.index, delta: { type: 'thinking_delta', thinking: event.text } });
        }
        case 'reasoning-end':
          return ensureStarted() + openBlock('thinking') + closeOpen(event.signature);
        case 'text-delta':
          if (event.text === '') return ensureStarted();
          return (
            ensureStarted() +
            openBlock('text') +
            frame('content_block_delta', { index: open!.index, delta: { type: 'text_delta', text: event.text } })
          );
        case 'text-end':
          return open?.kind === 'text' ? closeOpen() : '';
        case 'tool-call-start':
          pendingTools.start(event.index, event.id, event.name);
          return ensureStarted();
        case 'tool-call-delta':
          pendingTools.append(event.index, event.argumentsDelta);
          return '';
        case 'tool-call-end': {
          const call = pendingTools.take(event.index);
          if (!call) return '';
          return ensureStarted() + closeOpen() + emitToolCall(call);
        }
        case 'finish': {
          let out = ensureStarted() + closeOpen() + flushTools();
          out += frame('message_delta', {
            delta: { stop_reason: encodeStopReason(event.finishReason, toolUseSent), stop_sequence: encodeStopSequence(event.finishReason, toolUseSent) },
            usage: encodeUsage(event.usage),
          });
          out += frame('message_stop', {});
          done = true;
          return out;
        }
        case 'error':
          done = true;
          return sseFrame(encodeError(event.error).body, 'error');
      }
    },
    end(): string {
      return '';
    },
  };
}
