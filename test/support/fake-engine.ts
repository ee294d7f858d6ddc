/**
 * A scripted fake inference engine for tests: a real HTTP server on Bun.serve({port: 0}) that answers
 * `POST /v1/chat/completions` in vLLM shape or SGLang shape with token ids and logprobs (docs/protocol-notes.md#vllm, docs/protocol-notes.md#sglang),
 * plus `GET /v1/models`, `GET /version` and `POST /tokenize`. Replies are scripted: text, one tool call, parallel tool
 * calls, reasoning, truncation by length, an HTTP error (5xx), a hang (timeout), a context overflow.
 *
 * Token ids are deterministic: the prompt ids are the UTF-8 bytes of the JSON of `messages` + `tools` (+1000), the
 * response ids the UTF-8 bytes of a Qwen3-style rendering of the reply (+1000) followed by `<|im_end|>` (151645) when
 * the turn ended; logprob k is −(k mod 7 + 1)/8 (exact in float32). Both shapes carry the same ids and logprobs, so
 * a proxy must produce identical records from either.
 *
 * Usage: `const engine = await startFakeEngine({shape: 'vllm', script: [{kind: 'text', text: 'hi'}]})`; every chat
 * request consumes the next script entry (the last one repeats), `engine.requests` holds what arrived, and
 * `engine.stop()` in afterAll.
 */
export type FakeReply =
  /** `stopString`: the turn ended on this client stop string (vLLM `stop_reason`, SGLang `matched_stop`), without EOS. */
  | { kind: 'text'; text: string; reasoning?: string; stopString?: string }
  | { kind: 'tool-calls'; calls: Array<{ name: string; arguments: string | Record<string, unknown>; id?: string }>; text?: string; reasoning?: string }
  /** Truncated by the max_tokens cap: finish_reason `length`, no EOS. */
  | { kind: 'length'; text: string }
  | { kind: 'error'; status: number; message: string }
  /** Never answers (until the server stops): for engine timeouts. */
  | { kind: 'hang' }
  /** The engine's own overflow error (vLLM or SGLang wording, by shape). */
  | { kind: 'context-overflow' };

export interface FakeEngineOptions {
  shape: 'vllm' | 'sglang';
  servedModel?: string;
  /** A list consumed in order (the last entry repeats) or a function of the request body and call index. */
  script?: FakeReply[] | ((body: Record<string, unknown>, index: number) => FakeReply);
  /** SGLang only: whether this build accepts `return_token_ids` (false → 400 when it is sent). Default true. */
  acceptsReturnTokenIds?: boolean;
  /** Corrupt the capture: drop the last logprob (tests the length check). */
  dropLastLogprob?: boolean;
  /**
   * The engine's own count of reasoning tokens, where builds of the shape send it: vLLM
   * `usage.completion_tokens_details.reasoning_tokens` (vllm-project/vllm PR #45802), SGLang `usage.reasoning_tokens`
   * (sgl-project/sglang PR #15562; 0 on builds before it). Default: none sent.
   */
  reasoningTokens?: number;
  /** SGLang only: `meta_info.weight_version`. */
  weightVersion?: string;
  /** vLLM only: what GET /version reports (default 0.11.0). */
  version?: string;
  /**
   * What the fake chat template does with a system message after a user turn in POST /tokenize: render it (default,
   * Qwen3), reject the conversation with 400 (Qwen3.5's "System message must be at the beginning."), or drop it.
   */
  systemAfterUser?: 'render' | 'reject' | 'drop';
}

