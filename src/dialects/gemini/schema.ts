/**
 * Wire schemas of the Gemini `generateContent` request (`POST /v1beta/models/{model}:generateContent` and
 * `:streamGenerateContent?alt=sse`), lenient: objects are `looseObject`s and unknown fields become `unknown-field`
 * warnings. Only fields the codec reads are typed.
 * Source: https://ai.google.dev/api/generate-content#request-body, https://ai.google.dev/api/caching#Content, and the
 * recorded gemini-cli 0.61 / pi requests in `__fixtures__/`.
 */
import { z } from 'zod';

export const PartSchema = z.looseObject({
  text: z.string().optional(),
  /** True on a thought summary / reasoning part. */
  thought: z.boolean().nullish(),
  /** Opaque; accepted and ignored (gemini-cli replays a dummy `skip_thought_signature_validator`). */
  thoughtSignature: z.string().nullish(),
  inlineData: z.looseObject({ mimeType: z.string(), data: z.string() }).nullish(),
  fileData: z.looseObject({ mimeType: z.string().nullish(), fileUri: z.string() }).nullish(),
  functionCall: z
    .looseObject({ id: z.string().nullish(), name: z.string().min(1), args: z.record(z.string(), z.unknown()).nullish() })
    .nullish(),
  functionResponse: z
    .looseObject({
      id: z.string().nullish(),
      name: z.string().nullish(),
      response: z.record(z.string(), z.unknown()).nullish(),
      parts: z.array(z.looseObject({ inlineData: z.looseObject({ mimeType: z.string(), data: z.string() }).nullish() })).nullish(),
    })
    .nullish(),
});
export type GeminiPart = z.infer<typeof PartSchema>;

export const ContentSchema = z.looseObject({
  /** `user` or `model`; absent means user. `function` is an old spelling of a user turn carrying functionResponses. */
  role: z.enum(['user', 'model', 'function']).nullish(),
  parts: z.array(PartSchema).nullish(),
});
export type GeminiContent = z.infer<typeof ContentSchema>;

export const FunctionDeclarationSchema = z.looseObject({
  name: z.string().min(1),
  description: z.string().nullish(),
  /** OpenAPI-subset schema (types may be upper-case: `OBJECT`, `STRING`). */
  parameters: z.record(z.string(), z.unknown()).nullish(),
  /** Plain JSON Schema (gemini-cli, pi). */
  parametersJsonSchema: z.record(z.string(), z.unknown()).nullish(),
});

export const ToolSchema = z.looseObject({ functionDeclarations: z.array(FunctionDeclarationSchema).nullish() });

export const GenerationConfigSchema = z.looseObject({
  temperature: z.number().nullish(),
  topP: z.number().nullish(),
  topK: z.number().nullish(),
  maxOutputTokens: z.number().int().positive().nullish(),
  stopSequences: z.array(z.string()).nullish(),
  candidateCount: z.number().int().nullish(),
  seed: z.number().int().nullish(),
  presencePenalty: z.number().nullish(),
  frequencyPenalty: z.number().nullish(),
  responseMimeType: z.string().nullish(),
  responseSchema: z.unknown().optional(),
  responseJsonSchema: z.unknown().optional(),
  thinkingConfig: z
    .looseObject({ includeThoughts: z.boolean().nullish(), thinkingBudget: z.number().int().nullish(), thinkingLevel: z.string().nullish() })
    .nullish(),
});

export const RequestSchema = z.looseObject({
  /** Only inside `countTokens`' `generateContentRequest`; otherwise the model is in the URL path. */
  model: z.string().nullish(),
  contents: z.array(ContentSchema),
  systemInstruction: z.union([z.string(), ContentSchema]).nullish(),
  tools: z.array(ToolSchema).nullish(),
  toolConfig: z
    .looseObject({
      functionCallingConfig: z.looseObject({ mode: z.string().nullish(), allowedFunctionNames: z.array(z.string()).nullish() }).nullish(),
    })
    .nullish(),
  generationConfig: GenerationConfigSchema.nullish(),
  safetySettings: z.array(z.unknown()).nullish(),
  cachedContent: z.string().nullish(),
});
export type GeminiRequest = z.infer<typeof RequestSchema>;

export const KNOWN_REQUEST_FIELDS: ReadonlySet<string> = new Set(Object.keys(RequestSchema.shape));
/** Accepted and ignored without a warning (no effect on sampling). */
export const IGNORED_REQUEST_FIELDS: ReadonlySet<string> = new Set(['labels', 'serviceTier']);
export const KNOWN_GENERATION_FIELDS: ReadonlySet<string> = new Set(Object.keys(GenerationConfigSchema.shape));
