/**
 * IR response → Gemini GenerateContentResponse:
 * `{candidates: [{content: {role: "model", parts}, finishReason, index: 0}], usageMetadata, modelVersion, responseId}`.
 * Parts in order: the reasoning as one `{text, thought: true}` part, the answer text, then one `functionCall` part per
 * call (`{id, name, args}`; args that are not a JSON object are sent as `{"_raw": text}`, shared/tool-input.ts). Empty
 * text parts are never sent. Source: https://ai.google.dev/api/generate-content#generatecontentresponse
 */
import type { CodecContext } from '../../core/dialect.ts';
import type { IRResponse, IRToolCall } from '../../core/ir.ts';
import { toolInputFromArguments } from '../shared/tool-input.ts';
import { encodeFinishReason } from './finish-reason.ts';
import { encodeUsage, type UsageMetadata } from './usage.ts';

export type WirePart = Record<string, unknown>;

export interface GenerateContentResponse {
  candidates: { content: { role: 'model'; parts: WirePart[] }; finishReason?: string; index: 0 }[];
  usageMetadata?: UsageMetadata;
  modelVersion: string;
  responseId: string;
}

/** A functionCall part for one IR call. */
export function functionCallPart(call: IRToolCall): WirePart {
  return { functionCall: { id: call.id, name: call.name, args: toolInputFromArguments(call.arguments) } };
}

/** Encode a complete response. */
export function encodeResponse(response: IRResponse, _ctx: CodecContext): GenerateContentResponse {
  const parts: WirePart[] = [];
  if (response.reasoning?.text) parts.push({ text: response.reasoning.text, thought: true });
  let text = '';
  for (const part of response.content) if (part.type === 'text') text += part.text;
  if (text) parts.push({ text });
  for (const call of response.toolCalls) parts.push(functionCallPart(call));
  return {
    candidates: [{ content: { role: 'model', parts }, finishReason: encodeFinishReason(response.finishReason), index: 0 }],
    usageMetadata: encodeUsage(response.usage),
    modelVersion: response.model,
    responseId: response.id,
  };
}
