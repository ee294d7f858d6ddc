/**
 * IR response → OpenAI `chat.completion` body: message {role, content, reasoning_content, tool_calls}, finish_reason,
 * usage with cached and reasoning token details. The stream encoder carries the same data, so a reassembled stream
 * equals this body.
 * Source: https://platform.openai.com/docs/api-reference/chat/object
 */
import type { CodecContext } from '../../core/dialect.ts';
import type { IRResponse } from '../../core/ir.ts';
import { textOf } from '../../core/ir.ts';
import { encodeFinishReason } from './finish-reason.ts';
import type { ChatToolCall } from './schema.ts';
import { encodeUsage, type ChatUsage } from './usage.ts';

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  /** Unix seconds. */
  created: number;
  model: string;
  choices: [
    {
      index: 0;
      message: { role: 'assistant'; content: string | null; reasoning_content?: string; tool_calls?: ChatToolCall[] };
      logprobs: null;
      finish_reason: string;
    },
  ];
  usage: ChatUsage;
}

/**
 * Encode the non-streaming reply. `content` is null when the reply has tool calls and no text (as OpenAI sends it),
 * otherwise the joined text (possibly "").
 */
export function encodeResponse(response: IRResponse, _ctx?: CodecContext): ChatCompletion {
  const text = textOf(response.content);
  const message: ChatCompletion['choices'][0]['message'] = {
    role: 'assistant',
    content: text === '' && response.toolCalls.length > 0 ? null : text,
  };
  if (response.reasoning && response.reasoning.text !== '') message.reasoning_content = response.reasoning.text;
  if (response.toolCalls.length > 0) {
    message.tool_calls = response.toolCalls.map((call) => ({
      id: call.id,
      type: 'function',
      function: { name: call.name, arguments: call.arguments },
    }));
  }
  return {
    id: response.id,
    object: 'chat.completion',
    created: Math.floor(response.createdAt / 1000),
    model: response.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: encodeFinishReason(response.finishReason, response.toolCalls.length > 0) }],
    usage: encodeUsage(response.usage),
  };
}
