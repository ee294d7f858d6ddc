/**
 * The chat-mode engine client shared by vLLM, SGLang, the simulator and any OpenAI-compatible server: they differ
 * only in a `ChatEngineProfile` (capture flags, where reasoning is echoed, logprob semantics). A streaming client is
 * served from a streamed engine call (`stream`, chat-stream.ts) when `engine.stream` allows it and, for `auto`, the
 * start-up probe found the streamed capture sound. Source: docs/architecture.md#chat-mode-and-token-mode,
 * docs/protocol-notes.md#inference-engines.
 */
import type { Clock } from '../core/clock.ts';
import { systemClock } from '../core/clock.ts';
import { GatewayError } from '../core/errors.ts';
import type { IdGenerator } from '../core/ids.ts';
import { randomId } from '../core/ids.ts';
import type { IRRequest, Warning } from '../core/ir.ts';
import type { LogprobSemantics } from '../core/records.ts';
import { MODEL_FAMILIES } from '../tokenization/families.ts';
import { type CaptureSources, decodeEngineResponse, engineReasoningTokens, engineWeightVersion, extractChatCapture, reasoningTokenCount } from './chat-capture.ts';
import { EngineAnswerReader } from './answer-json.ts';
import { ChatBodyMemo } from './body-memo.ts';
import { ChatChunkAccumulator } from './chat-stream.ts';
import { DeltaEmitter } from './delta-emitter.ts';
import { brokeOff, parseEventData, sseData } from './sse.ts';
import { detectSystemPlacement } from './system-placement.ts';
import { buildChatRequest, type ReasoningField, type SamplingDefaults, type SystemMessagePlacement } from './chat-request.ts';
import { engineFetchJson, engineFetchStream, engineHeaders, onceUntilFailure, probeServedModel } from './http.ts';
import type {
  CaptureMode, EngineCallContext, EngineClient, EngineCompletion, EngineKind, EngineProbeReport, EngineStreamEvent, EngineStreamSetting,
} from './types.ts';

/** What distinguishes one chat-mode engine from another. */
export interface ChatEngineProfile {
  kind: EngineKind;
  /** Whether the engine returns token ids at all (false for a generic OpenAI-compatible server). */
  captures: boolean;
  /** Body fields that ask for token ids and logprobs. `acceptsReturnTokenIds` comes from the probe. */
  captureFlags(state: { acceptsReturnTokenIds: boolean }): Record<string, unknown>;
  /** Per-call body fields (SGLang `rid`). */
  perCallFields?(ctx: EngineCallContext): Record<string, unknown>;
  defaultReasoningField: ReasoningField;
  defaultLogprobSemantics: LogprobSemantics;
  /** Whether to ask `GET /version` (vLLM) to choose the reasoning field. */
  probeVersion?: boolean;
  /** Whether the engine may reject `return_token_ids` (SGLang builds before it existed): probe retries without. */
  optionalReturnTokenIds?: boolean;
  /** Whether `POST /tokenize` renders `messages` with the chat template (vLLM): `systemMessages: auto` uses it. */
  tokenizesMessages?: boolean;
}

export interface ChatEngineOptions {
  url: string;
  apiKey?: string;
  /** Served model name; without it the first model of `GET /v1/models` is used. */
  servedModel?: string;
  /** Per-call limit in ms (0 = none). */
  timeoutMs: number;
  defaults: SamplingDefaults;
  /** Overrides the probed/default reasoning echo field. */
  reasoningField?: ReasoningField;
  /**
   * Placement of later system messages (default merge into the leading one); `auto` detects it at probe time on
   * engines that can render a conversation (vLLM `POST /tokenize`, ./system-placement.ts), else merges.
   */
  systemMessages?: SystemMessagePlacement | 'auto';
  /** Overrides the default logprob semantics (vLLM `--logprobs-mode processed_logprobs` → 'processed'). */
  logprobSemantics?: LogprobSemantics;
  /** Engine id prefix; defaults to the profile kind (`sim@<url>` for the simulator). */
  idPrefix?: string;
  /** Budget of the request-body memo over all sessions, bytes (body-memo.ts; default 8 MiB, 0 = no reuse). */
  bodyMemoBytes?: number;
  /** Budget of the answers' remembered prompt ids over all sessions, bytes (answer-json.ts; default 8 MiB, 0 = no reuse). */
  answerMemoBytes?: number;
  /** Stream from the engine for streaming clients: `auto` (default) when the probe's streamed capture is sound. */
  stream?: EngineStreamSetting;
  now?: Clock;
  newId?: IdGenerator;
}

