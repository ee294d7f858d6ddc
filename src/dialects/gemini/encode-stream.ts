/**
 * IR stream events → Gemini `:streamGenerateContent?alt=sse` frames. Each frame is `data: <GenerateContentResponse>`
 * holding only the new parts: a thought part per reasoning delta, a text part per text delta (never an empty one), and
 * one frame per complete functionCall (arguments are buffered: Gemini sends a call whole). The last content frame is held
 * back so that `finishReason` and the full `usageMetadata` ride on it, as Gemini does; a reply without content ends
 * with a frame whose `parts` is empty. Errors after the first byte are `data: {"error": {code, message, status}}`,
 * which @google/genai raises as an ApiError.
 * Keep-alives and the `start` event write NOTHING: the @google/genai 1.30 bundled in gemini-cli 0.61 only parses a buffer
 * that begins with `data:` (its regex is anchored), so one SSE comment stalls the parse and the CLI fails with
 * "Incomplete JSON segment at the end" (seen with the real CLI, test/e2e/proxy2-cli.test.ts). Real Gemini streams send
 * no bytes before the first chunk either; the response headers still go out at once.
 * Source: https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent
 */
import type { CodecContext } from '../../core/dialect.ts';
import { sseFrame, type IRStreamEvent, type StreamEncoder } from '../../core/stream.ts';
import { encodeError } from './errors.ts';
import { encodeFinishReason } from './finish-reason.ts';
import { functionCallPart, type GenerateContentResponse, type WirePart } from './encode-response.ts';
import { encodeUsage } from './usage.ts';
import { createToolCallBuffer } from '../shared/tool-call-buffer.ts';

/** A fresh SSE encoder for one streamed generateContent reply. */
export function createStreamEncoder(ctx: CodecContext): StreamEncoder {
  let responseId = '';
  let model = ctx.request?.model ?? '';
  let held: GenerateContentResponse | null = null;
  let done = false;
  const calls = createToolCallBuffer();

  const chunk = (parts: WirePart[]): GenerateContentResponse => ({
    candidates: [{ content: { role: 'model', parts }, index: 0 }],
    modelVersion: model,
    responseId,
  });
  // Emit the previously held frame and hold `next` instead.
  const hold = (next: GenerateContentResponse): string => {
    const out = held ? sseFrame(held) : '';
    held = next;
    return out;
  };
  const release = (): string => {
    const out = held ? sseFrame(held) : '';
    held = null;
    return out;
  };

  return {
    push(event: IRStreamEvent): string {
      if (done) return '';
      switch (event.type) {
        case 'start':
          responseId = event.id;
          model = event.model;
          return '';
        case 'keep-alive':
          return '';
        case 'reasoning-delta':
          return event.text ? hold(chunk([{ text: event.text, thought: true }])) : '';
        case 'text-delta':
          return event.text ? hold(chunk([{ text: event.text }])) : '';
        case 'reasoning-end':
        case 'text-end':
          return '';
        case 'tool-call-start':
          calls.start(event.index, event.id, event.name);
          return '';
        case 'tool-call-delta':
          calls.append(event.index, event.argumentsDelta);
          return '';
        case 'tool-call-end': {
          const call = calls.take(event.index);
          if (!call) return '';
          return hold(chunk([functionCallPart({ id: call.id, name: call.name, arguments: call.args })]));
        }
        case 'finish': {
          done = true;
          let out = '';
          for (const call of calls.drain()) out += hold(chunk([functionCallPart({ id: call.id, name: call.name, arguments: call.args })]));
          if (!responseId) responseId = event.response.id;
          if (!model) model = event.response.model;
          const last: GenerateContentResponse = held ?? chunk([]);
          held = null;
          last.candidates[0]!.finishReason = encodeFinishReason(event.finishReason);
          last.usageMetadata = encodeUsage(event.usage);
          return out + sseFrame(last);
        }
        case 'error':
          done = true;
          return release() + sseFrame(encodeError(event.error).body);
      }
    },
    end(): string {
      return release();
    },
  };
}
