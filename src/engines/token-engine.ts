/**
 * Token mode (beyond Polar): the proxy renders the chat template and tokenises itself, keeps each session's exact
 * token buffer, sends token ids to the engine's token endpoint and parses tool calls and reasoning from the sampled
 * text. The engine then sees exactly the tokens that will be trained on, and `prefix_merging` keeps every
 * append-only conversation in one chain. A golden check compares our full rendering with the engine's own: at
 * start-up a mismatch refuses to serve (unless `allowGoldenMismatch`), on a sample of later turns it is logged and
 * counted.
 * Sources: docs/architecture.md#chat-mode-and-token-mode, docs/protocol-notes.md#inference-engines, docs/protocol-notes.md#qwen3-tokenizer-and-chat-template.
 */
import type { Clock } from '../core/clock.ts';
import { systemClock } from '../core/clock.ts';
import { GatewayError } from '../core/errors.ts';
import type { IdGenerator } from '../core/ids.ts';
import { randomId } from '../core/ids.ts';
import type { IRContentPart, IRRequest, IRResponse, IRToolCall, Warning } from '../core/ir.ts';
import type { ChatMessage, ChatTool } from '../tokenization/chat-messages.ts';
import { detectModelFamily, resolveFamilyIds, type FamilyIds, type ModelFamily } from '../tokenization/families.ts';
import { SessionTokenBuffers, type PromptPlan, type RenderSettings, type TokenBufferOptions, type TokenBufferStats } from '../tokenization/token-buffer.ts';
import { loadTokenizer, type LoadedTokenizer } from '../tokenization/tokenizer.ts';
import { buildChatRequest, type SamplingDefaults, type SystemMessagePlacement } from './chat-request.ts';
import { engineFetchJson, engineHeaders, onceUntilFailure, probeServedModel } from './http.ts';
import type { TokenBackend, TokenSampling } from './token-backends.ts';
import type { CaptureMode, EngineCallContext, EngineClient, EngineCompletion, EngineKind, EngineProbeReport, TokenCapture } from './types.ts';
import type { LogprobSemantics } from '../core/records.ts';

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
  logprobSemantics?: LogprobSemantics;
  /** Placement of later system messages (default merge into the leading one). */
  systemMessages?: SystemMessagePlacement;
  /** Engine id prefix (default: the kind; `sim` for the simulator). */
  idPrefix?: string;
  now?: Clock;
  newId?: IdGenerator;
  /** Where golden-check mismatches are reported (default console.warn). */
  log?: (message: string) => void;
}

/** Golden-check counters. */
export interface GoldenStats {
  checks: number;
  mismatches: number;
  /** The engine has no endpoint to render with (reported once at start-up, counted per skipped check). */
  unavailable: number;
  /** Checks that failed to run (engine error). */
  errors: number;
  /** The last mismatch, for the operator: where the two renderings diverge. */
  lastMismatch: string | null;
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

/** A fixed conversation for the start-up golden check: system, tools, reasoning, a tool call, a tool result, a reply. */
const GOLDEN_CONVERSATION: { messages: ChatMessage[]; tools: ChatTool[] } = {
  tools: [{ type: 'function', function: { name: 'bash', description: 'Run a shell command', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } } }],
  messages: [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'List the files, then say how many there are. ✓ ünïcode' },
    { role: 'assistant', content: '', reasoning_content: 'I should run ls.', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'bash', arguments: '{"command":"ls -1"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: 'a.py\nb.py' },
    { role: 'assistant', content: 'There are 2 files.' },
    { role: 'user', content: 'Thanks.' },
  ],
};

