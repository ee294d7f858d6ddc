/**
 * llama.cpp server's `POST /completion`: token ids in (`prompt`), `tokens`, `content` and per-token
 * `completion_probabilities` out. https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md
 */
import { intField, json, readBody, SimHttpError, stopList } from '../request.ts';
import type { SimServer } from '../server.ts';

export async function llamaCompletion(sim: SimServer, request: Request): Promise<Response> {
  const body = await readBody(request);
  if (body.stream === true) throw new SimHttpError(400, 'the simulator serves /completion without streaming');
  const promptIds = sim.promptFromBody(body.prompt, 'prompt');
  const nPredict = body.n_predict === undefined || body.n_predict === -1 ? null : intField(body, 'n_predict', 0);
  const maxTokens = sim.checkContext(promptIds.length, nPredict);
  const started = await sim.run(request, body, { promptIds, maxTokens, stop: stopList(body.stop), ignoreEos: body.ignore_eos === true });
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
  if (nProbs > 0) {
    result.completion_probabilities = gen.ids.map((id, k) => ({
      id,
      token: entries[k]!.token,
      bytes: entries[k]!.bytes,
      logprob: gen.logprobs[k]!,
      top_logprobs: topIds(k).map((t) => ({ id: sim.tokenizer.tokenToId(t.token) ?? null, token: t.token, bytes: t.bytes, logprob: t.logprob })),
    }));
  }
  return json(result);
}
