/**
 * `SimServer`: the GPU-free inference engine. One Bun.serve with the HTTP contracts of SGLang (`/generate`, chat token
 * fields, pause/continue, weight update), vLLM (`/v1/chat/completions` incl. streaming, `/v1/completions`,
 * `/tokenize`, `/pause`, `/resume`, `/weight_info`) and llama.cpp (`/completion`), a real tokenizer and chat
 * template, the toy policy's logprobs and scripted behaviour. Usable in-process (`await SimServer.start({port: 0})`)
 * and from `polar sim`. This file holds the shared pipeline (queue, timing, generation, prefix cache, logprobs); each
 * engine's wire contract is in routes/: chat.ts (OpenAI chat of vLLM and SGLang), vllm.ts, sglang.ts, llamacpp.ts,
 * control.ts (pause, weights, scripts), policy.ts (the learnable variant policy: `POST /update_weights`, `GET /sim/policy`).
 * Sources: https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html,
 * https://docs.sglang.ai/basic_usage/native_api.html, https://github.com/ggml-org/llama.cpp/tree/master/tools/server.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Clock } from '../core/clock.ts';
import { randomId, type IdGenerator } from '../core/ids.ts';
import type { ChatTool } from '../tokenization/chat-messages.ts';
import { detectModelFamily, promptThinking, resolveFamilyIds, type ModelFamily } from '../tokenization/families.ts';
import { toolsFromPromptText } from './prompt-tools.ts';
import { loadTokenizer, type LoadedTokenizer } from '../tokenization/tokenizer.ts';
import { generate, type Generation } from './generate.ts';
import { jsonForSchema } from './guided.ts';
import { SimCounters, type SimMetrics } from './metrics.ts';
import { scoreLogprob } from './policy.ts';
import { parseBehaviourScript, planTurn, type BehaviourScript, type ThinkingState, type TurnPlan } from './script.ts';
import { TimingModel, type Sequence } from './timing.ts';
import { errorResponse, json, readBody, SimHttpError, sessionOf, tokenIdsField, utf8, type Body } from './request.ts';
import { chatCompletions } from './routes/chat.ts';
import { controlRoutes } from './routes/control.ts';
import { policyRoutes } from './routes/policy.ts';
import { VariantPolicy, withChoiceLogprob } from './variant-policy.ts';
import { llamaCompletion } from './routes/llamacpp.ts';
import { sglangGenerate } from './routes/sglang.ts';
import { completions, tokenize } from './routes/vllm.ts';

export interface SimServerOptions {
  /** 0 = pick a free port. Default 0. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Hugging Face model directory; absent = the embedded Qwen3 tokenizer and template. */
  tokenizerDir?: string;
  /** Directory of `<task_id>.yaml` (or .yml/.json) behaviour scripts, read on first use of each task. */
  scriptsDir?: string;
  /** Scripts registered up front, by task id. */
  scripts?: Record<string, unknown>;
  /** Prompt tokens/s for the whole engine (one FIFO prefill lane); 0 = instant. Default 200000. */
  prefillTps?: number;
  /** Generated tokens/s of a sequence decoding alone; 0 = instant. Default 2000. */
  decodeTps?: number;
  /** Concurrent sequences; the rest queue. Default 64. */
  maxConcurrency?: number;
  /** Extra ms per decode step for each further sequence in the batch (continuous batching, timing.ts). Default 0. */
  decodeStepPerSeqMs?: number;
  /** Context length in tokens (prompt + completion). Default: tokenizer_config model_max_length, else 131072. */
  maxModelLen?: number;
  /** Model name served on /v1/models and echoed in replies. Default: the tokenizer's model name. */
  servedModelName?: string;
  /** Initial policy (weight) version. Default "0". */
  weightVersion?: string;
  /** Seconds clock for `created` fields (Unix ms). */
  clock?: Clock;
  newId?: IdGenerator;
}


/** What the planner needs from a prompt: the tools it offers, the step reached, the think-block state. */
export interface PromptFacts {
  tools: ChatTool[];
  toolResults: number;
  thinking: ThinkingState;
}

