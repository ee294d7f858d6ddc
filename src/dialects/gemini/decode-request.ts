/**
 * Gemini generateContent request → IR. The model and streaming come from the URL path (`ctx.pathModel`,
 * `ctx.pathStream`, set by the proxy); `systemInstruction` becomes the system message; `model` contents become
 * assistant turns (thought parts → reasoning, functionCall parts → tool calls); `functionResponse` parts become tool
 * messages. Call ids: a functionCall without an id gets a minted one (`ctx.newId('call')`); a functionResponse is
 * matched to the pending calls of the preceding model turn by id, then by order — never by name, since parallel calls
 * to the same function are common (docs/protocol-notes.md#gemini).
 * Source: https://ai.google.dev/api/generate-content
 */
import type { CodecContext } from '../../core/dialect.ts';
import { GatewayError } from '../../core/errors.ts';
import {
  IR_VERSION,
  type IRContentPart,
  type IRMessage,
  type IRRequest,
  type IRSampling,
  type IRTool,
  type IRToolChoice,
  type IRResponseFormat,
  type Warning,
} from '../../core/ir.ts';
import { cleanToolSchema } from '../shared/json-schema.ts';
import { argumentsFromToolInput } from '../shared/tool-input.ts';
import { isRecord, parseWire, unknownFieldWarnings } from '../shared/validate.ts';
import { outOfRangeWarnings, type DocumentedRange } from '../shared/sampling-range.ts';
import {
  type GeminiContent,
  type GeminiPart,
  type GeminiRequest,
  IGNORED_REQUEST_FIELDS,
  KNOWN_GENERATION_FIELDS,
  KNOWN_REQUEST_FIELDS,
  RequestSchema,
} from './schema.ts';

/** `models/gemini-2.5-pro` → `gemini-2.5-pro`. */
export function bareModelName(model: string): string {
  return model.startsWith('models/') ? model.slice('models/'.length) : model;
}

/**
 * Decode a generateContent body.
 * @throws GatewayError('invalid-request') on a malformed body (naming the field), a missing model, `candidateCount`
 *   above 1 (one sample per call keeps capture 1:1) or `cachedContent` (server-side state the proxy does not keep).
 */
export function decodeRequest(body: unknown, ctx: CodecContext): IRRequest {
  const request = parseWire(RequestSchema, body);
  const warnings: Warning[] = unknownFieldWarnings(request, new Set([...KNOWN_REQUEST_FIELDS, ...IGNORED_REQUEST_FIELDS]), 'request');
  const model = ctx.pathModel ?? request.model;
  if (!model) throw new GatewayError('invalid-request', 'no model: expected /v1beta/models/{model}:generateContent', { param: 'model' });
  if (request.cachedContent) {
    throw new GatewayError('invalid-request', `cachedContent is not supported: this proxy keeps no cached contents (got "${request.cachedContent}")`, {
      param: 'cachedContent',
    });
  }

  const messages: IRMessage[] = [];
  const system = decodeSystemInstruction(request.systemInstruction);
  if (system.length > 0) messages.push({ role: 'system', content: system });
  decodeContents(request.contents, messages, warnings, ctx);

  const tools = decodeTools(request.tools, warnings);
  const toolChoice = decodeToolChoice(request.toolConfig, warnings);
  const { sampling, reasoning, responseFormat } = decodeGenerationConfig(request.generationConfig, warnings);
  if (request.safetySettings?.length) {
    warnings.push({ code: 'safety-settings-ignored', message: 'safetySettings are not enforced by this proxy' });
  }

  return {
    version: IR_VERSION,
    model: bareModelName(model),
    messages,
    tools,
    ...(toolChoice !== undefined ? { toolChoice } : {}),
    sampling,
    ...(reasoning ? { reasoning } : {}),
    ...(responseFormat ? { responseFormat } : {}),
    stream: ctx.pathStream ?? false,
    warnings,
  };
}

