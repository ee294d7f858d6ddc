/**
 * IR request → Gemini generateContent body (round-trip tests; a Gemini upstream). The model and streaming are not in the
 * body (they are in the URL path). Consecutive tool messages become one `user` content of functionResponse parts with
 * the call ids; tool output text is wrapped as `{output: text}` (`{error: text}` for errors), as gemini-cli sends it.
 * Source: https://ai.google.dev/api/generate-content
 */
import type { IRContentPart, IRRequest } from '../../core/ir.ts';
import { imagePartToUrl } from '../shared/images.ts';
import { functionCallPart, type WirePart } from './encode-response.ts';

function encodeParts(parts: readonly IRContentPart[]): WirePart[] {
  return parts.map((part) => {
    if (part.type === 'text') return { text: part.text };
    if (part.data !== undefined) return { inlineData: { mimeType: part.mediaType, data: part.data } };
    return { fileData: { mimeType: part.mediaType, fileUri: imagePartToUrl(part) } };
  });
}

/** Encode an IR request as a generateContent body. */
export function encodeRequest(request: IRRequest): Record<string, unknown> {
  const contents: { role: 'user' | 'model'; parts: WirePart[] }[] = [];
  const systemParts: WirePart[] = [];
  const callNames = new Map<string, string>();
  for (const message of request.messages) {
    switch (message.role) {
      case 'system':
        systemParts.push(...encodeParts(message.content));
        break;
      case 'user':
        contents.push({ role: 'user', parts: encodeParts(message.content) });
        break;
      case 'assistant': {
        const parts: WirePart[] = [];
        if (message.reasoning?.text) parts.push({ text: message.reasoning.text, thought: true });
        parts.push(...encodeParts(message.content));
        for (const call of message.toolCalls ?? []) {
          callNames.set(call.id, call.name);
          parts.push(functionCallPart(call));
        }
        contents.push({ role: 'model', parts });
        break;
      }
      case 'tool': {
        const text = message.content.map((part) => (part.type === 'text' ? part.text : '')).join('');
        const images = message.content.filter((part) => part.type === 'image');
        const part = {
          functionResponse: {
            id: message.toolCallId,
            name: message.name ?? callNames.get(message.toolCallId) ?? '',
            response: message.isError ? { error: text } : { output: text },
            ...(images.length > 0 ? { parts: encodeParts(images) } : {}),
          },
        };
        const last = contents.at(-1);
        if (last && last.role === 'user' && last.parts.every((p) => 'functionResponse' in p)) last.parts.push(part);
        else contents.push({ role: 'user', parts: [part] });
        break;
      }
    }
  }
  const { sampling } = request;
  const generationConfig: Record<string, unknown> = {
    ...(sampling.temperature !== undefined ? { temperature: sampling.temperature } : {}),
    ...(sampling.topP !== undefined ? { topP: sampling.topP } : {}),
    ...(sampling.topK !== undefined ? { topK: sampling.topK } : {}),
    ...(sampling.maxTokens !== undefined ? { maxOutputTokens: sampling.maxTokens } : {}),
    ...(sampling.stop?.length ? { stopSequences: sampling.stop } : {}),
    ...(sampling.seed !== undefined ? { seed: sampling.seed } : {}),
    ...(sampling.presencePenalty !== undefined ? { presencePenalty: sampling.presencePenalty } : {}),
    ...(sampling.frequencyPenalty !== undefined ? { frequencyPenalty: sampling.frequencyPenalty } : {}),
    ...(request.responseFormat ? { responseMimeType: 'application/json' } : {}),
    ...(request.responseFormat?.type === 'json_schema' ? { responseJsonSchema: request.responseFormat.schema } : {}),
    ...(request.reasoning
      ? {
          thinkingConfig: {
            includeThoughts: request.reasoning.enabled,
            thinkingBudget: request.reasoning.enabled ? (request.reasoning.budgetTokens ?? -1) : 0,
            ...(request.reasoning.effort ? { thinkingLevel: request.reasoning.effort } : {}),
          },
        }
      : {}),
  };
  const choice = request.toolChoice;
  const toolConfig =
    choice === undefined
      ? undefined
      : typeof choice === 'string'
        ? { functionCallingConfig: { mode: choice === 'required' ? 'ANY' : choice.toUpperCase() } }
        : { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: [choice.name] } };
  return {
    contents,
    ...(systemParts.length > 0 ? { systemInstruction: { role: 'user', parts: systemParts } } : {}),
    ...(request.tools.length > 0
      ? {
          tools: [
            {
              functionDeclarations: request.tools.map((tool) => ({
                name: tool.name,
                ...(tool.description ? { description: tool.description } : {}),
                parametersJsonSchema: tool.parameters,
              })),
            },
          ],
        }
      : {}),
    ...(toolConfig ? { toolConfig } : {}),
    ...(Object.keys(generationConfig).length > 0 ? { generationConfig } : {}),
  };
}