export interface Started {
  gen: Generation;
  promptIds: number[];
  cachedTokens: number;
  weightVersion: string;
  startedAt: number;
  plan: TurnPlan;
  /** Frees the sequence slot now (a cancel; a no-op once decode has ended). */
  release: () => void;
  /** The engine sequence decoding `gen.ids` (streams follow its progress). */
  sequence: Sequence;
}

export class SimServer {
  readonly tokenizer: LoadedTokenizer;
  readonly timing: TimingModel;
  readonly maxModelLen: number;
  readonly servedModelName: string;
  private server: ReturnType<typeof Bun.serve> | null = null;
  private readonly scripts = new Map<string, BehaviourScript | null>();
  /** @internal route modules */
  readonly counters: SimCounters;
  private readonly prefixCache = new Map<string, number[]>();
  /** @internal route modules */
  readonly clock: Clock;
  /** @internal route modules */
  readonly newId: IdGenerator;
  private version: string;
  /** The learnable choice among a script's variants (variant-policy.ts); loaded by `POST /update_weights`. */
  readonly policy = new VariantPolicy();

  /** The model family the simulated policy writes its turns in (tokenization/families.ts). */
  readonly family: ModelFamily;
  private readonly endOfTurnId: number;
  private readonly toolResultIds: number[] | null;

  /** @throws Error when the tokenizer's model family is unknown (the simulator cannot write its turns). */
  private constructor(tokenizer: LoadedTokenizer, private readonly options: SimServerOptions) {
    this.tokenizer = tokenizer;
    this.family = detectModelFamily(tokenizer);
    this.endOfTurnId = resolveFamilyIds(tokenizer, this.family).endOfTurn;
    this.toolResultIds = this.family.toolResultMarker === null ? null : tokenizer.encode(this.family.toolResultMarker);
    this.timing = new TimingModel({
      prefillTps: options.prefillTps ?? 200_000,
      decodeTps: options.decodeTps ?? 2_000,
      maxConcurrency: options.maxConcurrency ?? 64,
      decodeStepPerSeqMs: options.decodeStepPerSeqMs ?? 0,
    });
    this.maxModelLen = options.maxModelLen ?? tokenizer.modelMaxLength ?? 131_072;
    this.servedModelName = options.servedModelName ?? tokenizer.modelName;
    this.clock = options.clock ?? Date.now;
    this.newId = options.newId ?? randomId;
    this.version = options.weightVersion ?? '0';
    this.counters = new SimCounters(this.timing, () => this.version);
    for (const [taskId, script] of Object.entries(options.scripts ?? {})) this.registerScript(taskId, script);
  }

  /**
   * Load the tokenizer and start listening.
   * @throws Error when the tokenizer directory is unusable, a script is invalid, or the port is taken.
   */
  static async start(options: SimServerOptions = {}): Promise<SimServer> {
    if (options.scriptsDir !== undefined && !existsSync(options.scriptsDir)) throw new Error(`scripts directory ${options.scriptsDir} does not exist`);
    const sim = new SimServer(await loadTokenizer(options.tokenizerDir), options);
    sim.listen(options.port ?? 0, options.host ?? '127.0.0.1');
    return sim;
  }

  get port(): number {
    return this.server?.port ?? 0;
  }

  /** Base URL, e.g. `http://127.0.0.1:8000` (no trailing slash; vLLM's OpenAI API is under `/v1`). */
  get url(): string {
    const host = this.options.host ?? '127.0.0.1';
    return `http://${host.includes(':') ? `[${host}]` : host}:${this.port}`;
  }

  /** The policy (weight) version replies report. */
  get policyVersion(): string {
    return this.version;
  }

  async stop(): Promise<void> {
    await this.server?.stop(true);
    this.server = null;
  }

  /**
   * Register (or replace) a task's behaviour script: a parsed object or YAML/JSON text.
   * @throws Error listing the schema violations.
   */
  registerScript(taskId: string, script: unknown): void {
    const parsed = parseBehaviourScript(script);
    this.scripts.set(taskId, parsed);
    this.policy.noteTask(taskId, parsed);
  }

