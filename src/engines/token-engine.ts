/**
 * Token mode (beyond Polar): the proxy renders the chat template and tokenises itself, keeps each session's exact
 * token buffer, sends token ids to the engine's token endpoint and parses tool calls and reasoning from the sampled
 * text. The engine then sees exactly the tokens that will be trained on, and `prefix_merging` keeps every
 * append-only conversation in one chain. A golden check (golden-check.ts) compares our full rendering with the
 * engine's own: at start-up a mismatch refuses to serve (unless `allowGoldenMismatch`), on a sample of later turns it
 * is logged and counted.
 * Streaming clients are served from the engine's streamed token endpoint (token-backends.ts `TokenStreaming`).
 * Sources: docs/architecture.md#chat-mode-and-token-mode, docs/protocol-notes.md#inference-engines, docs/protocol-notes.md#qwen3-tokenizer-and-chat-template.
 */
import { placementFromRenderer } from './system-placement.ts';
import type { Clock } from '../core/clock.ts';
import { systemClock } from '../core/clock.ts';
import { GatewayError } from '../core/errors.ts';
import type { IdGenerator } from '../core/ids.ts';
import { randomId } from '../core/ids.ts';
import type { IRContentPart, IRRequest, IRResponse, IRToolCall, Warning } from '../core/ir.ts';
import type { TokenIds } from '../core/int32-twin.ts';
import type { ChatMessage, ChatTool } from '../tokenization/chat-messages.ts';
import { detectModelFamily, resolveFamilyIds, type FamilyIds, type ModelFamily } from '../tokenization/families.ts';
import { SessionTokenBuffers, type PromptPlan, type RenderSettings, type TokenBufferOptions, type TokenBufferStats } from '../tokenization/token-buffer.ts';
import { loadTokenizer, type LoadedTokenizer } from '../tokenization/tokenizer.ts';
import { buildChatRequest, type SamplingDefaults, type SystemMessagePlacement } from './chat-request.ts';
import { DeltaEmitter } from './delta-emitter.ts';
import { engineFetchJson, engineFetchStream, engineHeaders, onceUntilFailure, probeServedModel } from './http.ts';
import { brokeOff, parseEventData, sseData } from './sse.ts';
import { parseEchoedAnswer } from './answer-json.ts';
import { PromptIdsJson, type IdsBody } from './prompt-ids-json.ts';
import { tokenStreamingFor, type TokenBackend, type TokenRequestInput, type TokenSampling } from './token-backends.ts';
import { IncrementalDecoder, TaggedTextSplitter } from './token-stream.ts';
import type {
  CaptureMode, EngineCallContext, EngineClient, EngineCompletion, EngineKind, EngineProbeReport, EngineStreamEvent, EngineStreamSetting, TokenCapture,
} from './types.ts';
import type { LogprobSemantics } from '../core/records.ts';
import { GOLDEN_CONVERSATION, GOLDEN_TEXT_ONLY, GoldenChecker, type GoldenStats } from './golden-check.ts';

export interface TokenEngineOptions {
  url: string;
  apiKey?: string;
  /** Served model name; without it the first model of `GET /v1/models` is used. */
  servedModel?: string;
  /** Per-call limit in ms (0 = none). */
  timeoutMs: number;
  defaults: SamplingDefaults;
  /** Hugging Face model directory of the served model (tokenizer.json, tokenizer_config.json / chat_template.jinja); absent = embedded Qwen3. */
  tokenizerDir?: string;
  /** Model family override (a `MODEL_FAMILIES` name); default: detected from the chat template. */
  family?: string;
  /**
   * Serve even when the start-up golden check finds our rendering differs from the engine's (the mismatch is still
   * logged and counted). Default false: the probe fails with `GoldenMismatchError` and every call keeps failing.
   */
  allowGoldenMismatch?: boolean;
  /**
   * Fraction of turns, in [0, 1], whose full rendering is compared with the engine's own (off the hot path).
   * Deterministic: every 1/rate-th turn. Default 0.02. The start-up check always runs.
   */
  goldenRate?: number;
  buffers?: TokenBufferOptions;
  /**
   * A slot shared by several clients (engine replicas, replicas.ts): the first to probe fills it with its per-session
   * token buffers and every client uses those, so a session that moves replicas keeps its exact token history.
   */
  sharedBuffers?: { buffers: SessionTokenBuffers | null };
  logprobSemantics?: LogprobSemantics;
  /** Placement of later system messages (default merge into the leading one). */
  /** `auto`: decided at probe time by rendering with our own chat template (./system-placement.ts). */
  systemMessages?: SystemMessagePlacement | 'auto';
  /** Engine id prefix (default: the kind; `sim` for the simulator). */
  idPrefix?: string;
  /** Stream from the engine for streaming clients: `auto` (default) when the probe's streamed capture is sound. */
  stream?: EngineStreamSetting;
  /** Budget of the prompt ids' JSON kept per session to write the next prompt incrementally, bytes (prompt-ids-json.ts; default 24 MiB, 0 = none kept). */
  promptJsonBytes?: number;
  now?: Clock;
  newId?: IdGenerator;
  /** Where golden-check mismatches are reported (default console.warn). */
  log?: (message: string) => void;
}

