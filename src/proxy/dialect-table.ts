/**
 * The one table of client dialects the proxy serves: route → dialect object. Adding a dialect (OpenAI Responses,
 * Gemini) is one entry here. The dialect is chosen by route *before* the body is parsed, so every error — malformed
 * JSON included — renders in the caller's own provider shape. Source: docs/architecture.md#the-proxy (dialect detection).
 */
import type { Dialect } from '../core/dialect.ts';
import { anthropicMessages } from '../dialects/anthropic-messages/index.ts';
import { openaiChat } from '../dialects/openai-chat/index.ts';
import { encodeCountTokensResponse, encodeModel, encodeModelList, gemini, parseGeminiPath, unwrapCountTokensBody } from '../dialects/gemini/index.ts';
import { openaiResponses } from '../dialects/openai-responses/index.ts';

export interface DialectRoute {
  dialect: Dialect;
  /** Hono path patterns of the completion endpoint (POST), without the `/s/{session_id}` prefix. */
  paths: string[];
  /**
   * Path prefixes this dialect owns (without `/s/{session_id}`): a 404, 405 or 413 under one of them renders in this
   * dialect's error shape, so an SDK of that provider can parse it.
   */
  prefixes: string[];
  /**
   * Stream flag and model from the URL, for wire formats that put them there (Gemini `:streamGenerateContent`,
   * `/models/{model}`); undefined = take them from the decoded body. `jsonArray`: the stream is framed as one JSON
   * array of response chunks (`application/json`) instead of SSE (Gemini without `?alt=sse`).
   */
  fromUrl?(url: URL): { stream?: boolean; model?: string; jsonArray?: boolean };
  /** The dialect's token-count endpoint (POST) and its response body. */
  countTokens?: { paths: string[]; encode(inputTokens: number): unknown; prepareBody?(body: unknown): unknown };
  /**
   * True streaming (live-stream.ts): hold the HTTP status until the engine has answered, so errors are real statuses
   * (OpenAI Chat, Gemini: their clients retry on a status, not on an in-band error).
   */
  statusBeforeBytes?: boolean;
  /** True streaming: send the start event once the prompt length is known (Anthropic `message_start.usage.input_tokens`). */
  startOnPrompt?: boolean;
  /** The dialect's own model endpoints (GET): `list` paths answer every served model, `one` paths the `:model` param. */
  models?: { list: string[]; one: string[]; encodeList(served: string): unknown; encodeOne(model: string): unknown };
}

/** Every dialect the proxy serves, in match order. */
export function defaultDialectRoutes(): DialectRoute[] {
  return [
    {
      dialect: anthropicMessages,
      paths: ['/v1/messages'],
      prefixes: ['/v1/messages'],
      startOnPrompt: true,
      countTokens: {
        paths: ['/v1/messages/count_tokens'],
        // https://docs.anthropic.com/en/api/messages-count-tokens — {input_tokens}
        encode: (inputTokens) => ({ input_tokens: inputTokens }),
        // count_tokens bodies carry no max_tokens, which a Messages body requires.
        prepareBody: (body) => (body && typeof body === 'object' && !Array.isArray(body) && !('max_tokens' in body) ? { ...body, max_tokens: 1 } : body),
      },
    },
    { dialect: openaiChat, paths: ['/v1/chat/completions', '/chat/completions'], prefixes: ['/v1/chat/completions', '/chat/completions'], statusBeforeBytes: true },
    { dialect: openaiResponses, paths: ['/v1/responses', '/responses'], prefixes: ['/v1/responses', '/responses'] },
    {
      dialect: gemini,
      // https://ai.google.dev/api/generate-content — the model and the method are one path segment.
      paths: ['/v1beta/models/:action{[^/]+:(?:generateContent|streamGenerateContent)}'],
      prefixes: ['/v1beta'],
      statusBeforeBytes: true,
      // https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent — without `alt=sse` the REST
      // stream is one JSON array of GenerateContentResponse chunks.
      fromUrl: (url) => {
        const call = parseGeminiPath(url.pathname);
        if (!call) return {};
        const stream = call.method === 'streamGenerateContent';
        return { model: call.model, stream, ...(stream && url.searchParams.get('alt') !== 'sse' ? { jsonArray: true } : {}) };
      },
      countTokens: { paths: ['/v1beta/models/:action{[^/]+:countTokens}'], encode: encodeCountTokensResponse, prepareBody: unwrapCountTokensBody },
      models: {
        list: ['/v1beta/models'],
        // No `:` in the model segment: `models/x:generateContent` is a method call (POST only), never model info.
        one: ['/v1beta/models/:model{[^/:]+}'],
        encodeList: (served) => encodeModelList([{ id: served }]),
        encodeOne: (model) => encodeModel({ id: model }),
      },
    },
  ];
}

/** The dialect that renders errors of paths no route's `prefixes` claim. */
export const fallbackDialect: Dialect = openaiChat;

/**
 * The dialect whose error shape a request to `pathname` gets when no handler set one (unknown route, wrong method,
 * body too large): the route whose `prefixes` match (after an optional `/s/{session_id}`), else `fallbackDialect`.
 * A prefix matches the whole path or a path below it (`/v1/messages` matches `/v1/messages/x`, not `/v1/messagesx`).
 */
export function dialectForPath(routes: readonly DialectRoute[], pathname: string): Dialect {
  const path = pathname.replace(/^\/s\/[^/]+(?=\/|$)/, '');
  for (const route of routes) {
    for (const prefix of route.prefixes) {
      if (path === prefix || path.startsWith(`${prefix}/`)) return route.dialect;
    }
  }
  return fallbackDialect;
}