function decodeSystemInstruction(system: GeminiRequest['systemInstruction']): IRContentPart[] {
  if (system == null) return [];
  if (typeof system === 'string') return system ? [{ type: 'text', text: system }] : [];
  const parts: IRContentPart[] = [];
  for (const part of system.parts ?? []) if (part.text) parts.push({ type: 'text', text: part.text });
  return parts;
}

interface PendingCall { id: string; answered: boolean }

function decodeContents(contents: readonly GeminiContent[], messages: IRMessage[], warnings: Warning[], ctx: CodecContext): void {
  // Calls of the latest model turn that still wait for a functionResponse.
  let pending: PendingCall[] = [];
  contents.forEach((content, index) => {
    const where = `contents[${index}]`;
    const parts = content.parts ?? [];
    if (content.role === 'model') {
      pending = [];
      let reasoning = '';
      const text: IRContentPart[] = [];
      const toolCalls: { id: string; name: string; arguments: string }[] = [];
      for (const part of parts) {
        if (part.functionCall) {
          const id = part.functionCall.id || ctx.newId('call');
          toolCalls.push({ id, name: part.functionCall.name, arguments: argumentsFromToolInput(part.functionCall.args ?? {}) });
          pending.push({ id, answered: false });
        } else if (part.text !== undefined) {
          if (part.thought) reasoning += part.text;
          else if (part.text) text.push({ type: 'text', text: part.text });
        }
      }
      messages.push({
        role: 'assistant',
        content: text,
        ...(reasoning ? { reasoning: { text: reasoning } } : {}),
        ...(toolCalls.length > 0 ? { toolCalls } : {}),
      });
      return;
    }
    const userParts: IRContentPart[] = [];
    parts.forEach((part, partIndex) => {
      const partWhere = `${where}.parts[${partIndex}]`;
      if (part.functionResponse) {
        messages.push(decodeFunctionResponse(part.functionResponse, pending, partWhere, warnings, ctx));
        return;
      }
      const decoded = decodeUserPart(part, partWhere, warnings);
      if (decoded) userParts.push(decoded);
    });
    if (userParts.length > 0) messages.push({ role: 'user', content: userParts });
  });
}

function decodeFunctionResponse(
  response: NonNullable<GeminiPart['functionResponse']>,
  pending: PendingCall[],
  where: string,
  warnings: Warning[],
  ctx: CodecContext,
): IRMessage {
  let call = response.id ? pending.find((p) => !p.answered && p.id === response.id) : undefined;
  call ??= pending.find((p) => !p.answered);
  let toolCallId: string;
  if (call) {
    call.answered = true;
    toolCallId = call.id;
  } else {
    toolCallId = response.id || ctx.newId('call');
    warnings.push({ code: 'orphan-tool-output', message: `${where}: functionResponse matches no pending functionCall` });
  }
  const body = response.response ?? {};
  const content: IRContentPart[] = [];
  let isError = false;
  const keys = Object.keys(body);
  // {output: "..."} / {error: "..."} are how gemini-cli and pi wrap plain tool output; the model sees the text itself.
  if (keys.length === 1 && typeof body.output === 'string') content.push({ type: 'text', text: body.output });
  else if (keys.length === 1 && body.error !== undefined) {
    isError = true;
    content.push({ type: 'text', text: typeof body.error === 'string' ? body.error : JSON.stringify(body.error) });
  } else content.push({ type: 'text', text: JSON.stringify(body) });
  for (const part of response.parts ?? []) {
    if (part.inlineData?.mimeType.startsWith('image/')) content.push({ type: 'image', mediaType: part.inlineData.mimeType, data: part.inlineData.data });
  }
  return { role: 'tool', toolCallId, ...(response.name ? { name: response.name } : {}), content, ...(isError ? { isError } : {}) };
}

