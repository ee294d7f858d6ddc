/**
 * Zod 4 schemas of the Anthropic Messages wire format (the parts Polar reads). Lenient where real clients send extras:
 * objects are loose (unknown keys pass through; `decodeRequest` reports unknown top-level fields as warnings), and content
 * blocks are first read as `{type}` so a known block type Polar cannot forward is a warning, not a 400 (a type the
 * API does not have is a 400 naming it: decode-request.ts).
 * Source: https://docs.anthropic.com/en/api/messages; shapes checked against fixtures/harness-traffic (Claude Code, pi).
 */
import { z } from 'zod';

const cacheControl = z.unknown().optional();

export const TextBlockSchema = z.looseObject({ type: z.literal('text'), text: z.string(), cache_control: cacheControl });

export const ImageSourceSchema = z.union([
  z.looseObject({ type: z.literal('base64'), media_type: z.string(), data: z.string() }),
  z.looseObject({ type: z.literal('url'), url: z.string() }),
]);
export const ImageBlockSchema = z.looseObject({ type: z.literal('image'), source: ImageSourceSchema, cache_control: cacheControl });

export const ToolUseBlockSchema = z.looseObject({
  type: z.literal('tool_use'),
  id: z.string(),
  name: z.string(),
  input: z.unknown(),
  cache_control: cacheControl,
});

export const ToolResultBlockSchema = z.looseObject({
  type: z.literal('tool_result'),
  tool_use_id: z.string(),
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string() }))]).optional(),
  is_error: z.boolean().optional(),
  cache_control: cacheControl,
});

export const ThinkingBlockSchema = z.looseObject({
  type: z.literal('thinking'),
  thinking: z.string(),
  signature: z.string().optional(),
});
export const RedactedThinkingBlockSchema = z.looseObject({ type: z.literal('redacted_thinking'), data: z.string() });

/** Any content block before its type-specific validation. */
export const AnyBlockSchema = z.looseObject({ type: z.string() });

/**
 * One `messages[]` entry. `system` is a mid-conversation system message (Claude Opus 4.8 and later; Claude Code sends
 * one after the first user turn when it takes the model for one of those, e.g. for any model name it doesn't know):
 * its content is a string or text blocks.
 * Source: https://platform.claude.com/docs/en/build-with-claude/mid-conversation-system-messages
 */
export const MessageSchema = z.looseObject({
  role: z.enum(['user', 'assistant', 'system']),
  content: z.union([z.string(), z.array(AnyBlockSchema)]),
});

export const ToolSchema = z.looseObject({
  /** Absent or `custom` for client tools; versioned names (`web_search_20250305`, `bash_20250124`) are server/built-in tools. */
  type: z.string().optional(),
  name: z.string().min(1),
  description: z.string().optional(),
  input_schema: z.record(z.string(), z.unknown()).optional(),
  cache_control: cacheControl,
  eager_input_streaming: z.boolean().optional(),
});

export const ToolChoiceSchema = z.looseObject({
  type: z.enum(['auto', 'any', 'tool', 'none']),
  name: z.string().optional(),
  disable_parallel_tool_use: z.boolean().optional(),
});

export const ThinkingSchema = z.looseObject({
  type: z.enum(['enabled', 'adaptive', 'disabled']),
  /** Accepted even when larger than max_tokens (qwen-code sends 32000 with max_tokens 8000). */
  budget_tokens: z.number().int().nonnegative().optional(),
});

export const MessagesRequestSchema = z.looseObject({
  model: z.string(),
  messages: z.array(MessageSchema),
  system: z.union([z.string(), z.array(AnyBlockSchema)]).optional(),
  max_tokens: z.number().int().positive().optional(),
  metadata: z.looseObject({ user_id: z.string().nullable().optional() }).optional(),
  stop_sequences: z.array(z.string()).optional(),
  stream: z.boolean().optional(),
  temperature: z.number().optional(),
  top_p: z.number().optional(),
  top_k: z.number().int().optional(),
  tools: z.array(ToolSchema).optional(),
  tool_choice: ToolChoiceSchema.optional(),
  thinking: ThinkingSchema.optional(),
  context_management: z.unknown().optional(),
  output_config: z.unknown().optional(),
});
export type MessagesRequest = z.output<typeof MessagesRequestSchema>;

/** Top-level request fields decodeRequest understands; anything else becomes an `unknown-field` warning. */
export const KNOWN_REQUEST_FIELDS: ReadonlySet<string> = new Set(Object.keys(MessagesRequestSchema.shape));

const UsageSchema = z.looseObject({
  input_tokens: z.number().nullable().optional(),
  output_tokens: z.number().nullable().optional(),
  cache_read_input_tokens: z.number().nullable().optional(),
  cache_creation_input_tokens: z.number().nullable().optional(),
});

export const MessageResponseSchema = z.looseObject({
  id: z.string(),
  type: z.literal('message').optional(),
  role: z.literal('assistant').optional(),
  model: z.string(),
  content: z.array(AnyBlockSchema),
  stop_reason: z.string().nullable().optional(),
  stop_sequence: z.string().nullable().optional(),
  usage: UsageSchema.optional(),
});

/** Wire content blocks as encodeResponse / encodeRequest produce them. */
export type AnthropicContentBlock =
  | { type: 'text'; text: string }
  | { type: 'image'; source: { type: 'base64'; media_type: string; data: string } | { type: 'url'; url: string } }
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'redacted_thinking'; data: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> }
  | { type: 'tool_result'; tool_use_id: string; content: string | AnthropicContentBlock[]; is_error?: boolean };