  /** Counters and the timing model's state. */
  metrics(): SimMetrics {
    const t = this.timing.snapshot();
    return {
      busyFraction: t.busyFraction,
      busyMs: t.busyMs,
      wallMs: t.wallMs,
      runningSeqMs: t.runningSeqMs,
      running: t.running,
      queueDepth: t.queued,
      paused: t.paused,
      requests: this.counters.requests,
      promptTokens: this.counters.promptTokens,
      cachedTokens: this.counters.cachedTokens,
      generatedTokens: this.counters.generatedTokens,
      policyVersion: this.version,
    };
  }

  /** Set the policy version (what a weight update does); without an argument, bump a numeric version by one. */
  updateWeights(version?: string): string {
    this.version = version ?? this.nextVersion();
    return this.version;
  }

  /** The version a weight update without an explicit one moves to: a numeric version + 1, else `<version>+1`. */
  nextVersion(): string {
    const n = Number(this.version);
    return Number.isInteger(n) ? String(n + 1) : `${this.version}+1`;
  }

  private scriptFor(taskId: string | null): BehaviourScript | null {
    if (!taskId) return null;
    if (this.scripts.has(taskId)) return this.scripts.get(taskId)!;
    let script: BehaviourScript | null = null;
    const dir = this.options.scriptsDir;
    if (dir && /^[\w.@-]+$/.test(taskId)) {
      for (const ext of ['yaml', 'yml', 'json']) {
        const path = join(dir, `${taskId}.${ext}`);
        if (!existsSync(path)) continue;
        try {
          script = parseBehaviourScript(readFileSync(path, 'utf8'));
        } catch (error) {
          throw new SimHttpError(500, `behaviour script ${path}: ${error instanceof Error ? error.message : String(error)}`, 'InternalServerError');
        }
        break;
      }
    }
    this.scripts.set(taskId, script);
    return script;
  }

  private listen(port: number, hostname: string): void {
    const wrap = (handler: (request: Request) => Promise<Response> | Response) => async (request: Request) => {
      try {
        return await handler(request);
      } catch (error) {
        if (error instanceof SimHttpError) return errorResponse(error);
        return errorResponse(new SimHttpError(500, `simulator failure: ${error instanceof Error ? error.message : String(error)}`, 'InternalServerError'));
      }
    };
    const post = (handler: (request: Request) => Promise<Response> | Response) => ({ POST: wrap(handler) });
    const get = (handler: (request: Request) => Promise<Response> | Response) => ({ GET: wrap(handler) });
    this.server = Bun.serve({
      port,
      hostname,
      idleTimeout: 0, // slow decode settings must not cut long generations
      routes: {
        '/health': { GET: () => new Response(null, { status: 200 }) },
        '/v1/models': get(() => this.models()),
        '/v1/chat/completions': post((r) => chatCompletions(this, r)),
        '/v1/completions': post((r) => completions(this, r)),
        '/generate': post((r) => sglangGenerate(this, r)),
        '/completion': post((r) => llamaCompletion(this, r)),
        '/tokenize': post((r) => tokenize(this, r)),
        '/detokenize': post(async (r) => {
          const ids = tokenIdsField((await readBody(r)).tokens, 'tokens');
          if (!ids) throw new SimHttpError(400, 'tokens must be an array of token ids');
          return json({ prompt: this.tokenizer.decode(ids) });
        }),
        '/metrics': get(async () => new Response(await this.counters.exposition(), { headers: { 'content-type': this.counters.contentType } })),
        ...controlRoutes(this, post, get),
        ...policyRoutes(this, post, get),
      },
      fetch: (request) => errorResponse(new SimHttpError(404, `no route ${request.method} ${new URL(request.url).pathname}`, 'NotFoundError')),
    });
  }

  private models(): Response {
    const created = Math.floor(this.clock() / 1000);
    return json({
      object: 'list',
      data: [{ id: this.servedModelName, object: 'model', created, owned_by: 'polar-sim', root: this.servedModelName, parent: null, max_model_len: this.maxModelLen, permission: [] }],
    });
  }

  // --- shared pipeline -------------------------------------------------------------------------------------------

