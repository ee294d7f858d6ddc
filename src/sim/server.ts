/**
 * `SimServer`: the GPU-free inference engine. One Bun.serve with the HTTP contracts of SGLang (`/generate`, chat token
 * fields, pause/continue, weight update), vLLM (`/v1/chat/completions` incl. streaming, `/v1/completions`,
 * `/tokenize`, `/pause`, `/resume`, `/weight_info`) and llama.cpp (`/completion`), a real tokenizer and chat
 * template, the toy policy's logprobs and scripted behaviour. Usable in-process (`await SimServer.start({port: 0})`)
 * and from `polar sim`. Sources: PROTOCOL-NOTES.md §1–2, ARCHITECTURE.md §7.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Clock } from '../core/clock.ts';
import { randomId, type IdGenerator } from '../core/ids.ts';
import type { ChatMessage, ChatTool } from '../tokenization/chat-messages.ts';
import { parseQwen3Output, splitQwen3Reasoning } from '../tokenization/parsers.ts';
import { loadTokenizer, type LoadedTokenizer } from '../tokenization/tokenizer.ts';
import { generate, type Generation } from './generate.ts';
import { SimCounters, type SimMetrics } from './metrics.ts';
import { scoreLogprob } from './policy.ts';
import { parseBehaviourScript, planTurn, type BehaviourScript, type ThinkingState, type TurnPlan } from './script.ts';
import { sleep, TimingModel } from './timing.ts';

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
  /** Prompt tokens/s; 0 = instant. Default 200000. */
  prefillTps?: number;
  /** Generated tokens/s per sequence; 0 = instant. Default 2000. */
  decodeTps?: number;
  /** Concurrent sequences; the rest queue. Default 64. */
  maxConcurrency?: number;
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

/** An HTTP error in the engines' shape: `{error: {message, type, param, code}}`. */
class SimHttpError extends Error {
  constructor(readonly status: number, message: string, readonly type = 'BadRequestError') {
    super(message);
  }
}

const json = (body: unknown, status = 200) => Response.json(body, { status });
const errorResponse = (error: SimHttpError) =>
  json({ error: { message: error.message, type: error.type, param: null, code: error.status } }, error.status);

type Body = Record<string, unknown>;

async function readBody(request: Request): Promise<Body> {
  let value: unknown;
  try {
    value = await request.json();
  } catch {
    throw new SimHttpError(400, 'request body is not valid JSON');
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new SimHttpError(400, 'request body must be a JSON object');
  return value as Body;
}

function intField(body: Body, name: string, fallback: number, min = 0): number {
  const value = body[name];
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) throw new SimHttpError(400, `${name} must be an integer ≥ ${min}, got ${JSON.stringify(value)}`);
  return value;
}

function tokenIdsField(value: unknown, name: string): number[] | null {
  if (!Array.isArray(value)) return null;
  if (!value.every((x) => Number.isInteger(x) && x >= 0)) throw new SimHttpError(400, `${name} must be an array of non-negative token ids`);
  return value as number[];
}

function stopList(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  if (typeof value === 'string') return [value];
  if (Array.isArray(value) && value.every((s) => typeof s === 'string')) return value as string[];
  throw new SimHttpError(400, 'stop must be a string or an array of strings');
}

const utf8 = new TextEncoder();

/** What the planner needs from a prompt: the tools it offers, the step reached, the think-block state. */
interface PromptFacts {
  tools: ChatTool[];
  toolResults: number;
  thinking: ThinkingState;
}

interface Started {
  gen: Generation;
  promptIds: number[];
  cachedTokens: number;
  weightVersion: string;
  startedAt: number;
  plan: TurnPlan;
  /** Frees the sequence slot (call once). */
  release: () => void;
}

export class SimServer {
  readonly tokenizer: LoadedTokenizer;
  readonly timing: TimingModel;
  readonly maxModelLen: number;
  readonly servedModelName: string;
  private server: ReturnType<typeof Bun.serve> | null = null;
  private readonly scripts = new Map<string, BehaviourScript | null>();
  private readonly counters: SimCounters;
  private readonly prefixCache = new Map<string, number[]>();
  private readonly clock: Clock;
  private readonly newId: IdGenerator;
  private version: string;