/** One turn between preparing the prompt and reading the engine's answer. */
interface TurnPlan {
  messages: ChatMessage[];
  settings: RenderSettings;
  plan: PromptPlan;
  warnings: Warning[];
  sampling: TokenSampling;
}

/** Token-mode statistics exposed on the proxy's health document. */
export type TokenEngineStats = {
  mode: 'token';
  family: string | null;
  token_buffer: TokenBufferStats | null;
  golden: GoldenStats;
};

/**
 * The start-up golden check found that our rendering of the fixed conversation differs from the engine's: token mode
 * would train on other tokens than the engine sampled from. Fix `engine.tokenizer` / `--tokenizer` (the served model's
 * own directory) or accept it knowingly with `allowGoldenMismatch`.
 */
export class GoldenMismatchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GoldenMismatchError';
  }
}

export class TokenModeEngine implements EngineClient {
  readonly kind: EngineKind;
  readonly id: string;
  readonly mode: CaptureMode = 'token';
  private readonly url: string;
  private served: string | undefined;
  private maxModelLen: number | null = null;
  private tokenizer: LoadedTokenizer | null = null;
  private family: ModelFamily | null = null;
  private familyIds: FamilyIds | null = null;
  private buffers: SessionTokenBuffers | null = null;
  /** Placement of later system messages: as configured, or (`auto`) decided by the probe. */
  private systemMessages: SystemMessagePlacement = 'merge';
  private readonly probeOnce = onceUntilFailure(() => this.runProbe());
  private report: EngineProbeReport | null = null;
  private readonly semantics: LogprobSemantics;
  private readonly now: Clock;
  private readonly newId: IdGenerator;
  private readonly log: (message: string) => void;
  private readonly golden: GoldenChecker;
  private readonly pending = new Set<Promise<void>>();
  private readonly promptJson: PromptIdsJson;
  private streamOk = false;

  /** @throws Error when `goldenRate` is outside [0, 1]. */
  constructor(
    private readonly backend: TokenBackend,
    private readonly opts: TokenEngineOptions,
  ) {
    this.kind = backend.kind;
    this.systemMessages = opts.systemMessages === 'in-place' ? 'in-place' : 'merge';
    this.url = opts.url.replace(/\/+$/, '');
    this.id = `${opts.idPrefix ?? backend.kind}@${this.url}`;
    this.served = opts.servedModel;
    this.semantics = opts.logprobSemantics ?? 'raw';
    this.now = opts.now ?? systemClock;
    this.newId = opts.newId ?? randomId;
    this.log = opts.log ?? ((message) => console.warn(message));
    this.promptJson = new PromptIdsJson(opts.promptJsonBytes);
    this.golden = new GoldenChecker({
      url: this.url, id: this.id, kind: this.kind, timeoutMs: opts.timeoutMs, rate: opts.goldenRate ?? 0.02, log: this.log,
      headers: (extra) => this.headers(extra),
    });
  }

  /**
   * Start-up: load the tokenizer and chat template, detect the model family, ask the engine for its models
   * (`GET /v1/models`), run one 1-token generation to check the token fields, and run the golden check.
   * @throws Error when the tokenizer directory is unusable or the family unknown; GatewayError 'upstream' when the
   *   engine is unreachable or does not serve the configured model.
   */
  probe(): Promise<void> {
    return this.probeOnce();
  }