/** The golden conversation for a family without a tool-call format (its template rejects tool turns, e.g. Gemma 3). */
const GOLDEN_TEXT_ONLY: { messages: ChatMessage[]; tools: ChatTool[] } = {
  tools: [],
  messages: [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'How many files are there? ✓ ünïcode' },
    { role: 'assistant', content: 'There are 2 files.' },
    { role: 'user', content: 'Thanks.' },
  ],
};

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
  private readonly probeOnce = onceUntilFailure(() => this.runProbe());
  private report: EngineProbeReport | null = null;
  private readonly semantics: LogprobSemantics;
  private readonly now: Clock;
  private readonly newId: IdGenerator;
  private readonly log: (message: string) => void;
  private readonly goldenRate: number;
  private goldenCredit = 0;
  private goldenEndpoint: 'tokenize' | 'apply-template' | null = null;
  private readonly golden: GoldenStats = { checks: 0, mismatches: 0, unavailable: 0, errors: 0, lastMismatch: null };
  private readonly pending = new Set<Promise<void>>();

  /** @throws Error when `goldenRate` is outside [0, 1]. */
  constructor(
    private readonly backend: TokenBackend,
    private readonly opts: TokenEngineOptions,
  ) {
    this.kind = backend.kind;
    this.url = opts.url.replace(/\/+$/, '');
    this.id = `${opts.idPrefix ?? backend.kind}@${this.url}`;
    this.served = opts.servedModel;
    this.semantics = opts.logprobSemantics ?? 'raw';
    this.now = opts.now ?? systemClock;
    this.newId = opts.newId ?? randomId;
    this.log = opts.log ?? ((message) => console.warn(message));
    this.goldenRate = opts.goldenRate ?? 0.02;
    if (!(this.goldenRate >= 0 && this.goldenRate <= 1)) throw new Error(`goldenRate must be in [0, 1], got ${opts.goldenRate}`);
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
    return { mode: 'token', family: this.family?.name ?? null, token_buffer: this.buffers?.stats() ?? null, golden: { ...this.golden } };
  }

  /** Drop a session's token buffers (its session ended); a later request of it gets a full render. */
  endSession(sessionId: string): void {
    this.buffers?.endSession(sessionId);
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
    this.buffers ??= new SessionTokenBuffers(tokenizer, family, this.opts.buffers);
    this.maxModelLen = tokenizer.modelMaxLength;

    const http = { timeoutMs: this.opts.timeoutMs, headers: this.headers() };
    const { served, listed, ids } = await probeServedModel(this.url, this.id, this.served, http);
    this.served = served;
    const listedLen = listed.find((m) => m.id === this.served)?.max_model_len;
    if (typeof listedLen === 'number' && listedLen > 0) this.maxModelLen = listedLen;

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
    };
    const golden = family.toolCallFormat === 'none' ? GOLDEN_TEXT_ONLY : GOLDEN_CONVERSATION;
    const mismatchesBefore = this.golden.mismatches;
    await this.goldenCheck(golden.messages, { tools: golden.tools }, true);
    if (this.golden.mismatches > mismatchesBefore && this.opts.allowGoldenMismatch !== true) {
      throw new GoldenMismatchError(
        `token mode refuses to start: our ${family.name} chat template rendering (tokenizer ${tokenizer.dir ?? 'embedded Qwen3'}) differs from engine ${this.id}'s at ${this.golden.lastMismatch}; ` +
          'point engine.tokenizer / --tokenizer at the served model\'s directory, or accept it knowingly with engine.allow_golden_mismatch / --allow-golden-mismatch',
      );
    }
  }

  private post(promptIds: readonly number[], sampling: TokenSampling, ctx: EngineCallContext): Promise<unknown> {
    const body = this.backend.body({ promptIds, sampling, stopIds: this.familyIds!.stopIds, servedModel: this.served ?? '', ctx });
    const headers = this.headers({ 'x-polar-session': ctx.sessionId, ...(ctx.taskId ? { 'x-polar-task': ctx.taskId } : {}) });
    return engineFetchJson(`${this.url}${this.backend.path}`, { method: 'POST', body }, { timeoutMs: this.opts.timeoutMs, headers, signal: ctx.signal }, `engine ${this.id}`);
  }

  private resolveSampling(s: IRRequest['sampling'], promptLength: number): TokenSampling {
    const d = this.opts.defaults;
    // Always explicit: engine defaults (SGLang 128, vLLM 16 new tokens) would silently cut turns.
    const room = this.maxModelLen !== null ? this.maxModelLen - promptLength : null;
    const maxTokens = s.maxTokens ?? d.maxTokens ?? (room !== null && room > 0 ? room : 8192);
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
    const { body, warnings: built } = buildChatRequest(request, { servedModel: this.served ?? request.model, defaults: this.opts.defaults, reasoningField: 'reasoning_content', systemMessages: this.opts.systemMessages });
    warnings.push(...built);
    const messages = body.messages as ChatMessage[];
    if (messages.some((m) => Array.isArray(m.content) && m.content.some((p) => p.type !== 'text'))) {
      warnings.push({ code: 'token-mode-image-dropped', message: 'token mode renders text only: images in the messages were left out of the prompt' });
    }
    // The chat encoder states the thinking switch as vLLM's `enable_thinking`; the family maps it to its own kwarg.
    const kwargs = body.chat_template_kwargs as { enable_thinking?: boolean } | undefined;
    const settings: RenderSettings = { tools: (body.tools as ChatTool[] | undefined) ?? [] };
    if (kwargs?.enable_thinking !== undefined) settings.enableThinking = kwargs.enable_thinking;
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
    const tokenizer = this.tokenizer!;
    const family = this.family!;
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
    const stops = request.sampling.stop ?? [];
    if (stops.length > 0) {
      warnings.push({ code: 'stop-applied-after-sampling', message: 'token mode ends turns on stop token ids only; stop strings were applied to the returned text after sampling, and the record keeps every sampled id' });
    }
    const started = this.now();
    const raw = await this.post(plan.promptIds, this.resolveSampling(request.sampling, plan.promptIds.length), ctx);
    const engineMs = this.now() - started;
    const result = this.backend.read(raw, plan.promptIds);

    const text = tokenizer.decode(result.responseIds);
    const parsed = family.parse(text, { promptOpenedThinking: plan.promptOpenedThinking, tools: settings.tools });
    const invalid = parsed.toolCalls.some((c) => c.parserInvalid);
    let content = trimNewlines(parsed.content);
    for (const stop of stops) {
      const at = stop === '' ? -1 : content.indexOf(stop);
      if (at >= 0) content = content.slice(0, at);
    }
    const reasoning = parsed.reasoning === null ? null : trimNewlines(parsed.reasoning);
    const calls: IRToolCall[] = parsed.toolCalls.map((call) => ({ id: this.newId('call'), name: call.name, arguments: call.arguments, ...(call.parserInvalid ? { parserInvalid: true } : {}) }));
    // A malformed call reaches the client as text (as vLLM's parsers return it); the record keeps it, flagged.
    const clientCalls = invalid ? [] : calls;
    const contentParts: IRContentPart[] = content.trim() === '' ? [] : [{ type: 'text', text: content }];
    let finish = result.finish;
    if (finish.unified === 'stop' && clientCalls.length > 0) finish = { unified: 'tool-calls', raw: finish.raw };
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
        reasoningTokens: reasoning === null ? 0 : family.thinkClose === null ? tokenizer.encode(reasoning).length : closeAt >= 0 ? closeAt : plan.promptOpenedThinking ? result.responseIds.length : 0,
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
    if (this.takeGoldenSample()) this.track(this.goldenCheck(messages, settings, false));
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

  private takeGoldenSample(): boolean {
    if (this.goldenRate <= 0) return false;
    this.goldenCredit += this.goldenRate;
    if (this.goldenCredit < 1 - 1e-9) return false;
    this.goldenCredit -= 1;
    return true;
  }

  private track(work: Promise<void>): void {
    this.pending.add(work);
    void work.finally(() => this.pending.delete(work));
  }

  /**
   * Compare our full rendering of a conversation with the engine's own: vLLM and the simulator `POST /tokenize` with
   * messages (ids compared), llama.cpp `POST /apply-template` (text compared), SGLang its `/tokenize` when the build
   * has one. Never throws: a mismatch is logged and counted, an engine without such an endpoint is reported once.
   */
  private async goldenCheck(messages: ChatMessage[], settings: RenderSettings, startup: boolean): Promise<void> {
    const tokenizer = this.tokenizer!;
    if (!startup && this.goldenEndpoint === null) {
      this.golden.unavailable++;
      return;
    }
    const family = this.family!;
    const renderOptions = { tools: settings.tools, enableThinking: settings.enableThinking, addGenerationPrompt: true, family };
    let oursText: string;
    try {
      oursText = tokenizer.renderChat(messages, renderOptions);
    } catch (thrown) {
      this.golden.errors++;
      this.log(`polar token mode: golden check failed to run: our ${family.name} chat template rejected the conversation: ${thrown instanceof Error ? thrown.message : String(thrown)}`);
      return;
    }
    const http = { timeoutMs: this.opts.timeoutMs, headers: this.headers({ 'x-polar-session': 'polar-golden' }) };
    const kwargs = settings.enableThinking !== undefined && family.thinkingKwarg ? { chat_template_kwargs: { [family.thinkingKwarg]: settings.enableThinking } } : {};
    const tools = settings.tools.length > 0 ? { tools: settings.tools } : {};
    const endpoints: ('tokenize' | 'apply-template')[] = this.goldenEndpoint ? [this.goldenEndpoint] : this.kind === 'llamacpp' ? ['apply-template'] : ['tokenize'];
    for (const endpoint of endpoints) {
      let answer: unknown;
      try {
        const body = endpoint === 'tokenize'
          ? { model: this.served, messages, add_generation_prompt: true, ...tools, ...kwargs }
          : { messages, add_generation_prompt: true, ...tools, ...kwargs };
        answer = await engineFetchJson(`${this.url}/${endpoint}`, { method: 'POST', body }, http, `engine ${this.id} /${endpoint}`);
      } catch (thrown) {
        const error = thrown instanceof GatewayError ? thrown : null;
        if (startup && error && (error.kind === 'invalid-request' || error.details.upstream?.status === 404)) {
          this.golden.unavailable++;
          this.log(`polar token mode: golden check unavailable: engine ${this.id} has no usable /${endpoint} (${error.message.slice(0, 200)})`);
          return;
        }
        this.golden.errors++;
        this.log(`polar token mode: golden check failed to run: ${thrown instanceof Error ? thrown.message : String(thrown)}`);
        return;
      }
      this.goldenEndpoint = endpoint;
      this.golden.checks++;
      const a = answer as { tokens?: unknown; prompt?: unknown };
      let mismatch: string | null = null;
      if (endpoint === 'tokenize') {
        if (!Array.isArray(a.tokens)) mismatch = '/tokenize answered without tokens';
        else {
          const ours = tokenizer.encode(oursText);
          const theirs = a.tokens as number[];
          const at = firstDifference(ours, theirs);
          if (at >= 0) mismatch = `token ${at} of ${ours.length}/${theirs.length}: ours ${JSON.stringify(tokenizer.decode(ours.slice(at, at + 8)))}, engine ${JSON.stringify(tokenizer.decode(theirs.slice(at, at + 8)))}`;
        }
      } else if (typeof a.prompt !== 'string') mismatch = '/apply-template answered without prompt';
      else if (a.prompt !== oursText) {
        const at = firstDifference([...oursText], [...a.prompt]);
        mismatch = `character ${at}: ours ${JSON.stringify(oursText.slice(at, at + 40))}, engine ${JSON.stringify(a.prompt.slice(at, at + 40))}`;
      }
      if (mismatch !== null) {
        this.golden.mismatches++;
        this.golden.lastMismatch = mismatch;
        this.log(`polar token mode: golden check MISMATCH (${startup ? 'start-up' : 'sampled turn'}): our chat template rendering differs from engine ${this.id}'s at ${mismatch}`);
      }
      return;
    }
  }
}

function trimNewlines(text: string): string {
  return text.replace(/^\n+/, '').replace(/\n+$/, '');
}

/** Index of the first differing element, or -1 when equal. */
function firstDifference<T>(a: readonly T[], b: readonly T[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}
