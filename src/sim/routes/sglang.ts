/**
 * SGLang's native `POST /generate`: `input_ids` (or `text`) in, `output_ids`, text and `meta_info` (finish reason,
 * `output_token_logprobs`, `weight_version`) out. https://docs.sglang.ai/basic_usage/native_api.html
 */
import { guidedSchemaOfSglang } from '../guided.ts';
import { intField, json, readBody, SimHttpError, stopList, tokenIdsField, type Body } from '../request.ts';
import type { SimServer, Started } from '../server.ts';
import { dataFrame, pacedTokenStream } from '../stream.ts';

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
  let promptIds: number[];
  if (body.input_ids !== undefined) promptIds = sim.promptFromBody(body.input_ids, 'input_ids');
  else if (typeof body.text === 'string') promptIds = sim.tokenizer.encode(body.text);
  else throw new SimHttpError(400, 'either input_ids or text is required (one prompt; batches are not supported)');
  const sampling = (body.sampling_params && typeof body.sampling_params === 'object' ? body.sampling_params : {}) as Body;
  const maxTokens = sim.checkContext(promptIds.length, intField(sampling, 'max_new_tokens', 128, 1)); // SGLang's default is 128; the simulator samples ≥ 1 token
  const rid = typeof body.rid === 'string' ? body.rid : sim.newId('rid').split('_').pop()!;
  const started = await sim.run(request, body, {
    promptIds,
    maxTokens,
    stop: stopList(sampling.stop),
    stopTokenIds: tokenIdsField(sampling.stop_token_ids, 'sampling_params.stop_token_ids') ?? [],
    ignoreEos: sampling.ignore_eos === true,
    holdSlot: body.stream === true,
    guided: guidedSchemaOfSglang(sampling),
  });
  const { gen } = started;
  // no_stop_trim=false (the default) drops the matched stop token from the text, never from output_ids.
  const trim = sampling.no_stop_trim !== true && gen.finish === 'stop' && typeof gen.matched === 'number';
  const skip = sampling.skip_special_tokens !== false;
  const withLogprobs = body.return_logprob === true;
  if (body.stream !== true) {
    const ids = trim ? gen.ids.slice(0, -1) : gen.ids;
    return json({ text: sim.tokenizer.decode(ids, { skipSpecialTokens: skip }), output_ids: gen.ids, meta_info: sglangMeta(sim, started, rid, withLogprobs) });
  }
  // SGLang's default streaming output is cumulative: every chunk carries the whole text, output_ids and logprobs so
  // far; meta_info.finish_reason is null until the last chunk.
  const chunkAt = (to: number): Record<string, unknown> => {
    const last = to === gen.ids.length;
    const meta = sglangMeta(sim, started, rid, withLogprobs);
    meta.completion_tokens = to;
    if (withLogprobs) meta.output_token_logprobs = (meta.output_token_logprobs as unknown[]).slice(0, to);
    if (!last) meta.finish_reason = null;
    const ids = gen.ids.slice(0, to);
    return { text: sim.tokenizer.decode(last && trim ? ids.slice(0, -1) : ids, { skipSpecialTokens: skip }), output_ids: ids, meta_info: meta };
  };
  return pacedTokenStream(sim.timing, started, {
    tokens: (_from, to) => dataFrame(chunkAt(to)),
    tail: () => `${gen.ids.length === 0 ? dataFrame(chunkAt(0)) : ''}data: [DONE]\n\n`,
  });
}
