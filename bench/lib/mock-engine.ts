/**
 * The instant mock engine of bench/proxy-peers.ts, run in its own process:
 * `bun bench/lib/mock-engine.ts --port N`. It answers OpenAI Chat at once, as JSON or SSE (`stream: true`), with a
 * fixed short answer. Like vLLM ≥ 0.10.2 it adds `prompt_token_ids`, `choices[0].token_ids` and per-token logprobs
 * only when the request asks (`return_token_ids`, `logprobs`), so a capturing proxy pays for the bytes it asks for
 * and the peers do not. Prompt ids are one per 4 request bytes, about what a BPE tokenizer gives for JSON-ish text.
 * Source: https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html (extra parameters).
 */
const portAt = process.argv.indexOf('--port');
const port = Number(process.argv[portAt + 1] ?? 0);
if (portAt < 0 || !Number.isInteger(port) || port <= 0) {
  console.error('usage: bun bench/lib/mock-engine.ts --port N');
  process.exit(2);
}

const MODEL = 'mock';
const WORDS = ['The', ' directory', ' holds', ' README', '.txt', ' and', ' main', '.py', '.'];
const TOKEN_IDS = [785, 6220, 9982, 61945, 3909, 323, 1887, 7197, 13, 151645];
const TEXT = WORDS.join('');

// Prompt id arrays are cached per length: the mock must stay cheap so the proxy, not the mock, is measured.
const promptIdCache = new Map<number, string>();
function promptIdsJson(n: number): string {
  let json = promptIdCache.get(n);
  if (json === undefined) {
    const ids = new Array<number>(n);
    for (let i = 0; i < n; i++) ids[i] = 1000 + ((i * 7919) % 140000);
    json = JSON.stringify(ids);
    promptIdCache.set(n, json);
  }
  return json;
}

const LOGPROBS_JSON = JSON.stringify({ content: TOKEN_IDS.map((_, k) => ({ token: WORDS[k] ?? '', logprob: -0.015625 * (k + 1), bytes: null, top_logprobs: [] })) });

function completionJson(req: Record<string, unknown>, bodyBytes: number, created: number): string {
  const promptTokens = Math.max(1, Math.round(bodyBytes / 4));
  const usage = `{"prompt_tokens":${promptTokens},"completion_tokens":${TOKEN_IDS.length},"total_tokens":${promptTokens + TOKEN_IDS.length}}`;
  const withIds = req.return_token_ids === true;
  const logprobs = req.logprobs === true ? LOGPROBS_JSON : 'null';
  return (
    `{"id":"chatcmpl-mock","object":"chat.completion","created":${created},"model":"${MODEL}",` +
    `"choices":[{"index":0,"message":{"role":"assistant","content":${JSON.stringify(TEXT)}},"logprobs":${logprobs},"finish_reason":"stop"${withIds ? `,"token_ids":${JSON.stringify(TOKEN_IDS)}` : ''}}],` +
    `"usage":${usage}${withIds ? `,"prompt_token_ids":${promptIdsJson(promptTokens)}` : ''}}`
  );
}

/**
 * The SSE answer. With `return_token_ids`, like vLLM: the first chunk carries `prompt_token_ids` (top level) and each
 * content chunk its `token_ids`, with `logprobs.content` when `logprobs` is asked for.
 */
function streamBody(req: Record<string, unknown>, created: number, bodyBytes: number, includeUsage: boolean): string {
  const withIds = req.return_token_ids === true;
  const promptTokens = Math.max(1, Math.round(bodyBytes / 4));
  const head = `{"id":"chatcmpl-mock","object":"chat.completion.chunk","created":${created},"model":"${MODEL}","choices":[`;
  const events = [`data: ${head}{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]${withIds ? `,"prompt_token_ids":${promptIdsJson(promptTokens)}` : ''}}\n\n`];
  WORDS.forEach((word, k) => {
    const ids = withIds ? `,"token_ids":[${TOKEN_IDS[k]}]` : '';
    const logprobs = withIds && req.logprobs === true ? `,"logprobs":{"content":[{"token":${JSON.stringify(word)},"logprob":${-0.015625 * (k + 1)},"bytes":null,"top_logprobs":[]}]}` : '';
    events.push(`data: ${head}{"index":0,"delta":{"content":${JSON.stringify(word)}}${logprobs},"finish_reason":null${ids}}]}\n\n`);
  });
  const last = TOKEN_IDS.length - 1; // the end-of-turn id comes with the finish chunk
  const lastLogprob = withIds && req.logprobs === true ? `,"logprobs":{"content":[{"token":"","logprob":${-0.015625 * (last + 1)},"bytes":null,"top_logprobs":[]}]}` : '';
  events.push(`data: ${head}{"index":0,"delta":{}${lastLogprob},"finish_reason":"stop"${withIds ? `,"token_ids":[${TOKEN_IDS[last]}]` : ''}}]}\n\n`);
  if (includeUsage) {
    events.push(`data: ${head}],"usage":{"prompt_tokens":${promptTokens},"completion_tokens":${TOKEN_IDS.length},"total_tokens":${promptTokens + TOKEN_IDS.length}}}\n\n`);
  }
  events.push('data: [DONE]\n\n');
  return events.join('');
}

const server = Bun.serve({
  hostname: '127.0.0.1',
  port,
  async fetch(request) {
    const path = new URL(request.url).pathname;
    if (request.method === 'GET' && path.endsWith('/models')) return Response.json({ object: 'list', data: [{ id: MODEL, object: 'model', owned_by: 'bench' }] });
    if (request.method === 'GET' && path === '/version') return Response.json({ version: '0.11.0' });
    if (request.method === 'GET' && (path === '/' || path === '/health')) return new Response('ok');
    if (request.method !== 'POST' || !path.endsWith('/chat/completions')) return new Response('not found', { status: 404 });
    const text = await request.text();
    let req: Record<string, unknown>;
    try {
      req = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return Response.json({ error: { message: 'malformed JSON', type: 'invalid_request_error' } }, { status: 400 });
    }
    const created = Math.floor(Date.now() / 1000);
    if (req.stream === true) {
      const usage = (req.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
      return new Response(streamBody(req, created, text.length, usage), { headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' } });
    }
    return new Response(completionJson(req, text.length, created), { headers: { 'content-type': 'application/json' } });
  },
});
console.log(`mock engine listening on ${server.url}`);
