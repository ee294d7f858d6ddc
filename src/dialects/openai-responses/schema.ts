/**
 * Wire schemas of the OpenAI Responses API request (`POST /v1/responses`), lenient: every object is a `looseObject`, so
 * unknown fields pass and become `unknown-field` warnings (KNOWN_REQUEST_FIELDS / IGNORED_REQUEST_FIELDS), never errors.
 * Only the fields the codec reads are typed. Source: https://platform.openai.com/docs/api-reference/responses/create
 * and the recorded Codex 0.171 / pi requests in `__fixtures__/`.
 */
import { z } from 'zod';

const text = z.string();

/** Content parts of input messages (`input_*`) and of replayed assistant messages (`output_text`, `refusal`). */
export const ContentPartSchema = z.looseObject({
  type: z.string(),
  text: z.string().optional(),
  refusal: z.string().optional(),
  image_url: z.string().nullish(),
  file_id: z.string().nullish(),
  detail: z.string().nullish(),
});
export type ContentPart = z.infer<typeof ContentPartSchema>;

/** A message item; `type` is optional (the "easy input message" form pi sends: `{role, content}`). */
export const MessageItemSchema = z.looseObject({
  type: z.literal('message').optional(),
  id: z.string().nullish(),
  role: z.enum(['user', 'system', 'developer', 'assistant']),
  content: z.union([text, z.array(ContentPartSchema)]),
  status: z.string().nullish(),
});

export const FunctionCallItemSchema = z.looseObject({
  type: z.literal('function_call'),
  id: z.string().nullish(),
  call_id: z.string(),
  name: z.string(),
  /** The namespace of a call to a `namespace` tool's member function. */
  namespace: z.string().nullish(),
  arguments: z.string(),
  status: z.string().nullish(),
});

export const CustomToolCallItemSchema = z.looseObject({
  type: z.literal('custom_tool_call'),
  id: z.string().nullish(),
  call_id: z.string(),
  name: z.string(),
  namespace: z.string().nullish(),
  input: z.string(),
});

/** Tool output: a string, or content parts (input_text / input_image / input_file). */
export const ToolOutputSchema = z.union([text, z.array(ContentPartSchema)]);

export const FunctionCallOutputItemSchema = z.looseObject({
  type: z.enum(['function_call_output', 'custom_tool_call_output']),
  id: z.string().nullish(),
  call_id: z.string(),
  output: ToolOutputSchema,
  status: z.string().nullish(),
});

export const ReasoningItemSchema = z.looseObject({
  type: z.literal('reasoning'),
  id: z.string().nullish(),
  summary: z.array(z.looseObject({ type: z.string(), text: z.string() })).nullish(),
  content: z.array(z.looseObject({ type: z.string(), text: z.string() })).nullish(),
  encrypted_content: z.string().nullish(),
  status: z.string().nullish(),
});

/** Any input item; checked per `type` by the decoder so an error names the exact item. */
export const InputItemSchema = z.looseObject({ type: z.string().optional(), role: z.string().optional() });

export const FunctionToolSchema = z.looseObject({
  type: z.literal('function'),
  name: z.string().min(1),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
});

export const CustomToolSchema = z.looseObject({
  type: z.literal('custom'),
  name: z.string().min(1),
  description: z.string().nullish(),
  /** `{type: "text"}` or `{type: "grammar", syntax: "lark" | "regex", definition}`. */
  format: z.looseObject({ type: z.string(), syntax: z.string().optional(), definition: z.string().optional() }).nullish(),
});

export const NamespaceToolSchema = z.looseObject({
  type: z.literal('namespace'),
  name: z.string().min(1),
  description: z.string().nullish(),
  tools: z.array(z.union([FunctionToolSchema, CustomToolSchema])),
});

export const ToolSchema = z.looseObject({ type: z.string() });

export const ToolChoiceSchema = z.union([
  z.enum(['auto', 'none', 'required']),
  z.looseObject({ type: z.string(), name: z.string().optional() }),
]);

export const RequestSchema = z.looseObject({
  model: z.string().min(1),
  input: z.union([text, z.array(InputItemSchema)]),
  instructions: z.string().nullish(),
  tools: z.array(ToolSchema).nullish(),
  tool_choice: ToolChoiceSchema.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  temperature: z.number().nullish(),
  top_p: z.number().nullish(),
  max_output_tokens: z.number().int().positive().nullish(),
  reasoning: z.looseObject({ effort: z.string().nullish(), summary: z.string().nullish() }).nullish(),
  text: z.looseObject({ format: z.looseObject({ type: z.string(), name: z.string().optional(), schema: z.unknown().optional(), strict: z.boolean().nullish() }).nullish(), verbosity: z.string().nullish() }).nullish(),
  stream: z.boolean().nullish(),
  store: z.boolean().nullish(),
  previous_response_id: z.string().nullish(),
  conversation: z.unknown().optional(),
  user: z.string().nullish(),
  safety_identifier: z.string().nullish(),
});
export type ResponsesRequest = z.infer<typeof RequestSchema>;

/** Request fields the decoder reads. */
export const KNOWN_REQUEST_FIELDS: ReadonlySet<string> = new Set(Object.keys(RequestSchema.shape));

/**
 * Fields accepted and deliberately ignored without a warning: they change nothing about sampling (caching hints,
 * metadata, what to include in the reply; we always include `reasoning.encrypted_content`).
 */
export const IGNORED_REQUEST_FIELDS: ReadonlySet<string> = new Set([
  'include',
  'prompt_cache_key',
  'prompt_cache_retention',
  'client_metadata',
  'metadata',
  'service_tier',
  'truncation',
  'stream_options',
  'background',
]);