export class ChatModeEngine implements EngineClient {
  readonly kind: EngineKind;
  readonly id: string;
  readonly mode: CaptureMode = 'chat';
  private readonly url: string;
  private served: string | undefined;
  private reasoningField: ReasoningField;
  private readonly semantics: LogprobSemantics;
  private acceptsReturnTokenIds = true;
  private readonly probeOnce = onceUntilFailure(() => this.runProbe());
  private report: EngineProbeReport | null = null;
  private streamOk = false;
  private readonly now: Clock;
  private readonly newId: IdGenerator;
  private systemMessages: SystemMessagePlacement;
  private placementReason: string;
  /** The served model's end-of-think token id, asked of the engine at probe (undefined: none, or not asked). */
  private thinkCloseId: number | undefined;
  /** Serialises request bodies reusing the session's previous messages' bytes (body-memo.ts); bounded memory. */
  private readonly bodies: ChatBodyMemo;
  /** Parses answers reusing the session's previous prompt ids (answer-json.ts); bounded memory. */
  private readonly answers: EngineAnswerReader;

  constructor(
    private readonly profile: ChatEngineProfile,
    private readonly opts: ChatEngineOptions,
  ) {
    this.kind = profile.kind;
    this.url = opts.url.replace(/\/+$/, '');
    this.id = `${opts.idPrefix ?? profile.kind}@${this.url}`;
    this.served = opts.servedModel;
    this.reasoningField = opts.reasoningField ?? profile.defaultReasoningField;
    this.semantics = profile.captures ? (opts.logprobSemantics ?? profile.defaultLogprobSemantics) : 'none';
    this.now = opts.now ?? systemClock;
    this.newId = opts.newId ?? randomId;
    this.systemMessages = opts.systemMessages === 'in-place' ? 'in-place' : 'merge';
    this.placementReason = opts.systemMessages === 'auto' ? 'not detected yet' : 'configured';
    this.bodies = new ChatBodyMemo(opts.bodyMemoBytes);
    this.answers = new EngineAnswerReader(opts.answerMemoBytes);
  }

  /** Forget the session's remembered request body and prompt ids (its calls are over). */
  endSession(sessionId: string): void {
    this.bodies.forget(sessionId);
    this.answers.forget(sessionId);
  }

  /**
   * Feature probe, once at start-up: `GET /v1/models` for the served model, `GET /version` (vLLM) for the reasoning
   * field, `POST /tokenize` of the model families' end-of-think text (the id reasoning tokens are counted up to, see
   * chat-capture.ts reasoningTokenCount), and one 1-token completion to see which token fields come back (retrying without `return_token_ids` on
   * builds that reject it). A missing capture field does not fail the probe: it is reported, and every record then
   * carries a capture error.
   * @throws GatewayError 'upstream' when the engine is unreachable or the configured served model is not served.
   */
  probe(): Promise<void> {
    return this.probeOnce();
  }

  /** What the probe found (null before a successful probe). */
  probeReport(): EngineProbeReport | null {
    return this.report;
  }

  servedModel(): string {
    if (this.served === undefined) throw new GatewayError('internal', `engine ${this.id} has not been probed yet`);
    return this.served;
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return engineHeaders(this.opts.apiKey, extra);
  }