  probeReport(): EngineProbeReport | null {
    return this.report;
  }

  servedModel(): string {
    if (this.served === undefined) throw new GatewayError('internal', `engine ${this.id} has not been probed yet`);
    return this.served;
  }

  /** Token-buffer and golden-check counters (exposed on the proxy's `GET /`). */
  stats(): TokenEngineStats {
    return { mode: 'token', family: this.family?.name ?? null, token_buffer: this.buffers?.stats() ?? null, golden: this.golden.stats() };
  }

  /** Drop a session's token buffers (its session ended); a later request of it gets a full render. */
  endSession(sessionId: string): void {
    this.buffers?.endSession(sessionId);
    this.promptJson.forget(sessionId);
  }

  /** Resolves when every golden check started so far has finished (tests, orderly shutdown). */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return engineHeaders(this.opts.apiKey, extra);
  }

  private async runProbe(): Promise<void> {
    const tokenizer = await loadTokenizer(this.opts.tokenizerDir);
    const family = detectModelFamily(tokenizer, this.opts.family);
    this.familyIds = resolveFamilyIds(tokenizer, family);
    this.tokenizer = tokenizer;
    this.family = family;
    const shared = this.opts.sharedBuffers;
    if (shared) this.buffers = shared.buffers ??= new SessionTokenBuffers(tokenizer, family, this.opts.buffers);
    else this.buffers ??= new SessionTokenBuffers(tokenizer, family, this.opts.buffers);
    this.maxModelLen = tokenizer.modelMaxLength;

    const http = { timeoutMs: this.opts.timeoutMs, headers: this.headers() };
    const { served, listed, ids } = await probeServedModel(this.url, this.id, this.served, http);
    this.served = served;
    const listedLen = listed.find((m) => m.id === this.served)?.max_model_len;
    if (typeof listedLen === 'number' && listedLen > 0) this.maxModelLen = listedLen;

    let placementReason = this.opts.systemMessages === 'auto' ? '' : 'configured';
    if (this.opts.systemMessages === 'auto') {
      ({ placement: this.systemMessages, reason: placementReason } = await placementFromRenderer((messages) => tokenizer.renderChatIds(messages, { addGenerationPrompt: true }).length));
    }
    // One 1-token generation: an engine without the token endpoint or its fields is found at start-up, not per call.
    const promptIds = tokenizer.renderChatIds([{ role: 'user', content: 'hi' }]);
    const raw = await this.post(promptIds, { ...this.resolveSampling({}, promptIds.length), maxTokens: 1, temperature: 0 }, { sessionId: 'polar-probe', requestId: 'probe' });
    const probeResult = this.backend.read(raw, promptIds);
    this.report = {
      servedModel: this.served,
      models: ids,
      reasoningField: 'reasoning_content',
      acceptsReturnTokenIds: true,
      captureFields: { promptIds: 'sent by the proxy', responseIds: this.backend.fields.responseIds, logprobs: this.backend.fields.logprobs },
      captureError: probeResult.problems.length > 0 ? probeResult.problems.join('; ') : null,
      streamCapture: await this.probeStream(promptIds),
      systemMessages: { placement: this.systemMessages, auto: this.opts.systemMessages === 'auto', reason: placementReason },
    };
    const golden = family.toolCallFormat === 'none' ? GOLDEN_TEXT_ONLY : GOLDEN_CONVERSATION;
    const mismatchesBefore = this.golden.stats().mismatches;
    await this.golden.check(tokenizer, family, this.served, golden.messages, { tools: golden.tools }, true);
    if (this.golden.stats().mismatches > mismatchesBefore && this.opts.allowGoldenMismatch !== true) {
      throw new GoldenMismatchError(
        `token mode refuses to start: our ${family.name} chat template rendering (tokenizer ${tokenizer.dir ?? 'embedded Qwen3'}) differs from engine ${this.id}'s at ${this.golden.stats().lastMismatch}; ` +
          'point engine.tokenizer / --tokenizer at the served model\'s directory, or accept it knowingly with engine.allow_golden_mismatch / --allow-golden-mismatch',
      );
    }
  }

  /** `engine.stream: auto`: one streamed 1-token generation; streaming is used when its capture is sound. */
  private async probeStream(promptIds: number[]): Promise<EngineProbeReport['streamCapture']> {
    const setting = this.opts.stream ?? 'auto';
    this.streamOk = setting === 'always';
    if (setting !== 'auto') return null;
    try {
      const sampling = { ...this.resolveSampling({}, promptIds.length), maxTokens: 1, temperature: 0 };
      const raw = await this.streamPost(promptIds, sampling, { sessionId: 'polar-probe', requestId: 'probe-stream' }, new DeltaEmitter(() => {}), false);
      const problems = this.backend.read(raw, promptIds).problems;
      this.streamOk = problems.length === 0;
      return { ok: this.streamOk, error: problems.length > 0 ? problems.join('; ') : null };
    } catch (thrown) {
      return { ok: false, error: thrown instanceof Error ? thrown.message : String(thrown) };
    }
  }

  private post(promptIds: TokenIds, sampling: TokenSampling, ctx: EngineCallContext, responseFormat?: IRRequest['responseFormat']): Promise<unknown> {
    const sent = this.idsBody(this.backend.body(this.tokenInput(promptIds, sampling, ctx, responseFormat)), promptIds, ctx);
    // An engine that echoes the prompt (vLLM's prompt_token_ids) has its echo compared as bytes with what was sent.
    const parse = (bytes: Uint8Array) => parseEchoedAnswer(bytes, sent.digits, promptIds);
    return engineFetchJson(`${this.url}${this.backend.path}`, { method: 'POST', bodyBytes: sent.bytes, parse }, { timeoutMs: this.opts.timeoutMs, headers: this.engineCallHeaders(ctx), signal: ctx.signal }, `engine ${this.id}`);
  }

  private tokenInput(promptIds: TokenIds, sampling: TokenSampling, ctx: EngineCallContext, responseFormat?: IRRequest['responseFormat']): TokenRequestInput {
    return { promptIds, sampling, stopIds: this.familyIds!.stopIds, servedModel: this.served ?? '', ctx, ...(responseFormat ? { responseFormat } : {}) };
  }

  /** A backend's body as bytes, its prompt ids written incrementally per session (prompt-ids-json.ts). */
  private idsBody(body: Record<string, unknown>, promptIds: TokenIds, ctx: EngineCallContext): IdsBody {
    const { [this.backend.idsKey]: _ids, ...rest } = body;
    return this.promptJson.body(ctx.sessionId, this.backend.idsKey, promptIds, rest);
  }

  private engineCallHeaders(ctx: EngineCallContext): Record<string, string> {
    return this.headers({ 'x-polar-session': ctx.sessionId, ...(ctx.taskId ? { 'x-polar-task': ctx.taskId } : {}) });
  }

  private resolveSampling(s: IRRequest['sampling'], promptLength: number): TokenSampling {
    const d = this.opts.defaults;
    // Always explicit: engine defaults (SGLang 128, vLLM 16 new tokens) would silently cut turns.
    const room = this.maxModelLen !== null ? this.maxModelLen - promptLength : null;
    // A cap beyond the context's room (a task's max_new_tokens late in a long session) would make the engine refuse
    // the whole call; the room is what can be sampled anyway.
    const asked = s.maxTokens ?? d.maxTokens ?? (room !== null && room > 0 ? room : 8192);
    const maxTokens = room !== null && room > 0 ? Math.min(asked, room) : asked;
    const out: TokenSampling = {
      temperature: s.temperature ?? d.temperature,
      topP: s.topP ?? d.topP,
      topK: s.topK ?? d.topK,
      minP: s.minP ?? d.minP,
      maxTokens,
    };
    if (s.seed !== undefined) out.seed = s.seed;
    if (s.presencePenalty !== undefined) out.presencePenalty = s.presencePenalty;
    if (s.frequencyPenalty !== undefined) out.frequencyPenalty = s.frequencyPenalty;
    return out;
  }

  /** IR → the chat messages and template settings our renderer takes (the same translation chat mode sends). */
  private chatInput(request: IRRequest, warnings: Warning[]): { messages: ChatMessage[]; settings: RenderSettings } {
    const { body, warnings: built, nonText } = buildChatRequest(request, { servedModel: this.served ?? request.model, defaults: this.opts.defaults, reasoningField: 'reasoning_content', systemMessages: this.systemMessages });
    warnings.push(...built);
    const messages = body.messages as ChatMessage[];
    // Known from the encoder's run: walking every message to look cost a cache miss per message at turn 200.
    if (nonText) {
      warnings.push({ code: 'token-mode-image-dropped', message: 'token mode renders text only: images in the messages were left out of the prompt' });
    }
    // The chat encoder states the thinking switch as vLLM's `enable_thinking`; the family maps it to its own kwarg.
    const kwargs = body.chat_template_kwargs as { enable_thinking?: boolean } | undefined;
    const settings: RenderSettings = { tools: (body.tools as ChatTool[] | undefined) ?? [] };
    if (kwargs?.enable_thinking !== undefined) settings.enableThinking = kwargs.enable_thinking;
    if (request.toolChoice !== undefined && request.toolChoice !== 'auto' && settings.tools.length > 0) {
      // The token endpoints sample from the rendered prompt; nothing forces or forbids the family's tool-call syntax.
      const choice = typeof request.toolChoice === 'string' ? `"${request.toolChoice}"` : `{name: "${request.toolChoice.name}"}`;
      warnings.push({ code: 'tool-choice-not-enforced', message: `token mode: tool_choice ${choice} is not enforced; the model sees the tools and its answer is parsed as with "auto"` });
    }
    if (request.responseFormat && settings.enableThinking !== false && this.familyIds?.thinkClose !== undefined) {
      // The token endpoints apply the grammar from the first sampled token, so a think block could never be sampled:
      // render the turn with thinking off (the template closes an empty think block) and say so.
      settings.enableThinking = false;
      warnings.push({ code: 'structured-output-thinking-off', message: 'token mode: a structured-output request is rendered with thinking off, because the engine applies the JSON grammar from the first sampled token' });
    }
    return { messages, settings };
  }

  /**
   * One completion in token mode: plan the prompt from the session's token buffer, sample through the token endpoint,
   * parse the sampled text, and extend the buffer with the exact sampled ids.
   * Stop strings are not sent to the engine (turns end on stop ids only, so text and ids stay in step); they are
   * applied to the returned text after sampling, with a `stop-applied-after-sampling` warning, and the record keeps
   * every sampled id.
   * @throws GatewayError 'upstream' (unreachable, 5xx, bad body), 'timeout', 'context-overflow', 'invalid-request'
   *   (engine 400, or messages the chat template rejects), 'aborted'.
   */
  async complete(request: IRRequest, ctx: EngineCallContext): Promise<EngineCompletion> {
    await this.probe();
    const turn = this.prepareTurn(request, ctx);
    const started = this.now();
    const raw = await this.post(turn.plan.promptIds, turn.sampling, ctx, request.responseFormat);
    return this.finishTurn(request, turn, raw, this.now() - started);
  }

  /**
   * Whether streaming clients get a streamed engine call. The incremental reasoning/content split (token-stream.ts)
   * reads the Qwen3/Qwen3.5 output shape only; other families' streaming clients get the synthetic stream of the
   * whole parsed answer.
   */
  streams(): boolean {
    return this.streamOk && (this.family?.toolCallFormat === 'hermes-json' || this.family?.toolCallFormat === 'qwen-xml');
  }

  /**
   * One streamed completion in token mode (see EngineClient.stream): the prompt length is reported before sampling,
   * reasoning and text are sent as the ids arrive (token-stream.ts), tool calls when the turn is complete; the record
   * is built from the accumulated answer exactly as `complete` builds it.
   * @throws GatewayError as `complete` does; 'upstream' when the stream breaks off.
   */
  async stream(request: IRRequest, ctx: EngineCallContext, onEvent: (event: EngineStreamEvent) => void): Promise<EngineCompletion> {
    await this.probe();
    const turn = this.prepareTurn(request, ctx);
    onEvent({ type: 'prompt', inputTokens: turn.plan.promptIds.length });
    const started = this.now();
    const emitter = new DeltaEmitter(onEvent, { trimLeadingNewlines: true, stops: request.sampling.stop ?? [] });
    const raw = await this.streamPost(turn.plan.promptIds, turn.sampling, ctx, emitter, turn.plan.promptOpenedThinking, () => onEvent({ type: 'answered' }), request.responseFormat);
    const done = this.finishTurn(request, turn, raw, this.now() - started);
    done.warnings.push(...emitter.finish(done.response));
    return done;
  }

  /** POST the streaming body and read the chunks; returns what `backend.read` takes. */
  private async streamPost(
    promptIds: TokenIds, sampling: TokenSampling, ctx: EngineCallContext, emitter: DeltaEmitter, promptOpenedThinking: boolean, onAnswered: () => void = () => {},
    responseFormat?: IRRequest['responseFormat'],
  ): Promise<unknown> {
    const streaming = tokenStreamingFor(this.backend);
    const body = streaming.body(this.tokenInput(promptIds, sampling, ctx, responseFormat));
    const sent = this.idsBody(body, promptIds, ctx);
    const what = `engine ${this.id}`;
    const { response, timedOut } = await engineFetchStream(`${this.url}${this.backend.path}`, body, { timeoutMs: this.opts.timeoutMs, headers: this.engineCallHeaders(ctx), signal: ctx.signal }, what, sent.bytes);
    onAnswered();
    const chunks = streaming.accumulator();
    const decoder = new IncrementalDecoder((ids) => this.tokenizer!.decode(ids));
    const splitter = new TaggedTextSplitter(emitter, promptOpenedThinking);
    try {
      for await (const data of sseData(response.body!, what)) {
        // The chunk that echoes the prompt (vLLM's first) has its echo compared as bytes with what was sent.
        const chunk = parseEventData(data, what, (bytes) => parseEchoedAnswer(bytes, sent.digits, promptIds));
        if (!chunk || typeof chunk !== 'object' || Array.isArray(chunk)) continue;
        const inBand = (chunk as { error?: unknown }).error;
        if (inBand !== undefined) throw new GatewayError('upstream', `${what} failed mid-stream: ${JSON.stringify(inBand).slice(0, 500)}`);
        splitter.push(decoder.push(chunks.push(chunk as Record<string, unknown>)));
      }
      if (!chunks.finished()) throw new GatewayError('upstream', brokeOff(what));
    } catch (thrown) {
      if (timedOut()) throw new GatewayError('timeout', `${what} did not finish its stream within ${this.opts.timeoutMs} ms`, { cause: thrown });
      throw thrown;
    }
    return chunks.body();
  }

  /** Everything before the engine call: render against the session's token buffer, resolve sampling, warnings. */
  private prepareTurn(request: IRRequest, ctx: EngineCallContext): TurnPlan {
    const warnings: Warning[] = [];
    const { messages, settings } = this.chatInput(request, warnings);
    let plan: PromptPlan;
    try {
      plan = this.buffers!.prepare(ctx.sessionId, messages, settings);
    } catch (thrown) {
      throw new GatewayError('invalid-request', `the chat template rejected the messages: ${thrown instanceof Error ? thrown.message : String(thrown)}`, { cause: thrown });
    }
    if (plan.reason !== null && plan.reason !== 'no-buffer') {
      warnings.push({ code: 'token-buffer-reset', message: `token mode started a new token buffer (${plan.reason}): this turn opens a new chain` });
    }
    if ((request.sampling.stop ?? []).length > 0) {
      warnings.push({ code: 'stop-applied-after-sampling', message: 'token mode ends turns on stop token ids only; stop strings were applied to the returned text after sampling, and the record keeps every sampled id' });
    }
    return { messages, settings, plan, warnings, sampling: this.resolveSampling(request.sampling, plan.promptIds.length) };
  }

  /** Everything after the engine answered: parse the sampled text, build the response and capture, extend the buffer. */
  private finishTurn(request: IRRequest, turn: TurnPlan, raw: unknown, engineMs: number): EngineCompletion {
    const { plan, settings, warnings } = turn;
    const result = this.backend.read(raw, plan.promptIds);
    const text = this.tokenizer!.decode(result.responseIds);
    const parsed = this.family!.parse(text, { promptOpenedThinking: plan.promptOpenedThinking, truncated: result.finish.unified === 'length', tools: settings.tools });
    const invalid = parsed.toolCalls.some((c) => c.parserInvalid);
    let content = trimNewlines(parsed.content);
    let matchedStop: string | undefined;
    for (const stop of request.sampling.stop ?? []) {
      const at = stop === '' ? -1 : content.indexOf(stop);
      if (at >= 0) {
        content = content.slice(0, at);
        matchedStop = stop;
      }
    }
    const reasoning = parsed.reasoning === null ? null : trimNewlines(parsed.reasoning);
    const calls: IRToolCall[] = parsed.toolCalls.map((call) => ({
      id: this.newId('call'), name: call.name, arguments: call.arguments.trim() === '' ? '{}' : call.arguments, ...(call.parserInvalid ? { parserInvalid: true } : {}),
    }));
    // A malformed call reaches the client as text (as vLLM's parsers return it); the record keeps it, flagged.
    const clientCalls = invalid ? [] : calls;
    const contentParts: IRContentPart[] = content.trim() === '' ? [] : [{ type: 'text', text: content }];
    let finish = result.finish;
    if (matchedStop !== undefined) finish = { unified: 'stop', raw: finish.raw ?? 'stop', stopSequence: matchedStop };
    else if (finish.unified === 'stop' && clientCalls.length > 0) finish = { unified: 'tool-calls', raw: finish.raw };
    const closeAt = this.familyIds!.thinkClose === undefined ? -1 : result.responseIds.indexOf(this.familyIds!.thinkClose);
    const response: IRResponse = {
      id: this.newId('cmpl'),
      model: request.model,
      content: contentParts,
      ...(reasoning !== null && reasoning !== '' ? { reasoning: { text: reasoning } } : {}),
      toolCalls: clientCalls,
      finishReason: finish,
      usage: {
        inputTokens: plan.promptIds.length,
        outputTokens: result.responseIds.length,
        cachedInputTokens: result.cachedTokens,
        // Families without a think block in text (gpt-oss's analysis channel): the reasoning text's own token count.
        reasoningTokens: reasoning === null ? 0 : this.family!.thinkClose === null ? this.tokenizer!.encode(reasoning).length : closeAt >= 0 ? closeAt : result.responseIds.length,
      },
      warnings: [],
      createdAt: this.now(),
    };
    if (invalid) warnings.push({ code: 'parser-invalid-tool-call', message: 'a sampled tool call is malformed; it was returned as text and flagged parserInvalid on the record' });

    const assistant: ChatMessage = {
      role: 'assistant',
      content,
      ...(reasoning !== null ? { reasoning_content: reasoning } : {}),
      ...(clientCalls.length > 0 ? { tool_calls: clientCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) } : {}),
    };
    if (result.problems.length === 0) this.buffers!.commit(plan, result.responseIds, assistant);

    const capture: TokenCapture = {
      promptIds: plan.promptIds,
      responseIds: result.responseIds,
      logprobs: result.logprobs,
      logprobSemantics: this.semantics,
      captureError: result.problems.length > 0 ? result.problems.join('; ') : null,
    };
    if (this.golden.takeSample()) {
      // After the reply is out: the check renders and encodes the whole conversation (2-9 ms at turn 200 of a Claude
      // Code session), which would otherwise delay this turn's answer.
      const afterReply = new Promise<void>((resolve) => setImmediate(resolve));
      this.track(afterReply.then(() => this.golden.check(this.tokenizer!, this.family!, this.served, turn.messages, settings, false)));
    }
    return { response, capture, policyVersion: result.weightVersion, warnings, engineMs, ...(invalid ? { recordToolCalls: calls } : {}) };
  }

  /**
   * Prompt length in tokens as rendered in full by our template (no engine call).
   * @throws GatewayError 'invalid-request' when the chat template rejects the messages.
   */
  async countTokens(request: IRRequest): Promise<number> {
    await this.probe();
    const { messages, settings } = this.chatInput(request, []);
    try {
      return this.tokenizer!.renderChatIds(messages, { tools: settings.tools, enableThinking: settings.enableThinking, addGenerationPrompt: true, family: this.family }).length;
    } catch (thrown) {
      throw new GatewayError('invalid-request', `the chat template rejected the messages: ${thrown instanceof Error ? thrown.message : String(thrown)}`, { cause: thrown });
    }
  }

  private track(work: Promise<void>): void {
    this.pending.add(work);
    void work.finally(() => this.pending.delete(work));
  }

}

function trimNewlines(text: string): string {
  return text.replace(/^\n+/, '').replace(/\n+$/, '');
}
