/**
 * Zod 4 schemas of the OpenAI Chat Completions wire format (the parts Polar reads). Lenient where real clients send extras
 * (`store`, `metadata`, vendor fields): objects are loose, and `decodeRequest` reports unknown top-level fields as warnings.
 * Source: https://platform.openai.com/docs/api-reference/chat/create; shapes checked against fixtures/harness-traffic
 * (pi `openai-completions`, qwen-code).
 */
import { z } from 'zod';

export const TextPartSchema = z.looseObject({ type: z.literal('text'), text: z.string() });
export const ImagePartSchema = z.looseObject({
  type: z.literal('image_url'),
  image_url: z.union([z.looseObject({ url: z.string(), detail: z.string().optional() }), z.string()]),
});
/** Any content part before its type-specific validation. */
export const AnyPartSchema = z.looseObject({ type: z.string() });

const Content = z.union([z.string(), z.array(AnyPartSchema)]).nullable().optional();

export const ToolCallSchema = z.looseObject({
  id: z.string(),
  type: z.string().optional(),
  function: z.looseObject({ name: z.string(), arguments: z.string().nullable().optional() }),
});

export const MessageSchema = z.discriminatedUnion('role', [
  z.looseObject({ role: z.literal('system'), content: Content, name: z.string().optional() }),
  z.looseObject({ role: z.literal('developer'), content: Content, name: z.string().optional() }),
  z.looseObject({ role: z.literal('user'), content: Content, name: z.string().optional() }),
  z.looseObject({
    role: z.literal('assistant'),
    content: Content,
    tool_calls: z.array(ToolCallSchema).nullable().optional(),
    /** vLLM < 0.11, DeepSeek, qwen-code. */
    reasoning_content: z.string().nullable().optional(),
    /** vLLM ≥ 0.11, OpenRouter. */
    reasoning: z.string().nullable().optional(),
    refusal: z.string().nullable().optional(),
  }),
  z.looseObject({ role: z.literal('tool'), content: Content, tool_call_id: z.string() }),
]);

export const ToolSchema = z.looseObject({
  type: z.string(),
  function: z
    .looseObject({
      name: z.string().min(1),
      description: z.string().optional(),
      parameters: z.record(z.string(), z.unknown()).optional(),
      strict: z.boolean().nullable().optional(),
    })
    .optional(),
});

export const ToolChoiceSchema = z.union([
  z.enum(['auto', 'none', 'required']),
  z.looseObject({ type: z.literal('function'), function: z.looseObject({ name: z.string().min(1) }) }),
  z.looseObject({ type: z.string() }),
]);

export const ChatRequestSchema = z.looseObject({
  model: z.string(),
  messages: z.array(MessageSchema),
  tools: z.array(ToolSchema).nullable().optional(),
  tool_choice: ToolChoiceSchema.nullable().optional(),
  parallel_tool_calls: z.boolean().nullable().optional(),
  max_completion_tokens: z.number().int().positive().nullable().optional(),
  max_tokens: z.number().int().positive().nullable().optional(),
  temperature: z.number().nullable().optional(),
  top_p: z.number().nullable().optional(),
  /** vLLM / SGLang extension. */
  top_k: z.number().int().nullable().optional(),
  /** vLLM / SGLang extension. */
  min_p: z.number().nullable().optional(),
  seed: z.number().int().nullable().optional(),
  presence_penalty: z.number().nullable().optional(),
  frequency_penalty: z.number().nullable().optional(),
  stop: z.union([z.string(), z.array(z.string())]).nullable().optional(),
  n: z.number().int().positive().nullable().optional(),
  stream: z.boolean().nullable().optional(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullable().optional() }).nullable().optional(),
  user: z.string().nullable().optional(),
  store: z.boolean().nullable().optional(),
  metadata: z.unknown().optional(),
  reasoning_effort: z.string().nullable().optional(),
  /** vLLM / SGLang extension: `{enable_thinking}` is the Qwen3 template switch. */
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullable().optional(),
  response_format: z.unknown().optional(),
  logprobs: z.boolean().nullable().optional(),
  top_logprobs: z.number().int().nullable().optional(),
});
export type ChatRequest = z.output<typeof ChatRequestSchema>;
export type ChatMessage = z.output<typeof MessageSchema>;

/** Top-level request fields decodeRequest understands; anything else becomes an `unknown-field` warning. */
export const KNOWN_REQUEST_FIELDS: ReadonlySet<string> = new Set(Object.keys(ChatRequestSchema.shape));

export const ChatResponseSchema = z.looseObject({
  id: z.string(),
  model: z.string(),
  created: z.number().optional(),
  choices: z
    .array(
      z.looseObject({
        index: z.number().optional(),
        message: z.looseObject({
          role: z.string().optional(),
          content: z.string().nullable().optional(),
          reasoning_content: z.string().nullable().optional(),
          reasoning: z.string().nullable().optional(),
          tool_calls: z.array(ToolCallSchema).nullable().optional(),
        }),
        finish_reason: z.string().nullable().optional(),
      }),
    )
    .min(1),
  usage: z
    .looseObject({
      prompt_tokens: z.number().optional(),
      completion_tokens: z.number().optional(),
      total_tokens: z.number().optional(),
      prompt_tokens_details: z.looseObject({ cached_tokens: z.number().nullable().optional() }).nullable().optional(),
      completion_tokens_details: z.looseObject({ reasoning_tokens: z.number().nullable().optional() }).nullable().optional(),
    })
    .nullable()
    .optional(),
});

/** Wire tool call as the encoders produce it; `arguments` is the model's raw text. */
export interface ChatToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}