export interface FakeEngineRequest {
  path: string;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

export interface FakeEngine {
  url: string;
  port: number;
  readonly requests: FakeEngineRequest[];
  /** Chat completion requests only (probe requests excluded: those with `max_tokens: 1` and a lone "hi"). */
  chatRequests(): FakeEngineRequest[];
  setScript(script: FakeEngineOptions['script']): void;
  stop(): Promise<void>;
}

export const EOS_ID = 151645;
const encoder = new TextEncoder();

/** Deterministic fake token ids of a text: UTF-8 bytes + 1000. */
export function fakeIds(text: string): number[] {
  return Array.from(encoder.encode(text), (b) => b + 1000);
}

/** The fake logprob of sampled position k (exact in float32). */
export function fakeLogprob(k: number): number {
  return -((k % 7) + 1) / 8;
}

function renderReply(reply: Extract<FakeReply, { kind: 'text' | 'tool-calls' | 'length' }>): string {
  let out = '';
  if ('reasoning' in reply && reply.reasoning) out += `<think>\n${reply.reasoning}\n</think>\n\n`;
  if (reply.kind === 'tool-calls') {
    if (reply.text) out += reply.text;
    for (const call of reply.calls) out += `<tool_call>\n${JSON.stringify({ name: call.name, arguments: call.arguments })}\n</tool_call>`;
  } else out += reply.text;
  return out;
}

function isProbe(body: Record<string, unknown>): boolean {
  const messages = body.messages as Array<{ content?: unknown }> | undefined;
  return body.max_tokens === 1 && messages?.length === 1 && messages[0]?.content === 'hi';
}

/** Start a fake engine on 127.0.0.1 with a free port. */
export async function startFakeEngine(options: FakeEngineOptions): Promise<FakeEngine> {
  const served = options.servedModel ?? 'fake-model';
  let script = options.script ?? [{ kind: 'text', text: 'Hello from the fake engine.' }];
  let index = 0;
  const requests: FakeEngineRequest[] = [];
  const hanging = new Set<() => void>();
  let callId = 0;

  const json = (status: number, body: unknown) => Response.json(body, { status });

  function nextReply(body: Record<string, unknown>): FakeReply {
    if (isProbe(body)) return { kind: 'text', text: 'h' };
    const i = index++;
    if (typeof script === 'function') return script(body, i);
    return script[Math.min(i, script.length - 1)] ?? { kind: 'text', text: '' };
  }

  function completion(body: Record<string, unknown>, reply: Extract<FakeReply, { kind: 'text' | 'tool-calls' | 'length' }>): Response {
    const promptIds = fakeIds(JSON.stringify({ messages: body.messages, tools: body.tools ?? [] }));
    const truncated = reply.kind === 'length';
    const stopString = reply.kind === 'text' ? reply.stopString : undefined;
    const responseIds = fakeIds(renderReply(reply) + (stopString ?? ''));
    if (!truncated && stopString === undefined) responseIds.push(EOS_ID);
    const matched = stopString ?? EOS_ID;
    const logprobs = responseIds.map((_, k) => fakeLogprob(k));
    const reportedLogprobs = options.dropLastLogprob ? logprobs.slice(0, -1) : logprobs;
    const reasoning = 'reasoning' in reply ? reply.reasoning : undefined;
    const toolCalls =
      reply.kind === 'tool-calls'
        ? reply.calls.map((call) => ({
            id: call.id ?? `chatcmpl-tool-${++callId}`,
            type: 'function',
            function: { name: call.name, arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments) },
          }))
        : undefined;
    const content = reply.kind === 'tool-calls' ? (reply.text ?? null) : reply.text;
    const finish = truncated ? 'length' : toolCalls ? 'tool_calls' : 'stop';
    const usage: Record<string, unknown> = { prompt_tokens: promptIds.length, completion_tokens: responseIds.length, total_tokens: promptIds.length + responseIds.length };
    if (options.reasoningTokens !== undefined) {
      if (options.shape === 'vllm') usage.completion_tokens_details = { reasoning_tokens: options.reasoningTokens };
      else usage.reasoning_tokens = options.reasoningTokens;
    }
    const logprobContent = reportedLogprobs.map((logprob, k) => ({ token: `token_id:${responseIds[k]}`, logprob, bytes: [], top_logprobs: [] }));
    if (options.shape === 'vllm') {
      const message: Record<string, unknown> = { role: 'assistant', content, tool_calls: toolCalls ?? [] };
      if (reasoning) message.reasoning = reasoning;
      return json(200, {
        id: 'chatcmpl-fake',
        object: 'chat.completion',
        created: 1_700_000_000,
        model: body.model,
        prompt_token_ids: promptIds,
        choices: [{ index: 0, message, logprobs: { content: logprobContent }, finish_reason: finish, stop_reason: truncated ? null : matched, token_ids: responseIds }],
        usage,
      });
    }
    const message: Record<string, unknown> = { role: 'assistant', content, reasoning_content: reasoning ?? null, tool_calls: toolCalls ?? null };
    const choice: Record<string, unknown> = {
      index: 0,
      message,
      // SGLang builds may truncate logprobs.content; the proxy must read meta_info instead.
      logprobs: { content: logprobContent.slice(0, 3) },
      finish_reason: finish,
      matched_stop: truncated ? null : matched,
      prompt_token_ids: promptIds,
      meta_info: {
        id: String(body.rid ?? 'rid'),
        finish_reason: truncated ? { type: 'length', length: responseIds.length } : { type: 'stop', matched },
        prompt_tokens: promptIds.length,
        completion_tokens: responseIds.length,
        cached_tokens: 0,
        output_token_logprobs: reportedLogprobs.map((lp, k) => [lp, responseIds[k], null]),
        ...(options.weightVersion !== undefined ? { weight_version: options.weightVersion } : {}),
      },
    };
    if (body.return_token_ids === true) choice.token_ids = responseIds;
    return json(200, { id: 'fake-sglang', object: 'chat.completion', created: 1_700_000_000, model: body.model, choices: [choice], usage });
  }

  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    idleTimeout: 0,
    async fetch(request) {
      const url = new URL(request.url);
      const headers = Object.fromEntries(request.headers);
      let body: Record<string, unknown> = {};
      if (request.method === 'POST') {
        try {
          body = (await request.json()) as Record<string, unknown>;
        } catch {
          return json(400, { error: { message: 'invalid JSON body', type: 'BadRequestError', code: 400 } });
        }
      }
      requests.push({ path: url.pathname, headers, body });
      if (url.pathname === '/v1/models') {
        return json(200, { object: 'list', data: [{ id: served, object: 'model', created: 1_700_000_000, owned_by: options.shape, max_model_len: 32768 }] });
      }
      if (url.pathname === '/version' && options.shape === 'vllm') return json(200, { version: options.version ?? '0.11.0' });
      if (url.pathname === '/tokenize') {
        let messages = body.messages as { role: string }[] | undefined;
        const late = (messages ?? []).some((m, i) => m.role === 'system' && i > 0);
        if (late && options.systemAfterUser === 'reject') return json(400, { object: 'error', message: 'System message must be at the beginning.', type: 'BadRequestError', code: 400 });
        if (late && options.systemAfterUser === 'drop') messages = messages!.filter((m, i) => m.role !== 'system' || i === 0);
        const tokens = fakeIds(JSON.stringify({ messages, tools: body.tools ?? [] }));
        return json(200, { count: tokens.length, max_model_len: 32768, tokens });
      }
      if (url.pathname !== '/v1/chat/completions') return json(404, { detail: 'Not Found' });
      if (options.shape === 'sglang' && options.acceptsReturnTokenIds === false && body.return_token_ids !== undefined) {
        return json(400, { object: 'error', message: 'Extra inputs are not permitted: return_token_ids', type: 'BadRequestError', code: 400 });
      }
      if (body.model !== served) return json(404, { error: { message: `The model \`${String(body.model)}\` does not exist.`, type: 'NotFoundError', code: 404 } });
      const reply = nextReply(body);
      switch (reply.kind) {
        case 'error':
          return json(reply.status, { error: { message: reply.message, type: 'InternalServerError', code: reply.status } });
        case 'hang':
          return new Promise<Response>((resolve) => {
            const release = () => resolve(json(503, { error: { message: 'fake engine stopped' } }));
            hanging.add(release);
          });
        case 'context-overflow':
          return options.shape === 'vllm'
            ? json(400, {
                error: {
                  message: "This model's maximum context length is 32768 tokens. However, your request has 40000 input tokens. Please reduce the length of the input messages.",
                  type: 'BadRequestError',
                  param: null,
                  code: 400,
                },
              })
            : json(400, { object: 'error', message: "The input (40000 tokens) is longer than the model's context length (32768 tokens).", type: 'BadRequestError', param: null, code: 400 });
        default:
          return completion(body, reply);
      }
    },
  });

  return {
    url: `http://127.0.0.1:${server.port}`,
    port: server.port ?? 0,
    requests,
    chatRequests: () => requests.filter((r) => r.path === '/v1/chat/completions' && !isProbe(r.body)),
    setScript(next) {
      script = next ?? script;
      index = 0;
    },
    async stop() {
      for (const release of hanging) release();
      hanging.clear();
      await server.stop(true);
    },
  };
}

