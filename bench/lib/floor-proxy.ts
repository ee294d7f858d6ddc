/**
 * The floor under any Bun proxy that reads both JSON documents: a minimal `Bun.serve` that, per call, reads the
 * request's bytes, decodes and `JSON.parse`s them, POSTs a fixed, pre-serialised OpenAI Chat body of the same size
 * (with vLLM's capture flags, so the mock echoes ~25k prompt ids for a 100 KB call) to the engine, reads and
 * `JSON.parse`s the answer, and replies with a small JSON in the caller's shape (OpenAI Chat on
 * `/v1/chat/completions`, else Anthropic Messages). No translation, no capture, no store.
 * bench/proxy-cpu.ts (`floor-*` variants) and bench/proxy-peers.ts (JSON variants) measure it beside `polar proxy`:
 * what is left above it is ours.
 * Usage: bun bench/lib/floor-proxy.ts --port N --engine-url URL
 */
import { chatBodies } from './requests.ts';

const arg = (name: string) => {
  const at = process.argv.indexOf(name);
  return at < 0 ? undefined : process.argv[at + 1];
};
const port = Number(arg('--port'));
const engineUrl = arg('--engine-url');
if (!Number.isInteger(port) || port <= 0 || !engineUrl) {
  console.error('usage: bun bench/lib/floor-proxy.ts --port N --engine-url URL');
  process.exit(2);
}
const decoder = new TextDecoder('utf-8', { fatal: true });
const engineBodies = Object.fromEntries(
  (['small', 'large'] as const).map((size) => [size, new TextEncoder().encode(JSON.stringify({ ...chatBodies()[size], stream: false, logprobs: true, top_logprobs: 0, return_token_ids: true }))]),
) as Record<'small' | 'large', Uint8Array>;

Bun.serve({
  port,
  hostname: '127.0.0.1',
  async fetch(req) {
    if (req.method !== 'POST') return new Response('ok');
    const bytes = new Uint8Array(await req.arrayBuffer());
    const request = JSON.parse(decoder.decode(bytes)) as { model?: unknown };
    const size = bytes.byteLength > 10_000 ? 'large' : 'small';
    const answer = await fetch(`${engineUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: engineBodies[size] });
    const parsed = JSON.parse(await answer.text()) as { choices: { message: { content: string } }[] };
    const content = parsed.choices[0]!.message.content;
    if (new URL(req.url).pathname === '/v1/chat/completions') {
      return Response.json({ id: 'chatcmpl-floor', object: 'chat.completion', model: request.model, choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }] });
    }
    return Response.json({ id: 'msg_floor', type: 'message', role: 'assistant', content: [{ type: 'text', text: content }], model: request.model, stop_reason: 'end_turn' });
  },
});