  private async runProbe(): Promise<void> {
    const http = { timeoutMs: this.opts.timeoutMs, headers: this.headers() };
    const { served, ids } = await probeServedModel(this.url, this.id, this.served, http);
    this.served = served;
    if (this.profile.probeVersion && this.opts.reasoningField === undefined) {
      try {
        const info = (await engineFetchJson(`${this.url}/version`, { method: 'GET' }, http, 'version')) as { version?: unknown };
        if (typeof info.version === 'string') this.reasoningField = versionAtLeast(info.version, 0, 10) ? 'reasoning' : 'reasoning_content';
      } catch {
        // no /version: keep the default field
      }
    }
    if (this.opts.systemMessages === 'auto') {
      if (this.profile.tokenizesMessages) {
        ({ placement: this.systemMessages, reason: this.placementReason } = await detectSystemPlacement(this.url, this.served, http));
      } else {
        this.placementReason = `engine ${this.kind} cannot render a conversation without sampling; keeping merge`;
      }
    }
    let sources: CaptureSources = { promptIds: null, responseIds: null, logprobs: null };
    let captureError: string | null = null;
    if (this.profile.captures) {
      this.thinkCloseId = await probeThinkCloseId(this.url, this.served, http);
      const tiny: IRRequest = {
        version: 1, model: this.served, messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }], tools: [],
        sampling: { maxTokens: 1, temperature: 0 }, stream: false, warnings: [],
      };
      let raw: unknown;
      try {
        raw = await this.post(tiny, { sessionId: 'polar-probe', requestId: 'probe' });
      } catch (thrown) {
        if (!(this.profile.optionalReturnTokenIds && thrown instanceof GatewayError && thrown.kind === 'invalid-request')) throw thrown;
        this.acceptsReturnTokenIds = false;
        raw = await this.post(tiny, { sessionId: 'polar-probe', requestId: 'probe' });
      }
      ({ sources, capture: { captureError } } = extractChatCapture(raw, this.semantics));
    }
    const streamCapture = await this.probeStream();
    this.report = {
      servedModel: this.served,
      models: ids,
      reasoningField: this.reasoningField,
      acceptsReturnTokenIds: this.acceptsReturnTokenIds,
      thinkCloseId: this.thinkCloseId ?? null,
      captureFields: sources,
      captureError,
      streamCapture,
      systemMessages: { placement: this.systemMessages, auto: this.opts.systemMessages === 'auto', reason: this.placementReason },
    };
  }

  /** `engine.stream: auto`: one streamed 1-token completion; streaming is used when its capture is sound. */
  private async probeStream(): Promise<EngineProbeReport['streamCapture']> {
    const setting = this.opts.stream ?? 'auto';
    this.streamOk = setting === 'always';
    if (setting !== 'auto') return null;
    const tiny: IRRequest = {
      version: 1, model: this.served!, messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }], tools: [],
      sampling: { maxTokens: 1, temperature: 0 }, stream: true, warnings: [],
    };
    try {
      const done = await this.streamCall(tiny, { sessionId: 'polar-probe', requestId: 'probe-stream' }, () => {});
      const error = done.capture?.captureError ?? null;
      this.streamOk = error === null;
      return { ok: this.streamOk, error };
    } catch (thrown) {
      return { ok: false, error: thrown instanceof Error ? thrown.message : String(thrown) };
    }
  }

  streams(): boolean {
    return this.streamOk;
  }

  /**
   * One streamed chat completion with token capture (see EngineClient.stream).
   * @throws GatewayError as `complete` does, before the first event; 'upstream' when the stream breaks off later.
   */
  async stream(request: IRRequest, ctx: EngineCallContext, onEvent: (event: EngineStreamEvent) => void): Promise<EngineCompletion> {
    await this.probe();
    return this.streamCall(request, ctx, onEvent);
  }

  private async streamCall(request: IRRequest, ctx: EngineCallContext, onEvent: (event: EngineStreamEvent) => void): Promise<EngineCompletion> {
    const started = this.now();
    const warnings: Warning[] = [];
    const body = this.body(request, ctx, warnings);
    body.stream = true;
    body.stream_options = { include_usage: true };
    const what = `engine ${this.id}`;
    const { response: answer, timedOut } = await engineFetchStream(`${this.url}/v1/chat/completions`, body, this.http(ctx), what, this.bodies.encode(ctx.sessionId, body));
    onEvent({ type: 'answered' });
    const chunks = new ChatChunkAccumulator(this.newId);
    const emitter = new DeltaEmitter(onEvent);
    let promptSent = false;
    try {
      for await (const data of sseData(answer.body!, what)) {
        // The chunk that echoes the prompt ids (vLLM's first) is read like a whole answer, incrementally per session.
        const chunk = parseEventData(data, what, this.profile.captures ? (bytes) => this.answers.parse(bytes, ctx.sessionId) : undefined);
        if (!chunk || typeof chunk !== 'object') continue;
        const inBand = (chunk as { error?: unknown }).error;
        if (inBand !== undefined) throw new GatewayError('upstream', `${what} failed mid-stream: ${JSON.stringify(inBand).slice(0, 500)}`);
        const before = chunks.promptLength;
        if (!promptSent && before !== null) {
          onEvent({ type: 'prompt', inputTokens: before });
          promptSent = true;
        }
        chunks.push(chunk as Record<string, unknown>, emitter);
        if (!promptSent && chunks.promptLength !== null) {
          onEvent({ type: 'prompt', inputTokens: chunks.promptLength });
          promptSent = true;
        }
      }
      if (!chunks.finished) throw new GatewayError('upstream', brokeOff(what));
    } catch (thrown) {
      if (timedOut()) throw new GatewayError('timeout', `${what} did not finish its stream within ${this.opts.timeoutMs} ms`, { cause: thrown });
      throw thrown;
    }
    const raw = chunks.body();
    return this.completion(raw, request, warnings, this.now() - started, emitter);
  }

  /**
   * The completion of an engine answer (the streamed one as accumulated): the decoded response, its capture and its
   * reasoning-token count, read the same way for both paths; a stream's `emitter` then sends what it still owes.
   */
  private completion(raw: unknown, request: IRRequest, warnings: Warning[], engineMs: number, emitter?: DeltaEmitter): EngineCompletion {
    const response = decodeEngineResponse(raw, request.model, this.now, this.newId);
    if (emitter) warnings.push(...emitter.finish(response));
    let capture = null;
    if (this.profile.captures) capture = extractChatCapture(raw, this.semantics).capture;
    else warnings.push({ code: 'no-token-capture', message: `engine kind "${this.kind}" returns no token ids or logprobs; this completion cannot be trained on` });
    response.usage.reasoningTokens = reasoningTokenCount(response, engineReasoningTokens(raw), capture?.responseIds ?? [], this.thinkCloseId);
    return { response, capture, policyVersion: engineWeightVersion(raw), warnings, engineMs };
  }

  private http(ctx: EngineCallContext) {
    const headers = this.headers({ 'x-polar-session': ctx.sessionId, ...(ctx.taskId ? { 'x-polar-task': ctx.taskId } : {}) });
    return { timeoutMs: this.opts.timeoutMs, headers, signal: ctx.signal };
  }

  private post(request: IRRequest, ctx: EngineCallContext, warnings: Warning[] = []): Promise<unknown> {
    const bodyBytes = this.bodies.encode(ctx.sessionId, this.body(request, ctx, warnings));
    const parse = this.profile.captures ? (bytes: Uint8Array) => this.answers.parse(bytes, ctx.sessionId) : undefined;
    return engineFetchJson(`${this.url}/v1/chat/completions`, { method: 'POST', bodyBytes, ...(parse ? { parse } : {}) }, this.http(ctx), `engine ${this.id}`);
  }

  private body(request: IRRequest, ctx: EngineCallContext, warnings: Warning[]): Record<string, unknown> {
    const { body, warnings: built } = buildChatRequest(request, {
      servedModel: this.served ?? request.model,
      defaults: this.opts.defaults,
      reasoningField: this.reasoningField,
      systemMessages: this.systemMessages,
      extra: { ...this.profile.captureFlags({ acceptsReturnTokenIds: this.acceptsReturnTokenIds }), ...this.profile.perCallFields?.(ctx) },
    });
    warnings.push(...built);
    return body;
  }

  /**
   * One non-streaming chat completion with token capture.
   * @throws GatewayError 'upstream' (unreachable, 5xx, no choices), 'timeout', 'context-overflow', 'invalid-request', 'aborted'.
   */
  async complete(request: IRRequest, ctx: EngineCallContext): Promise<EngineCompletion> {
    await this.probe();
    // The injected clock (not performance.now) so records are reproducible in tests.
    const started = this.now();
    const warnings: Warning[] = [];
    const raw = await this.post(request, ctx, warnings);
    return this.completion(raw, request, warnings, this.now() - started);
  }

  /**
   * Prompt length in tokens as the engine renders it: `POST /tokenize` with the chat messages and tools and
   * `add_generation_prompt: true` (vLLM and the simulator; returns `{count, tokens}`).
   * @throws GatewayError 'upstream' when the engine has no /tokenize or fails.
   */
  async countTokens(request: IRRequest, ctx: EngineCallContext): Promise<number> {
    await this.probe();
    const { body } = buildChatRequest(request, { servedModel: this.servedModel(), defaults: this.opts.defaults, reasoningField: this.reasoningField, systemMessages: this.systemMessages });
    const tokenize: Record<string, unknown> = { model: body.model, messages: body.messages, add_generation_prompt: true };
    if (body.tools) tokenize.tools = body.tools;
    if (body.chat_template_kwargs) tokenize.chat_template_kwargs = body.chat_template_kwargs;
    const headers = this.headers({ 'x-polar-session': ctx.sessionId });
    const answer = (await engineFetchJson(`${this.url}/tokenize`, { method: 'POST', body: tokenize }, { timeoutMs: this.opts.timeoutMs, headers, signal: ctx.signal }, `engine ${this.id} /tokenize`)) as {
      count?: unknown;
      tokens?: unknown;
    };
    if (typeof answer.count === 'number') return answer.count;
    if (Array.isArray(answer.tokens)) return answer.tokens.length;
    throw new GatewayError('upstream', `engine ${this.id} /tokenize answered without count or tokens`);
  }
}