/** A loopback HTTP server in front of an engine: `beforeForward` may delay or hold a request before it is passed on. */
export interface EngineProxy {
  url: string;
  port: number;
  stop(): void;
}

/**
 * Start a pass-through to `upstreamUrl` on 127.0.0.1 (port 0). Every request is forwarded unchanged (method, headers,
 * path, query, body) after `beforeForward(pathname, body)` resolves; `body` is the request text, or undefined for
 * GET and HEAD. Used to slow down or gate an engine without touching its replies.
 */
export function startEngineProxy(upstreamUrl: string, beforeForward: (pathname: string, body: string | undefined) => Promise<void> | void): EngineProxy {
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    idleTimeout: 0,
    async fetch(request) {
      const url = new URL(request.url);
      const body = request.method === 'GET' || request.method === 'HEAD' ? undefined : await request.text();
      await beforeForward(url.pathname, body);
      return fetch(`${upstreamUrl}${url.pathname}${url.search}`, { method: request.method, headers: request.headers, body });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, port: server.port!, stop: () => server.stop(true) };
}

/** A loopback port nothing listens on (bound once, then released): for unreachable-engine and free-port tests. */
export function unusedPort(): number {
  const probe = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() });
  const port = probe.port!;
  probe.stop(true);
  return port;
}