  private constructor(tokenizer: LoadedTokenizer, private readonly options: SimServerOptions) {
    this.tokenizer = tokenizer;
    this.timing = new TimingModel({
      prefillTps: options.prefillTps ?? 200_000,
      decodeTps: options.decodeTps ?? 2_000,
      maxConcurrency: options.maxConcurrency ?? 64,
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
    this.scripts.set(taskId, parseBehaviourScript(script));
  }

  /** Counters and the timing model's state. */
  metrics(): SimMetrics {
    const t = this.timing.snapshot();
    return {
      busyFraction: t.busyFraction,
      busyMs: t.busyMs,
      wallMs: t.wallMs,
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
    const n = Number(this.version);
    this.version = version ?? (Number.isInteger(n) ? String(n + 1) : `${this.version}+1`);
    return this.version;
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
    const pause = async (request: Request) => {
      this.timing.pause();
      if (new URL(request.url).searchParams.get('mode') === 'wait') await this.timing.drained();
      return json({ status: 'paused' });
    };
    this.server = Bun.serve({
      port,
      hostname,
      idleTimeout: 0, // slow decode settings must not cut long generations
      routes: {
        '/health': { GET: () => new Response(null, { status: 200 }) },
        '/v1/models': get(() => this.models()),
        '/v1/chat/completions': post((r) => this.chatCompletions(r)),
        '/v1/completions': post((r) => this.completions(r)),
        '/generate': post((r) => this.sglangGenerate(r)),
        '/completion': post((r) => this.llamaCompletion(r)),
        '/tokenize': post((r) => this.tokenize(r)),
        '/detokenize': post(async (r) => {
          const ids = tokenIdsField((await readBody(r)).tokens, 'tokens');
          if (!ids) throw new SimHttpError(400, 'tokens must be an array of token ids');
          return json({ prompt: this.tokenizer.decode(ids) });
        }),
        '/metrics': get(async () => new Response(await this.counters.exposition(), { headers: { 'content-type': this.counters.contentType } })),
        '/pause_generation': post(pause),
        '/continue_generation': post(() => (this.timing.resume(), json({ status: 'resumed' }))),
        '/pause': post(pause),
        '/resume': post(() => (this.timing.resume(), json({ status: 'resumed' }))),
        '/is_paused': get(() => json({ is_paused: this.timing.paused })),
        '/update_weights_from_disk': post(async (r) => {
          const body = await readBody(r);
          const requested = body.weight_version;
          if (requested !== undefined && typeof requested !== 'string') throw new SimHttpError(400, 'weight_version must be a string');
          this.updateWeights(requested);
          return json({ success: true, message: 'Succeeded to update model weights.', num_paused_requests: 0, weight_version: this.version });
        }),
        '/update_weight_version': post(async (r) => {
          const body = await readBody(r);
          if (typeof body.new_version !== 'string') throw new SimHttpError(400, 'new_version must be a string');
          this.updateWeights(body.new_version);
          return json({ success: true, message: `Weight version updated to ${this.version}`, new_version: this.version });
        }),
        '/get_weight_version': get(() => json({ weight_version: this.version })),
        '/weight_info': get(() => json({ weight_version: this.version, model: this.servedModelName })),
        '/sim/scripts': post(async (r) => {
          const body = await readBody(r);
          if (typeof body.task_id !== 'string' || body.task_id === '') throw new SimHttpError(400, 'task_id must be a non-empty string');
          try {
            this.registerScript(body.task_id, body.script);
          } catch (error) {
            throw new SimHttpError(400, error instanceof Error ? error.message : String(error));
          }
          return json({ ok: true, task_id: body.task_id });
        }),
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

  private checkContext(promptLen: number, maxTokens: number | null): number {
    if (promptLen >= this.maxModelLen) {
      throw new SimHttpError(400, `This model's maximum context length is ${this.maxModelLen} tokens. However, your request has ${promptLen} input tokens. Please reduce the length of the input messages.`);
    }
    if (maxTokens !== null && promptLen + maxTokens > this.maxModelLen) {
      throw new SimHttpError(400, `'max_tokens' or 'max_completion_tokens' is too large: ${maxTokens}. This model's maximum context length is ${this.maxModelLen} tokens and your request has ${promptLen} input tokens (${maxTokens} > ${this.maxModelLen} - ${promptLen}).`);
    }
    return maxTokens ?? this.maxModelLen - promptLen;
  }

  /** Facts about a prompt given only as token ids: tools from the rendered `<tools>` block, tool results, think state. */
  private promptFactsFromIds(promptIds: readonly number[]): PromptFacts {
    const tk = this.tokenizer;
    const responseId = tk.tokenToId('<tool_response>');
    let toolResults = 0;
    if (responseId !== undefined) for (const id of promptIds) if (id === responseId) toolResults++;
    // Tools live in the system block, which ends at the first end-of-turn token: decode only that far.
    const eot = tk.eosTokenIds[0];
    const firstEnd = eot === undefined ? -1 : promptIds.indexOf(eot);
    const head = tk.decode(promptIds.slice(0, firstEnd >= 0 ? firstEnd : Math.min(promptIds.length, 4096)));
    const tools: ChatTool[] = [];
    const open = head.indexOf('<tools>\n');
    const close = head.indexOf('\n</tools>', open);
    if (open >= 0 && close > open) {
      for (const line of head.slice(open + 8, close).split('\n')) {
        try {
          const tool = JSON.parse(line) as ChatTool;
          if (tool && typeof tool === 'object') tools.push(tool.function ? tool : ({ type: 'function', function: tool } as unknown as ChatTool));
        } catch {
          // A line that is not JSON is not a tool the planner can call.
        }
      }
    }
    return { tools, toolResults, thinking: thinkingState(tk.decode(promptIds.slice(-8))) };
  }

  /**
   * Wait for the pause gate and a slot, simulate prefill + decode time, generate, count. The session, the task (its
   * behaviour script) and the abort signal come from the request; `facts` default to those read from the prompt ids.
   */
  private async run(
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
    },
  ): Promise<Started> {
    const facts = input.facts ?? this.promptFactsFromIds(input.promptIds);
    const sessionId = sessionOf(request, body);
    const plan = planTurn({ script: this.scriptFor(request.headers.get('x-polar-task')), sessionId, toolResults: facts.toolResults, tools: facts.tools, thinking: facts.thinking });
    const release = await this.timing.acquire(request.signal);
    try {
      const startedAt = this.clock();
      const weightVersion = this.version;
      const cachedTokens = this.cachedPrefix(sessionId, input.promptIds);
      const gen = generate(this.tokenizer, { promptIds: input.promptIds, text: plan.text, maxTokens: input.maxTokens, stop: input.stop, stopTokenIds: input.stopTokenIds, ignoreEos: input.ignoreEos });
      await sleep(this.timing.prefillMs(input.promptIds.length - cachedTokens) + (input.holdSlot ? 0 : this.timing.decodeMs(gen.ids.length)));
      this.counters.record(input.promptIds.length, cachedTokens, gen.ids.length);
      if (sessionId) this.remember(sessionId, input.promptIds, gen.ids);
      if (!input.holdSlot) release();
      return { gen, promptIds: input.promptIds, cachedTokens, weightVersion, startedAt, plan, release };
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

  private tokenLogprobs(promptIds: readonly number[], ids: readonly number[], logprobs: readonly number[], top: number) {
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

  // --- vLLM / SGLang OpenAI chat ------------------------------------------------------------------------------------

  private async chatCompletions(request: Request): Promise<Response> {
    const body = await readBody(request);
    if (!Array.isArray(body.messages) || body.messages.length === 0) throw new SimHttpError(400, 'messages must be a non-empty array');
    const messages = body.messages as ChatMessage[];
    for (const [i, m] of messages.entries()) {
      if (!m || typeof m !== 'object' || typeof m.role !== 'string') throw new SimHttpError(400, `messages[${i}] needs a string role`);
    }
    if (body.n !== undefined && body.n !== 1) throw new SimHttpError(400, 'the simulator supports n = 1 only');
    const tools = Array.isArray(body.tools) ? (body.tools as ChatTool[]) : [];
    const kwargs = (body.chat_template_kwargs && typeof body.chat_template_kwargs === 'object' ? body.chat_template_kwargs : {}) as Record<string, unknown>;
    const enableThinking = typeof kwargs.enable_thinking === 'boolean' ? kwargs.enable_thinking : undefined;
    let promptText: string;
    try {
      promptText = this.tokenizer.renderChat(messages, { tools, addGenerationPrompt: body.add_generation_prompt !== false, enableThinking, extra: kwargs });
    } catch (error) {
      throw new SimHttpError(400, `cannot apply the chat template: ${error instanceof Error ? error.message : String(error)}`);
    }
    const promptIds = this.tokenizer.encode(promptText);
    const requestedMax = body.max_completion_tokens ?? body.max_tokens;
    const maxTokens = this.checkContext(promptIds.length, requestedMax === undefined || requestedMax === null ? null : intField(body, body.max_completion_tokens !== undefined ? 'max_completion_tokens' : 'max_tokens', 0));
    const facts: PromptFacts = { tools, toolResults: messages.filter((m) => m.role === 'tool').length, thinking: thinkingState(promptText.slice(-32)) };
    const stream = body.stream === true;
    const started = await this.run(request, body, {
      promptIds,
      facts,
      maxTokens,
      stop: stopList(body.stop),
      stopTokenIds: tokenIdsField(body.stop_token_ids, 'stop_token_ids') ?? [],
      ignoreEos: body.ignore_eos === true,
      holdSlot: stream,
    });
    const parseTools = tools.length > 0 && body.tool_choice !== 'none';
    const ctx = { body, started, parseTools, promptOpenedThinking: facts.thinking === 'opened' };
    return stream ? this.chatStream(ctx) : json(this.chatResponse(ctx));
  }

  private chatResponse(ctx: { body: Body; started: Started; parseTools: boolean; promptOpenedThinking: boolean }) {
    const { body, started, parseTools } = ctx;
    const { gen, promptIds } = started;
    const text = this.tokenizer.decode(gen.ids, { skipSpecialTokens: body.skip_special_tokens !== false });
    const parsed = parseQwen3Output(text, { promptOpenedThinking: ctx.promptOpenedThinking });
    const valid = parseTools && parsed.toolCalls.length > 0 && parsed.toolCalls.every((c) => !c.parserInvalid);
    let content: string | null;
    if (valid) content = parsed.content === '' ? null : parsed.content;
    else content = splitQwen3Reasoning(text, { promptOpenedThinking: ctx.promptOpenedThinking }).rest;
    if (content === '' && parsed.reasoning !== null) content = null;
    const toolCalls = valid ? parsed.toolCalls.map((c) => ({ id: `chatcmpl-tool-${this.newId('call').split('_').pop()}`, type: 'function', function: { name: c.name, arguments: c.arguments } })) : [];
    const finishReason = gen.finish === 'length' ? 'length' : valid ? 'tool_calls' : 'stop';
    const logprobs = body.logprobs === true ? { content: this.tokenLogprobs(promptIds, gen.ids, gen.logprobs, typeof body.top_logprobs === 'number' ? body.top_logprobs : 0) } : null;
    const choice: Record<string, unknown> = {
      index: 0,
      message: { role: 'assistant', content, refusal: null, annotations: null, audio: null, function_call: null, tool_calls: toolCalls, reasoning: parsed.reasoning, reasoning_content: parsed.reasoning },
      logprobs,
      finish_reason: finishReason,
      stop_reason: gen.matchedEos ? null : gen.matched,
    };
    if (body.return_token_ids === true) choice.token_ids = gen.ids;
    if (body.return_prompt_token_ids === true) choice.prompt_token_ids = promptIds;
    if (body.return_meta_info === true) choice.meta_info = this.sglangMeta(started, String(body.rid ?? ''), true);
    return {
      id: `chatcmpl-${this.newId('chat').split('_').pop()}`,
      object: 'chat.completion',
      created: Math.floor(started.startedAt / 1000),
      model: typeof body.model === 'string' ? body.model : this.servedModelName,
      choices: [choice],
      service_tier: null,
      system_fingerprint: null,
      usage: this.usage(started),
      prompt_logprobs: null,
      prompt_token_ids: body.return_token_ids === true ? promptIds : null,
      kv_transfer_params: null,
      metadata: { weight_version: started.weightVersion },
    };
  }

  private usage(started: Started) {
    const prompt = started.promptIds.length;
    const completion = started.gen.ids.length;
    return { prompt_tokens: prompt, total_tokens: prompt + completion, completion_tokens: completion, prompt_tokens_details: { cached_tokens: started.cachedTokens } };
  }

  private chatStream(ctx: { body: Body; started: Started; parseTools: boolean; promptOpenedThinking: boolean }): Response {
    const { body, started } = ctx;
    const { gen, promptIds } = started;
    const id = `chatcmpl-${this.newId('chat').split('_').pop()}`;
    const created = Math.floor(started.startedAt / 1000);
    const model = typeof body.model === 'string' ? body.model : this.servedModelName;
    const withIds = body.return_token_ids === true;
    const final = this.chatResponse(ctx);
    const finalChoice = final.choices[0] as { message: { tool_calls: unknown[] }; finish_reason: string; stop_reason: unknown };
    const skip = body.skip_special_tokens !== false;
    const pieces = this.tokenPieces(gen.ids, skip);
    const fullText = pieces.join('');
    const regions = chatRegions(fullText, finalChoice.message.tool_calls.length > 0, ctx.promptOpenedThinking);
    const logprobs = body.logprobs === true ? this.tokenLogprobs(promptIds, gen.ids, gen.logprobs, typeof body.top_logprobs === 'number' ? body.top_logprobs : 0) : null;
    const includeUsage = (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
    const chunk = (choice: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [choice], ...extra })}\n\n`;
    const perTokenMs = this.timing.decodeMs(1);
    const release = started.release;
    const encoder = new TextEncoder();
    let offset = 0;
    let index = 0;
    const stream = new ReadableStream<Uint8Array>({
      start: (controller) => {
        controller.enqueue(encoder.encode(chunk({ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }, withIds ? { prompt_token_ids: promptIds } : {})));
      },
      pull: async (controller) => {
        try {
          if (index < gen.ids.length) {
            // Pace at the decode rate, several tokens per chunk when the rate outruns the timer resolution.
            const batch = perTokenMs > 0 ? Math.max(1, Math.floor(4 / perTokenMs)) : gen.ids.length;
            const end = Math.min(gen.ids.length, index + batch);
            await sleep(perTokenMs * (end - index));
            const out: string[] = [];
            for (; index < end; index++) {
              const piece = pieces[index]!;
              const delta: Record<string, unknown> = {};
              for (let c = 0; c < piece.length; c++) {
                const region = regions(offset + c);
                if (region === 'reasoning') delta.reasoning = `${delta.reasoning ?? ''}${piece[c]}`;
                else if (region === 'content') delta.content = `${delta.content ?? ''}${piece[c]}`;
              }
              offset += piece.length;
              if (delta.reasoning !== undefined) delta.reasoning_content = delta.reasoning;
              const last = index === gen.ids.length - 1;
              const choice: Record<string, unknown> = { index: 0, delta, logprobs: logprobs ? { content: [logprobs[index]] } : null, finish_reason: null };
              if (withIds) choice.token_ids = [gen.ids[index]];
              if (last) {
                if (finalChoice.message.tool_calls.length > 0) {
                  delta.tool_calls = (finalChoice.message.tool_calls as Record<string, unknown>[]).map((call, k) => ({ index: k, ...call }));
                }
                choice.finish_reason = finalChoice.finish_reason;
                choice.stop_reason = finalChoice.stop_reason;
              }
              out.push(chunk(choice));
            }
            controller.enqueue(encoder.encode(out.join('')));
            return;
          }
          if (gen.ids.length === 0) controller.enqueue(encoder.encode(chunk({ index: 0, delta: {}, logprobs: null, finish_reason: finalChoice.finish_reason, stop_reason: finalChoice.stop_reason })));
          if (includeUsage) controller.enqueue(encoder.encode(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [], usage: final.usage })}\n\n`));
          controller.enqueue(encoder.encode('data: [DONE]\n\n'));
          controller.close();
          release();
        } catch (error) {
          release();
          controller.error(error);
        }
      },
      cancel: () => release(),
    });
    return new Response(stream, { headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' } });
  }

  /** The text each token adds (incremental decode; a token that ends inside a UTF-8 sequence adds nothing yet). */
  private tokenPieces(ids: readonly number[], skipSpecial: boolean): string[] {
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

  // --- vLLM /v1/completions (token-in) -------------------------------------------------------------------------------

  private promptFromBody(value: unknown, name: string): number[] {
    if (typeof value === 'string') return this.tokenizer.encode(value);
    if (Array.isArray(value) && value.length === 1 && Array.isArray(value[0])) return tokenIdsField(value[0], name)!;
    const ids = tokenIdsField(value, name);
    if (!ids || ids.length === 0) throw new SimHttpError(400, `${name} must be a string or a non-empty array of token ids`);
    return ids;
  }

  private async completions(request: Request): Promise<Response> {
    const body = await readBody(request);
    if (body.stream === true) throw new SimHttpError(400, 'the simulator serves /v1/completions without streaming');
    if (body.echo === true) throw new SimHttpError(400, 'echo is not supported by the simulator');
    if (body.n !== undefined && body.n !== 1) throw new SimHttpError(400, 'the simulator supports n = 1 only');
    const promptIds = this.promptFromBody(body.prompt, 'prompt');
    const maxTokens = this.checkContext(promptIds.length, intField(body, 'max_tokens', 16)); // vLLM's default is 16
    const started = await this.run(request, body, {
      promptIds,
      maxTokens,
      stop: stopList(body.stop),
      stopTokenIds: tokenIdsField(body.stop_token_ids, 'stop_token_ids') ?? [],
      ignoreEos: body.ignore_eos === true,
    });
    const { gen } = started;
    const skip = body.skip_special_tokens !== false;
    let logprobs: Record<string, unknown> | null = null;
    if (typeof body.logprobs === 'number') {
      const entries = this.tokenLogprobs(promptIds, gen.ids, gen.logprobs, body.logprobs);
      const offsets: number[] = [];
      let offset = 0;
      for (const piece of this.tokenPieces(gen.ids, skip)) {
        offsets.push(offset);
        offset += piece.length;
      }
      logprobs = {
        text_offset: offsets,
        token_logprobs: gen.logprobs,
        tokens: entries.map((e) => e.token),
        top_logprobs: entries.map((e) => Object.fromEntries(e.top_logprobs.map((t) => [t.token, t.logprob]))),
      };
    }
    const choice: Record<string, unknown> = {
      index: 0,
      text: this.tokenizer.decode(gen.ids, { skipSpecialTokens: skip }),
      logprobs,
      finish_reason: gen.finish,
      stop_reason: gen.matchedEos ? null : gen.matched,
      prompt_logprobs: null,
    };
    if (body.return_token_ids === true) {
      choice.prompt_token_ids = promptIds;
      choice.token_ids = gen.ids;
    }
    return json({
      id: `cmpl-${this.newId('cmpl').split('_').pop()}`,
      object: 'text_completion',
      created: Math.floor(started.startedAt / 1000),
      model: typeof body.model === 'string' ? body.model : this.servedModelName,
      choices: [choice],
      service_tier: null,
      system_fingerprint: null,
      usage: this.usage(started),
      kv_transfer_params: null,
    });
  }

  // --- SGLang /generate ----------------------------------------------------------------------------------------------

  private sglangMeta(started: Started, rid: string, withLogprobs: boolean) {
    const { gen } = started;
    const finish =
      gen.finish === 'length' ? { type: 'length', length: gen.ids.length } : { type: 'stop', matched: gen.matched };
    const meta: Record<string, unknown> = {
      id: rid,
      finish_reason: finish,
      prompt_tokens: started.promptIds.length,
      weight_version: started.weightVersion,
      completion_tokens: gen.ids.length,
      cached_tokens: started.cachedTokens,
      e2e_latency: (this.clock() - started.startedAt) / 1000,
    };
    if (withLogprobs) meta.output_token_logprobs = gen.ids.map((id, i) => [gen.logprobs[i]!, id, null]);
    return meta;
  }

  private async sglangGenerate(request: Request): Promise<Response> {
    const body = await readBody(request);
    if (body.stream === true) throw new SimHttpError(400, 'the simulator serves /generate without streaming');
    let promptIds: number[];
    if (body.input_ids !== undefined) promptIds = this.promptFromBody(body.input_ids, 'input_ids');
    else if (typeof body.text === 'string') promptIds = this.tokenizer.encode(body.text);
    else throw new SimHttpError(400, 'either input_ids or text is required (one prompt; batches are not supported)');
    const sampling = (body.sampling_params && typeof body.sampling_params === 'object' ? body.sampling_params : {}) as Body;
    const maxTokens = this.checkContext(promptIds.length, intField(sampling, 'max_new_tokens', 128)); // SGLang's default is 128
    const rid = typeof body.rid === 'string' ? body.rid : this.newId('rid').split('_').pop()!;
    const started = await this.run(request, body, {
      promptIds,
      maxTokens,
      stop: stopList(sampling.stop),
      stopTokenIds: tokenIdsField(sampling.stop_token_ids, 'sampling_params.stop_token_ids') ?? [],
      ignoreEos: sampling.ignore_eos === true,
    });
    const { gen } = started;
    let ids = gen.ids;
    // no_stop_trim=false (the default) drops the matched stop token from the text, never from output_ids.
    if (sampling.no_stop_trim !== true && gen.finish === 'stop' && typeof gen.matched === 'number') ids = ids.slice(0, -1);
    return json({ text: this.tokenizer.decode(ids, { skipSpecialTokens: sampling.skip_special_tokens !== false }), output_ids: gen.ids, meta_info: this.sglangMeta(started, rid, body.return_logprob === true) });
  }

  // --- llama.cpp /completion -----------------------------------------------------------------------------------------

  private async llamaCompletion(request: Request): Promise<Response> {
    const body = await readBody(request);
    if (body.stream === true) throw new SimHttpError(400, 'the simulator serves /completion without streaming');
    const promptIds = this.promptFromBody(body.prompt, 'prompt');
    const nPredict = body.n_predict === undefined || body.n_predict === -1 ? null : intField(body, 'n_predict', 0);
    const maxTokens = this.checkContext(promptIds.length, nPredict);
    const started = await this.run(request, body, { promptIds, maxTokens, stop: stopList(body.stop), ignoreEos: body.ignore_eos === true });
    const { gen } = started;
    const nProbs = typeof body.n_probs === 'number' ? body.n_probs : 0;
    const entries = this.tokenLogprobs(promptIds, gen.ids, gen.logprobs, nProbs);
    const topIds = (k: number) => entries[k]!.top_logprobs;
    const stopType = gen.finish === 'length' ? 'limit' : typeof gen.matched === 'string' ? 'word' : 'eos';
    const result: Record<string, unknown> = {
      index: 0,
      content: this.tokenizer.decode(gen.matchedEos ? gen.ids.slice(0, -1) : gen.ids, { skipSpecialTokens: true }),
      tokens: body.return_tokens === true ? gen.ids : [],
      id_slot: 0,
      stop: true,
      model: this.servedModelName,
      tokens_predicted: gen.ids.length,
      tokens_evaluated: promptIds.length,
      tokens_cached: started.cachedTokens,
      stop_type: stopType,
      stopping_word: typeof gen.matched === 'string' ? gen.matched : '',
      truncated: false,
      weight_version: started.weightVersion,
    };
    if (nProbs > 0) {
      result.completion_probabilities = gen.ids.map((id, k) => ({
        id,
        token: entries[k]!.token,
        bytes: entries[k]!.bytes,
        logprob: gen.logprobs[k]!,
        top_logprobs: topIds(k).map((t) => ({ id: this.tokenizer.tokenToId(t.token) ?? null, token: t.token, bytes: t.bytes, logprob: t.logprob })),
      }));
    }
    return json(result);
  }

  // --- vLLM /tokenize ------------------------------------------------------------------------------------------------

  private async tokenize(request: Request): Promise<Response> {
    const body = await readBody(request);
    let ids: number[];
    if (Array.isArray(body.messages)) {
      const kwargs = (body.chat_template_kwargs && typeof body.chat_template_kwargs === 'object' ? body.chat_template_kwargs : {}) as Record<string, unknown>;
      try {
        ids = this.tokenizer.renderChatIds(body.messages as ChatMessage[], {
          tools: Array.isArray(body.tools) ? (body.tools as ChatTool[]) : [],
          addGenerationPrompt: body.add_generation_prompt !== false,
          enableThinking: typeof kwargs.enable_thinking === 'boolean' ? kwargs.enable_thinking : undefined,
          extra: kwargs,
        });
      } catch (error) {
        throw new SimHttpError(400, `cannot apply the chat template: ${error instanceof Error ? error.message : String(error)}`);
      }
    } else if (typeof body.prompt === 'string') ids = this.tokenizer.encode(body.prompt);
    else throw new SimHttpError(400, 'either messages or prompt (a string) is required');
    return json({ count: ids.length, max_model_len: this.maxModelLen, tokens: ids, token_strs: body.return_token_strs === true ? ids.map((id) => this.tokenizer.idToToken(id) ?? '') : null });
  }
}

/**
 * The session a request belongs to: header `x-polar-session`, else SGLang's `rid` up to its first `:`
 * (so one session's requests can carry distinct rids), else "".
 */
function sessionOf(request: Request, body: Body): string {
  const header = request.headers.get('x-polar-session');
  if (header) return header;
  if (typeof body.rid === 'string') return body.rid.split(':')[0]!;
  return '';
}

function thinkingState(promptTail: string): ThinkingState {
  if (promptTail.endsWith('<think>\n\n</think>\n\n')) return 'disabled';
  if (promptTail.endsWith('<think>\n')) return 'opened';
  return 'none';
}

/** Which part of the streamed text a character offset is in: reasoning, content, or hidden (tags, tool calls). */
function chatRegions(text: string, toolsCalled: boolean, promptOpenedThinking: boolean): (offset: number) => 'reasoning' | 'content' | 'hidden' {
  const start = text.indexOf('<think>');
  const end = text.indexOf('</think>');
  const reasoningFrom = start >= 0 ? start + 7 : 0;
  const hasReasoning = end >= 0 || (promptOpenedThinking && start < 0);
  const reasoningTo = end >= 0 ? end : hasReasoning ? text.length : 0;
  const contentFrom = end >= 0 ? end + 8 : hasReasoning ? text.length : start >= 0 ? start + 7 : 0;
  const toolFrom = toolsCalled ? text.indexOf('<tool_call>', contentFrom) : -1;
  return (offset) => {
    if (hasReasoning && offset >= reasoningFrom && offset < reasoningTo) return 'reasoning';
    if (offset < contentFrom) return 'hidden';
    if (toolFrom >= 0 && offset >= toolFrom) return 'hidden';
    return 'content';
  };
}