  /** @internal route modules (see routes/). */
  checkContext(promptLen: number, maxTokens: number | null): number {
    if (promptLen >= this.maxModelLen) {
      throw new SimHttpError(400, `This model's maximum context length is ${this.maxModelLen} tokens. However, your request has ${promptLen} input tokens. Please reduce the length of the input messages.`);
    }
    if (maxTokens !== null && promptLen + maxTokens > this.maxModelLen) {
      throw new SimHttpError(400, `'max_tokens' or 'max_completion_tokens' is too large: ${maxTokens}. This model's maximum context length is ${this.maxModelLen} tokens and your request has ${promptLen} input tokens (${maxTokens} > ${this.maxModelLen} - ${promptLen}).`);
    }
    return maxTokens ?? this.maxModelLen - promptLen;
  }

  /**
   * Facts about a prompt given only as token ids: the tools its template rendered (JSON tool objects or gpt-oss
   * TypeScript declarations, read from the first two turns), the tool results (the family's tool-result marker), and
   * where it left the think block.
   * @internal route modules (see routes/).
   */
  promptFactsFromIds(promptIds: readonly number[]): PromptFacts {
    const tk = this.tokenizer;
    let toolResults = 0;
    const marker = this.toolResultIds;
    if (marker !== null && marker.length > 0) {
      for (let i = 0; i + marker.length <= promptIds.length; i++) {
        let k = 0;
        while (k < marker.length && promptIds[i + k] === marker[k]) k++;
        if (k === marker.length) toolResults++;
      }
    }
    // Tools live in the system block (or, for Llama and gpt-oss, the turn after it): decode the first two turns only.
    let cut = -1;
    for (let seen = 0, i = 0; i < promptIds.length && seen < 2; i++) if (promptIds[i] === this.endOfTurnId && ++seen === 2) cut = i;
    const head = tk.decode(promptIds.slice(0, cut >= 0 ? cut : Math.min(promptIds.length, 16_384)));
    return { tools: toolsFromPromptText(head), toolResults, thinking: promptThinking(this.family, tk.decode(promptIds.slice(-8))) };
  }

  /**
   * Wait for the pause gate and a slot, simulate prefill + decode time, generate, count. The session, the task (its
   * behaviour script) and the abort signal come from the request; `facts` default to those read from the prompt ids.
   */
  /** @internal route modules (see routes/). */
  async run(
    request: Request,
    body: Body,
    input: {
      promptIds: number[];
      facts?: PromptFacts;
      maxTokens: number;
      stop?: string[];
      stopTokenIds?: number[];
      ignoreEos?: boolean;
      /** Streaming callers pace decode themselves and release the slot when done. */
      holdSlot?: boolean;
      /** Guided decoding: the JSON Schema the answer must match (see guided.ts); the script's text is replaced. */
      guided?: Record<string, unknown> | null;
    },
  ): Promise<Started> {
    const facts = input.facts ?? this.promptFactsFromIds(input.promptIds);
    const sessionId = sessionOf(request, body);
    const taskId = request.headers.get('x-polar-task');
    const seq = await this.timing.acquire(request.signal);
    const release = () => seq.release();
    try {
      const startedAt = this.clock();
      const weightVersion = this.version;
      // Plan after the pause gate, so a variant choice is drawn under the weights this sample reports.
      const script = this.scriptFor(taskId);
      const drawn = script && taskId ? this.policy.choose(taskId, script, sessionId, weightVersion) : null;
      let plan = planTurn({ script, sessionId, toolResults: facts.toolResults, tools: facts.tools, thinking: facts.thinking, variant: drawn?.choice.variant, family: this.family });
      if (input.guided) {
        const answer = JSON.stringify(jsonForSchema(input.guided));
        plan = { ...plan, text: facts.thinking === 'opened' ? `\n</think>\n\n${answer}` : answer, kind: 'say' };
      }
      const cachedTokens = this.cachedPrefix(sessionId, input.promptIds);
      const gen = generate(this.tokenizer, { promptIds: input.promptIds, text: plan.text, endTokenId: plan.end === undefined ? undefined : this.tokenizer.tokenToId(plan.end), maxTokens: input.maxTokens, stop: input.stop, stopTokenIds: input.stopTokenIds, ignoreEos: input.ignoreEos });
      // The session's first sample carries the choice: log π(variant) joins its first token's logprob.
      if (drawn?.first && gen.logprobs.length > 0) gen.logprobs[0] = withChoiceLogprob(gen.logprobs[0]!, drawn.choice.logprob);
      // The engine step loop (timing.ts): the uncached prompt on the prefill lane, then the answer in the decode batch.
      await seq.prefill(input.promptIds.length - cachedTokens);
      request.signal.throwIfAborted();
      seq.decode(gen.ids.length);
      if (!input.holdSlot) await seq.done;
      this.counters.record(input.promptIds.length, cachedTokens, gen.ids.length);
      if (sessionId) this.remember(sessionId, input.promptIds, gen.ids);
      return { gen, promptIds: input.promptIds, cachedTokens, weightVersion, startedAt, plan, release, sequence: seq };
    } catch (error) {
      release();
      throw error;
    }
  }