function decodeUserPart(part: GeminiPart, where: string, warnings: Warning[]): IRContentPart | null {
  if (part.text !== undefined) return part.text ? { type: 'text', text: part.text } : null;
  if (part.inlineData) {
    if (part.inlineData.mimeType.startsWith('image/')) return { type: 'image', mediaType: part.inlineData.mimeType, data: part.inlineData.data };
    warnings.push({ code: 'content-dropped', message: `${where}: inlineData of type ${part.inlineData.mimeType} is not supported and was dropped` });
    return null;
  }
  if (part.fileData) {
    const mediaType = part.fileData.mimeType ?? 'image/*';
    if (mediaType.startsWith('image/')) return { type: 'image', mediaType, url: part.fileData.fileUri };
    warnings.push({ code: 'content-dropped', message: `${where}: fileData of type ${mediaType} is not supported and was dropped` });
    return null;
  }
  if (part.functionCall) {
    warnings.push({ code: 'content-dropped', message: `${where}: functionCall in a user turn was dropped` });
    return null;
  }
  warnings.push({ code: 'content-dropped', message: `${where}: part with fields ${Object.keys(part).join(', ')} is not supported and was dropped` });
  return null;
}

/**
 * OpenAPI-subset schema (Gemini `parameters`) → JSON Schema: upper-case `type` names become lower-case and
 * `nullable: true` becomes a `null` type. Everything else is kept.
 */
export function openApiToJsonSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(openApiToJsonSchema);
  if (!isRecord(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'type' && typeof value === 'string') out.type = value.toLowerCase();
    else if (key === 'nullable') continue;
    else if (key === 'properties' && isRecord(value)) {
      out.properties = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, openApiToJsonSchema(sub)]));
    } else if (isRecord(value) || Array.isArray(value)) out[key] = openApiToJsonSchema(value);
    else out[key] = value;
  }
  if (schema.nullable === true && typeof out.type === 'string') out.type = [out.type, 'null'];
  return out;
}

function decodeTools(tools: GeminiRequest['tools'], warnings: Warning[]): IRTool[] {
  const out: IRTool[] = [];
  (tools ?? []).forEach((tool, index) => {
    for (const fn of tool.functionDeclarations ?? []) {
      const parameters = fn.parametersJsonSchema ?? (fn.parameters ? openApiToJsonSchema(fn.parameters) : undefined);
      out.push({ name: fn.name, ...(fn.description ? { description: fn.description } : {}), parameters: cleanToolSchema(parameters), origin: { kind: 'function' } });
    }
    const others = Object.keys(tool).filter((key) => key !== 'functionDeclarations');
    if (others.length > 0) {
      warnings.push({ code: 'tool-dropped', message: `tools[${index}]: ${others.join(', ')} cannot run locally and was not shown to the model` });
    }
  });
  return out;
}

function decodeToolChoice(config: GeminiRequest['toolConfig'], warnings: Warning[]): IRToolChoice | undefined {
  const calling = config?.functionCallingConfig;
  if (!calling?.mode) return undefined;
  const allowed = calling.allowedFunctionNames ?? [];
  switch (calling.mode.toUpperCase()) {
    case 'AUTO':
      return 'auto';
    case 'NONE':
      return 'none';
    case 'ANY':
    case 'VALIDATED':
      if (allowed.length === 1) return { name: allowed[0]! };
      if (allowed.length > 1) warnings.push({ code: 'tool-choice-degraded', message: 'allowedFunctionNames with several names is not enforced' });
      return 'required';
    default:
      warnings.push({ code: 'tool-choice-degraded', message: `functionCallingConfig.mode "${calling.mode}" is not supported; using auto` });
      return 'auto';
  }
}

/** Gemini's documented sampling ranges (https://ai.google.dev/api/generate-content#generationconfig). */
const RANGES: readonly DocumentedRange[] = [
  { field: 'generationConfig.temperature', min: 0, max: 2 },
  { field: 'generationConfig.topP', min: 0, max: 1 },
];