/** The end-of-think texts of the model families (`</think>`), each asked of the engine once. */
const THINK_CLOSE_TEXTS = [...new Set(Object.values(MODEL_FAMILIES).flatMap((family) => (family.thinkClose === null ? [] : [family.thinkClose])))];

/**
 * The served model's end-of-think token id: `POST /tokenize` `{model, prompt, add_special_tokens: false}` of each
 * family's end-of-think text (vLLM's Tokenizer API; the simulator and SGLang builds with /tokenize answer alike) and
 * the first that is one token. Undefined when none is (a model without think tokens) or the engine cannot tokenize.
 * https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html#tokenizer-api
 */
async function probeThinkCloseId(url: string, served: string, http: { timeoutMs: number; headers: Record<string, string> }): Promise<number | undefined> {
  for (const text of THINK_CLOSE_TEXTS) {
    try {
      const answer = (await engineFetchJson(`${url}/tokenize`, { method: 'POST', body: { model: served, prompt: text, add_special_tokens: false } }, http, 'tokenize')) as { tokens?: unknown };
      const tokens = answer.tokens;
      if (Array.isArray(tokens) && tokens.length === 1 && Number.isInteger(tokens[0])) return tokens[0] as number;
    } catch {
      // no /tokenize on this engine: reasoning tokens come from the engine's own count only
    }
  }
  return undefined;
}

function versionAtLeast(version: string, major: number, minor: number): boolean {
  const [a, b] = version.split('.').map((n) => Number.parseInt(n, 10));
  if (a === undefined || Number.isNaN(a)) return true;
  return a > major || (a === major && (b ?? 0) >= minor);
}
