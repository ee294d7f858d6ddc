/**
 * The Gemini `models` list (`GET /v1beta/models`, `GET /v1beta/models/{model}`) and `:countTokens` shapes.
 * Source: https://ai.google.dev/api/models#Model, https://ai.google.dev/api/tokens#method:-models.counttokens
 */
import type { CodecContext } from '../../core/dialect.ts';
import type { IRRequest } from '../../core/ir.ts';
import { isRecord } from '../shared/validate.ts';
import { decodeRequest } from './decode-request.ts';

export interface GeminiModelInfo {
  /** Model id without the `models/` prefix. */
  id: string;
  /** Context window in tokens. */
  inputTokenLimit?: number;
  /** Output cap in tokens. */
  outputTokenLimit?: number;
}

/** One Model resource. */
export function encodeModel(model: GeminiModelInfo): Record<string, unknown> {
  return {
    name: `models/${model.id}`,
    baseModelId: model.id,
    version: '001',
    displayName: model.id,
    description: `${model.id} served through Polar`,
    inputTokenLimit: model.inputTokenLimit ?? 32768,
    outputTokenLimit: model.outputTokenLimit ?? 8192,
    supportedGenerationMethods: ['generateContent', 'streamGenerateContent', 'countTokens'],
    thinking: true,
  };
}

/** `GET /v1beta/models` body. */
export function encodeModelList(models: readonly GeminiModelInfo[]): { models: Record<string, unknown>[] } {
  return { models: models.map(encodeModel) };
}

/**
 * A `:countTokens` body → the IR request to count. The body is either `{contents}` or
 * `{generateContentRequest: {model, contents, systemInstruction, tools, …}}` (which counts the system prompt and tools too).
 * @throws GatewayError('invalid-request') as decodeRequest does.
 */
export function decodeCountTokensRequest(body: unknown, ctx: CodecContext): IRRequest {
  return decodeRequest(unwrapCountTokensBody(body), { ...ctx, pathStream: false });
}

/** The generateContent body inside a `:countTokens` body (`generateContentRequest`, or the body itself). */
export function unwrapCountTokensBody(body: unknown): unknown {
  return isRecord(body) && isRecord(body.generateContentRequest) ? body.generateContentRequest : body;
}

/** `:countTokens` response body; `totalTokens` in tokens. */
export function encodeCountTokensResponse(totalTokens: number): { totalTokens: number } {
  return { totalTokens };
}

/** The methods of `/v1beta/models/{model}:{method}` this dialect serves. */
export type GeminiMethod = 'generateContent' | 'streamGenerateContent' | 'countTokens';

/**
 * Model and method from a Gemini URL path (`…/models/gemini-2.5-pro:streamGenerateContent`), or null when the path
 * is not a model method call. The model is percent-decoded.
 */
export function parseGeminiPath(pathname: string): { model: string; method: GeminiMethod } | null {
  const match = /\/models\/([^/]+):(generateContent|streamGenerateContent|countTokens)$/.exec(pathname);
  if (!match) return null;
  return { model: decodeURIComponent(match[1]!), method: match[2] as GeminiMethod };
}