  private cachedPrefix(sessionId: string, promptIds: readonly number[]): number {
    const previous = sessionId ? this.prefixCache.get(sessionId) : undefined;
    if (!previous) return 0;
    const n = Math.min(previous.length, promptIds.length);
    let i = 0;
    while (i < n && previous[i] === promptIds[i]) i++;
    // An engine always recomputes at least the last prompt token.
    return Math.min(i, Math.max(0, promptIds.length - 1));
  }

  private remember(sessionId: string, promptIds: readonly number[], ids: readonly number[]): void {
    this.prefixCache.delete(sessionId);
    this.prefixCache.set(sessionId, [...promptIds, ...ids]);
    if (this.prefixCache.size > 1024) this.prefixCache.delete(this.prefixCache.keys().next().value!);
  }

  /** @internal route modules (see routes/). */
  tokenLogprobs(promptIds: readonly number[], ids: readonly number[], logprobs: readonly number[], top: number) {
    const window: number[] = promptIds.slice(-4) as number[];
    return ids.map((id, i) => {
      const token = this.tokenizer.decode([id]);
      const entry = { token, logprob: logprobs[i]!, bytes: Array.from(utf8.encode(token)), top_logprobs: [] as { token: string; logprob: number; bytes: number[] }[] };
      if (top > 0) {
        const candidates = new Set<number>([id]);
        for (let j = 1; candidates.size < top + 1 && j < top * 4 + 4; j++) candidates.add((id * 2654435761 + j * 40503 + i) % Math.max(1, this.tokenizer.vocabSize));
        entry.top_logprobs = [...candidates]
          .map((c) => ({ c, lp: c === id ? logprobs[i]! : scoreLogprob(window, c) }))
          .sort((a, b) => b.lp - a.lp)
          .slice(0, top)
          .map(({ c, lp }) => {
            const text = this.tokenizer.decode([c]);
            return { token: text, logprob: lp, bytes: Array.from(utf8.encode(text)) };
          });
      }
      window.push(id);
      if (window.length > 4) window.shift();
      return entry;
    });
  }




  /** @internal route modules (see routes/). */
  usage(started: Started) {
    const prompt = started.promptIds.length;
    const completion = started.gen.ids.length;
    return { prompt_tokens: prompt, total_tokens: prompt + completion, completion_tokens: completion, prompt_tokens_details: { cached_tokens: started.cachedTokens } };
  }


  /** The text each token adds (incremental decode; a token that ends inside a UTF-8 sequence adds nothing yet). */
  /** @internal route modules (see routes/). */
  tokenPieces(ids: readonly number[], skipSpecial: boolean): string[] {
    const pieces: string[] = [];
    let pendingFrom = 0;
    for (let i = 0; i < ids.length; i++) {
      const text = this.tokenizer.decode(ids.slice(pendingFrom, i + 1), { skipSpecialTokens: skipSpecial });
      if (text.endsWith('\uFFFD') && i < ids.length - 1) {
        pieces.push('');
        continue;
      }
      pieces.push(text);
      pendingFrom = i + 1;
    }
    return pieces;
  }


  /** @internal route modules (see routes/). */
  promptFromBody(value: unknown, name: string): number[] {
    if (typeof value === 'string') return this.tokenizer.encode(value);
    if (Array.isArray(value) && value.length === 1 && Array.isArray(value[0])) return tokenIdsField(value[0], name)!;
    const ids = tokenIdsField(value, name);
    if (!ids || ids.length === 0) throw new SimHttpError(400, `${name} must be a string or a non-empty array of token ids`);
    return ids;
  }








}
