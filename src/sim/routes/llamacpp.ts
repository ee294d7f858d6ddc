/**
 * llama.cpp server's `POST /completion` (JSON or `stream: true`): token ids in (`prompt`), `tokens`, `content` and per-token
 * `completion_probabilities` out. https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md
 */
import { guidedSchemaOfLlamaCpp } from '../guided.ts';
import { intField, json, readBody, SimHttpError, stopList } from '../request.ts';
import type { SimServer } from '../server.ts';
import { dataFrame, pacedTokenStream } from '../stream.ts';

export async function llamaCompletion(sim: SimServer, request: Request): Promise<Response> {
  const body = await readBody(request);
  const promptIds = sim.promptFromBody(body.prompt, 'prompt');
  const nPredict = body.n_predict === undefined || body.n_predict === -1 ? null : intField(body, 'n_predict', 0, 1); // the simulator samples ≥ 1 token
  const maxTokens = sim.checkContext(promptIds.length, nPredict);
  const stream = body.stream === true;
  const started = await sim.run(request, body, { promptIds, maxTokens, stop: stopList(body.stop), ignoreEos: body.ignore_eos === true, holdSlot: stream, guided: guidedSchemaOfLlamaCpp(body) });
  const { gen } = started;
  const nProbs = typeof body.n_probs === 'number' ? body.n_probs : 0;
  const entries = sim.tokenLogprobs(promptIds, gen.ids, gen.logprobs, nProbs);
  const topIds = (k: number) => entries[k]!.top_logprobs;
  const stopType = gen.finish === 'length' ? 'limit' : typeof gen.matched === 'string' ? 'word' : 'eos';
  const result: Record<string, unknown> = {
    index: 0,
    content: sim.tokenizer.decode(gen.matchedEos ? gen.ids.slice(0, -1) : gen.ids, { skipSpecialTokens: true }),
    tokens: body.return_tokens === true ? gen.ids : [],
    id_slot: 0,
    stop: true,
    model: sim.servedModelName,
    tokens_predicted: gen.ids.length,
    tokens_evaluated: promptIds.length,
    tokens_cached: started.cachedTokens,
    stop_type: stopType,
    stopping_word: typeof gen.matched === 'string' ? gen.matched : '',
    truncated: false,
    weight_version: started.weightVersion,
  };
  const probabilities = (from: number, to: number) =>
    gen.ids.slice(from, to).map((id, j) => {
      const k = from + j;
      return {
        id,
        token: entries[k]!.token,
        bytes: entries[k]!.bytes,
        logprob: gen.logprobs[k]!,
        top_logprobs: topIds(k).map((t) => ({ id: sim.tokenizer.tokenToId(t.token) ?? null, token: t.token, bytes: t.bytes, logprob: t.logprob })),
      };
    });
  if (!stream) {
    if (nProbs > 0) result.completion_probabilities = probabilities(0, gen.ids.length);
    return json(result);
  }
  // Streamed: one chunk per decode batch ({content, tokens, stop: false, completion_probabilities}); the last chunk
  // has `stop: true` and the totals, without tokens of its own.
  const pieces = sim.tokenPieces(gen.ids, true);
  const visible = gen.matchedEos ? gen.ids.length - 1 : gen.ids.length;
  return pacedTokenStream(sim.timing, started, {
    tokens: (from, to) =>
      dataFrame({
        index: 0, content: pieces.slice(from, Math.min(to, visible)).join(''), tokens: body.return_tokens === true ? gen.ids.slice(from, to) : [], stop: false, id_slot: 0,
        ...(nProbs > 0 ? { completion_probabilities: probabilities(from, to) } : {}),
      }),
    tail: () => dataFrame({ ...result, content: '', tokens: [] }),
  });
}
