/**
 * SGLang's native `POST /generate`: `input_ids` (or `text`) in, `output_ids`, text and `meta_info` (finish reason,
 * `output_token_logprobs`, `weight_version`) out. https://docs.sglang.ai/basic_usage/native_api.html
 */
import { intField, json, readBody, SimHttpError, stopList, tokenIdsField, type Body } from '../request.ts';
import type { SimServer, Started } from '../server.ts';

export function sglangMeta(sim: SimServer, started: Started, rid: string, withLogprobs: boolean) {
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
    e2e_latency: (sim.clock() - started.startedAt) / 1000,
  };
  if (withLogprobs) meta.output_token_logprobs = gen.ids.map((id, i) => [gen.logprobs[i]!, id, null]);
  return meta;
}

export async function sglangGenerate(sim: SimServer, request: Request): Promise<Response> {
  const body = await readBody(request);
  if (body.stream === true) throw new SimHttpError(400, 'the simulator serves /generate without streaming');
  let promptIds: number[];
  if (body.input_ids !== undefined) promptIds = sim.promptFromBody(body.input_ids, 'input_ids');
  else if (typeof body.text === 'string') promptIds = sim.tokenizer.encode(body.text);
  else throw new SimHttpError(400, 'either input_ids or text is required (one prompt; batches are not supported)');
  const sampling = (body.sampling_params && typeof body.sampling_params === 'object' ? body.sampling_params : {}) as Body;
  const maxTokens = sim.checkContext(promptIds.length, intField(sampling, 'max_new_tokens', 128)); // SGLang's default is 128
  const rid = typeof body.rid === 'string' ? body.rid : sim.newId('rid').split('_').pop()!;
  const started = await sim.run(request, body, {
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
  return json({ text: sim.tokenizer.decode(ids, { skipSpecialTokens: sampling.skip_special_tokens !== false }), output_ids: gen.ids, meta_info: sglangMeta(sim, started, rid, body.return_logprob === true) });
}
