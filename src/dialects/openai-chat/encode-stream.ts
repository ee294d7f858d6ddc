/**
 * IR stream events → OpenAI `chat.completion.chunk` SSE: a first chunk with `delta {role: "assistant", content: ""}`,
 * reasoning as `delta.reasoning_content`, text as `delta.content`, tool calls as `delta.tool_calls[{index, id, type,
 * function {name, arguments}}]` then argument fragments, a finish chunk, a usage chunk (`choices: []`) when the request
 * asked for `stream_options.include_usage`, then `data: [DONE]`. Keep-alives are SSE comment lines; an error after the
 * first byte is `data: {"error": {...}}` followed by `[DONE]`.
 * Source: https://platform.openai.com/docs/api-reference/chat-streaming
 */
import type { CodecContext } from '../../core/dialect.ts';
import type { IRStreamEvent, StreamEncoder } from '../../core/stream.ts';
import { SSE_COMMENT_KEEPALIVE, sseFrame } from '../../core/stream.ts';
import { encodeError } from './errors.ts';
import { encodeFinishReason } from './finish-reason.ts';
import { encodeUsage } from './usage.ts';

/**
 * A fresh encoder for one streamed reply; `push` returns the SSE text to write now (possibly empty).
 * The usage chunk is sent when `ctx.request.streamUsage` is true (the decoded request's `stream_options.include_usage`).
 */
export function createStreamEncoder(ctx: CodecContext): StreamEncoder {
  const includeUsage = ctx.request?.streamUsage === true;
  let head: { id: string; object: 'chat.completion.chunk'; created: number; model: string } | null = null;
  let done = false;
  let sawToolCall = false;

  function ensureHead(id?: string, model?: string, createdAt?: number): string {
    if (head) return '';
    head = {
      id: id ?? ctx.newId('chatcmpl'),
      object: 'chat.completion.chunk',
      created: Math.floor((createdAt ?? ctx.now()) / 1000),
      model: model ?? 'unknown',
    };
    return chunk({ role: 'assistant', content: '' });
  }

  // With include_usage, "all other chunks will also include a usage field, but with a null value"
  // (https://platform.openai.com/docs/api-reference/chat/create#chat-create-stream_options).
  const nullUsage = includeUsage ? { usage: null } : {};
  function chunk(delta: Record<string, unknown>, finishReason: string | null = null): string {
    return sseFrame({ ...head, choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }], ...nullUsage });
  }

  return {
    push(event: IRStreamEvent): string {
      if (done) return '';
      switch (event.type) {
        case 'start':
          return ensureHead(event.id, event.model, event.createdAt);
        case 'keep-alive':
          return SSE_COMMENT_KEEPALIVE;
        case 'reasoning-delta':
          return event.text === '' ? ensureHead() : ensureHead() + chunk({ reasoning_content: event.text });
        case 'text-delta':
          return event.text === '' ? ensureHead() : ensureHead() + chunk({ content: event.text });
        case 'reasoning-end':
        case 'text-end':
        case 'tool-call-end':
          return ensureHead();
        case 'tool-call-start':
          sawToolCall = true;
          return (
            ensureHead() +
            chunk({ tool_calls: [{ index: event.index, id: event.id, type: 'function', function: { name: event.name, arguments: '' } }] })
          );
        case 'tool-call-delta':
          if (event.argumentsDelta === '') return ensureHead();
          return ensureHead() + chunk({ tool_calls: [{ index: event.index, function: { arguments: event.argumentsDelta } }] });
        case 'finish': {
          let out = ensureHead() + chunk({}, encodeFinishReason(event.finishReason, sawToolCall || event.response.toolCalls.length > 0));
          if (includeUsage) out += sseFrame({ ...head, choices: [], usage: encodeUsage(event.usage) });
          done = true;
          return out;
        }
        case 'error':
          done = true;
          return sseFrame(encodeError(event.error).body);
      }
    },
    end(): string {
      return 'data: [DONE]\n\n';
    },
  };
}
