/**
 * The Gemini generateContent dialect (`/v1beta/models/{model}:generateContent` and `:streamGenerateContent?alt=sse`;
 * gemini-cli, pi `google-generative-ai`, @google/genai). Pure codecs to and from the IR; the proxy passes the model and
 * the stream flag from the URL path in `ctx.pathModel` / `ctx.pathStream`.
 * Source: https://ai.google.dev/api/generate-content; docs/protocol-notes.md#gemini.
 */
import type { Dialect } from '../../core/dialect.ts';
import { decodeRequest } from './decode-request.ts';
import { decodeResponse } from './decode-response.ts';
import { encodeRequest } from './encode-request.ts';
import { encodeResponse } from './encode-response.ts';
import { createStreamEncoder } from './encode-stream.ts';
import { encodeError } from './errors.ts';

export const gemini = {
  name: 'gemini',
  decodeRequest,
  encodeRequest,
  decodeResponse,
  encodeResponse,
  createStreamEncoder,
  encodeError,
} as const satisfies Dialect;

export { bareModelName } from './decode-request.ts';
export {
  decodeCountTokensRequest,
  encodeCountTokensResponse,
  encodeModel,
  encodeModelList,
  parseGeminiPath,
  unwrapCountTokensBody,
  type GeminiMethod,
  type GeminiModelInfo,
} from './models.ts';