function decodeGenerationConfig(
  config: GeminiRequest['generationConfig'],
  warnings: Warning[],
): { sampling: IRSampling; reasoning?: IRRequest['reasoning']; responseFormat?: IRResponseFormat } {
  if (!config) return { sampling: {} };
  warnings.push(...unknownFieldWarnings(config, KNOWN_GENERATION_FIELDS, 'generationConfig'));
  if (config.candidateCount != null && config.candidateCount > 1) {
    throw new GatewayError('invalid-request', `generationConfig.candidateCount must be 1 (got ${config.candidateCount}); send one request per sample`, {
      param: 'generationConfig.candidateCount',
    });
  }
  const responseFormat = decodeResponseFormat(config, warnings);
  warnings.push(...outOfRangeWarnings({ 'generationConfig.temperature': config.temperature, 'generationConfig.topP': config.topP }, RANGES, 'Gemini'));
  const sampling: IRSampling = {
    ...(config.temperature != null ? { temperature: config.temperature } : {}),
    ...(config.topP != null ? { topP: config.topP } : {}),
    ...(config.topK != null ? { topK: config.topK } : {}),
    ...(config.maxOutputTokens != null ? { maxTokens: config.maxOutputTokens } : {}),
    ...(config.stopSequences?.length ? { stop: config.stopSequences } : {}),
    ...(config.seed != null ? { seed: config.seed } : {}),
    ...(config.presencePenalty != null ? { presencePenalty: config.presencePenalty } : {}),
    ...(config.frequencyPenalty != null ? { frequencyPenalty: config.frequencyPenalty } : {}),
  };
  const thinking = config.thinkingConfig;
  if (!thinking) return { sampling, ...(responseFormat ? { responseFormat } : {}) };
  // thinkingBudget: 0 = off, -1 = dynamic, N > 0 = cap in tokens.
  const budget = thinking.thinkingBudget ?? undefined;
  const reasoning: IRRequest['reasoning'] = {
    enabled: budget !== 0,
    ...(budget !== undefined && budget > 0 ? { budgetTokens: budget } : {}),
    ...(thinking.thinkingLevel ? { effort: thinking.thinkingLevel.toLowerCase() } : {}),
  };
  return { sampling, reasoning, ...(responseFormat ? { responseFormat } : {}) };
}

/**
 * `responseMimeType: "application/json"` with `responseJsonSchema` (JSON Schema) or `responseSchema` (OpenAPI
 * subset, converted) → a JSON-schema format; without a schema → JSON mode. A schema without the JSON mime type,
 * `text/x.enum` and other mime types are reported as warnings, not enforced.
 * Source: https://ai.google.dev/gemini-api/docs/structured-output
 * @throws GatewayError('invalid-request') naming `generationConfig.responseSchema`.
 */
function decodeResponseFormat(config: NonNullable<GeminiRequest['generationConfig']>, warnings: Warning[]): IRResponseFormat | undefined {
  const mime = config.responseMimeType ?? undefined;
  const schema = config.responseJsonSchema ?? (config.responseSchema != null ? openApiToJsonSchema(config.responseSchema) : undefined);
  if (mime === 'application/json') {
    if (schema === undefined || schema === null) return { type: 'json_object' };
    if (!isRecord(schema)) {
      const param = config.responseJsonSchema != null ? 'generationConfig.responseJsonSchema' : 'generationConfig.responseSchema';
      throw new GatewayError('invalid-request', `${param}: must be a schema object`, { param });
    }
    const { $schema: _drop, ...rest } = schema;
    return { type: 'json_schema', schema: rest };
  }
  if (mime && mime !== 'text/plain') {
    warnings.push({ code: 'response-format-ignored', message: `responseMimeType "${mime}" is not enforced; the model answers in free text` });
    return undefined;
  }
  if (schema != null) {
    warnings.push({ code: 'response-format-ignored', message: 'responseSchema / responseJsonSchema without responseMimeType "application/json" is not enforced' });
  }
  return undefined;
}
