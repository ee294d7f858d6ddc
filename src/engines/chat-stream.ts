/**
 * Reading an engine's streamed OpenAI Chat answer (`stream: true`): each `chat.completion.chunk` is forwarded as
 * deltas while the chunks are accumulated into the body a non-streaming call would have returned, so the response and
 * the token capture come from the same reader as the non-streaming path (chat-capture.ts) with the same cross-checks:
 * the sum of the chunks' `token_ids` = `usage.completion_tokens` = the number of logprobs, prompt ids =
 * `usage.prompt_tokens`. vLLM ≥ 0.10.2 with `return_token_ids` puts `prompt_token_ids` on the first chunk and each
 * chunk's sampled ids in `choices[0].token_ids`; SGLang builds that stream token data put them in the same places or in
 * `meta_info`. https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html#chat-api
 */
import { isIntArray, isTokenIds, type TokenIds } from '../core/int32-twin.ts';
import type { IdGenerator } from '../core/ids.ts';
import type { DeltaEmitter } from './delta-emitter.ts';

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

export class ChatChunkAccumulator {
  private id = '';
  private model = '';
  private created = 0;
  private content = '';
  private reasoning = '';
  private readonly calls = new Map<number, { id: string; name: string; args: string }>();
  private finishReason: unknown = null;
  private stopReason: unknown = undefined;
  private promptIds: TokenIds | null = null;
  private tokenIds: number[] | null = null;
  private logprobs: unknown[] | null = null;
  private usage: Json | null = null;
  private meta: Json | null = null;
  private weightVersion: unknown = undefined;

  constructor(private readonly newId: IdGenerator) {}

  /** Prompt length once the engine has said it (first chunk with prompt ids, or usage), else null. */
  get promptLength(): number | null {
    if (this.promptIds) return this.promptIds.length;
    if (this.usage && typeof this.usage.prompt_tokens === 'number') return this.usage.prompt_tokens;
    return null;
  }

  /** Whether a chunk carried the choice's `finish_reason`: a stream that ends without one broke off. */
  get finished(): boolean {
    return this.finishReason !== null;
  }

  /** Take one chunk; its text and tool-call fragments go to `emitter` as they come. */
  push(chunk: Json, emitter: DeltaEmitter): void {
    if (typeof chunk.id === 'string' && this.id === '') this.id = chunk.id;
    if (typeof chunk.model === 'string') this.model = chunk.model;
    if (typeof chunk.created === 'number') this.created = chunk.created;
    if (isTokenIds(chunk.prompt_token_ids)) this.promptIds = chunk.prompt_token_ids;
    if (isObject(chunk.usage)) this.usage = chunk.usage;
    if (isObject(chunk.meta_info)) this.mergeMeta(chunk.meta_info);
    if (isObject(chunk.metadata) && chunk.metadata.weight_version !== undefined) this.weightVersion = chunk.metadata.weight_version;
    const choice = Array.isArray(chunk.choices) && isObject(chunk.choices[0]) ? chunk.choices[0] : null;
    if (!choice) return;
    if (isTokenIds(choice.prompt_token_ids)) this.promptIds = choice.prompt_token_ids;
    if (isIntArray(choice.token_ids)) (this.tokenIds ??= []).push(...choice.token_ids);
    if (isObject(choice.logprobs) && Array.isArray(choice.logprobs.content)) (this.logprobs ??= []).push(...choice.logprobs.content);
    if (isObject(choice.meta_info)) this.mergeMeta(choice.meta_info);
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) this.finishReason = choice.finish_reason;
    if (choice.stop_reason !== undefined && choice.stop_reason !== null) this.stopReason = choice.stop_reason;
    if (choice.matched_stop !== undefined && choice.matched_stop !== null) this.stopReason = choice.matched_stop;
    const delta = isObject(choice.delta) ? choice.delta : {};
    const reasoning = typeof delta.reasoning === 'string' ? delta.reasoning : typeof delta.reasoning_content === 'string' ? delta.reasoning_content : '';
    if (reasoning !== '') {
      this.reasoning += reasoning;
      emitter.reasoning(reasoning);
    }
    if (typeof delta.content === 'string' && delta.content !== '') {
      this.content += delta.content;
      emitter.text(delta.content);
    }
    if (Array.isArray(delta.tool_calls)) {
      for (const [k, raw] of delta.tool_calls.entries()) {
        if (!isObject(raw)) continue;
        const index = Number.isInteger(raw.index) ? (raw.index as number) : k;
        const fn = isObject(raw.function) ? raw.function : {};
        let call = this.calls.get(index);
        if (!call) {
          call = { id: typeof raw.id === 'string' && raw.id !== '' ? raw.id : this.newId('call'), name: '', args: '' };
          this.calls.set(index, call);
        }
        if (typeof fn.name === 'string' && fn.name !== '') call.name += fn.name;
        const args = typeof fn.arguments === 'string' ? fn.arguments : fn.arguments !== undefined && fn.arguments !== null ? JSON.stringify(fn.arguments) : '';
        if (call.name !== '') emitter.toolStart(index, call.id, call.name);
        if (args !== '') {
          call.args += args;
          emitter.toolDelta(index, args);
        }
      }
    }
  }

  /** SGLang meta_info may come per chunk, incremental or cumulative: keep the longest logprob list. */
  private mergeMeta(meta: Json): void {
    const previous = this.meta?.output_token_logprobs;
    const next = meta.output_token_logprobs;
    this.meta = { ...this.meta, ...meta };
    if (Array.isArray(previous) && Array.isArray(next) && next.length > 0 && !sameEntry(next[0], previous[0])) {
      this.meta.output_token_logprobs = [...previous, ...next];
    }
    if (meta.weight_version !== undefined) this.weightVersion = meta.weight_version;
  }

  /** The body a non-streaming call would have returned (for decodeEngineResponse and extractChatCapture). */
  body(): Json {
    const choice: Json = {
      index: 0,
      message: {
        role: 'assistant',
        content: this.content === '' ? null : this.content,
        ...(this.reasoning !== '' ? { reasoning: this.reasoning } : {}),
        tool_calls: [...this.calls.entries()].sort(([a], [b]) => a - b).map(([, c]) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.args } })),
      },
      finish_reason: this.finishReason,
      ...(this.stopReason !== undefined ? { stop_reason: this.stopReason } : {}),
      logprobs: this.logprobs ? { content: this.logprobs } : null,
    };
    if (this.tokenIds) choice.token_ids = this.tokenIds;
    if (this.meta) choice.meta_info = this.meta;
    const body: Json = { id: this.id, object: 'chat.completion', created: this.created, model: this.model, choices: [choice] };
    if (this.promptIds) body.prompt_token_ids = this.promptIds;
    if (this.usage) body.usage = this.usage;
    if (this.weightVersion !== undefined) body.weight_version = this.weightVersion;
    return body;
  }
}

function sameEntry(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
