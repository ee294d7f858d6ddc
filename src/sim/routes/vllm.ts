/**
 * vLLM's token-in endpoints: `POST /v1/completions` (prompt as token ids, `return_token_ids`, JSON or streamed) and `POST /tokenize`
 * (messages through the chat template, or a prompt string).
 * https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html#completions-api,
 * https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html#tokenizer-api
 */
import type { ChatMessage, ChatTool } from '../../tokenization/chat-messages.ts';
import { guidedSchemaOfOpenAiBody } from '../guided.ts';
import { intField, json, readBody, SimHttpError, stopList, tokenIdsField, type Body } from '../request.ts';
import type { SimServer, Started } from '../server.ts';
import { dataFrame, pacedTokenStream } from '../stream.ts';

export async function completions(sim: SimServer, request: Request): Promise<Response> {
  const body = await readBody(request);
  if (body.echo === true) throw new SimHttpError(400, 'echo is not supported by the simulator');
  if (body.n !== undefined && body.n !== 1) throw new SimHttpError(400, 'the simulator supports n = 1 only');
  const promptIds = sim.promptFromBody(body.prompt, 'prompt');
  const maxTokens = sim.checkContext(promptIds.length, intField(body, 'max_tokens', 16, 1)); // vLLM's default is 16; it refuses < 1 with 400
  const started = await sim.run(request, body, {
    promptIds,
    maxTokens,
    stop: stopList(body.stop),
    stopTokenIds: tokenIdsField(body.stop_token_ids, 'stop_token_ids') ?? [],
    ignoreEos: body.ignore_eos === true,
    holdSlot: body.stream === true,
    guided: guidedSchemaOfOpenAiBody(body),
  });
  if (body.stream === true) return completionsStream(sim, body, started);
  const { gen } = started;
  const skip = body.skip_special_tokens !== false;
  let logprobs: Record<string, unknown> | null = null;
  if (typeof body.logprobs === 'number') {
    const entries = sim.tokenLogprobs(promptIds, gen.ids, gen.logprobs, body.logprobs);
    const offsets: number[] = [];
    let offset = 0;
    for (const piece of sim.tokenPieces(gen.ids, skip)) {
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
    text: sim.tokenizer.decode(gen.ids, { skipSpecialTokens: skip }),
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
    id: `cmpl-${sim.newId('cmpl').split('_').pop()}`,
    object: 'text_completion',
    created: Math.floor(started.startedAt / 1000),
    model: typeof body.model === 'string' ? body.model : sim.servedModelName,
    choices: [choice],
    service_tier: null,
    system_fingerprint: null,
    usage: sim.usage(started),
    kv_transfer_params: null,
  });
}

/**
 * `stream: true`: one chunk per decode batch with its `text`, `token_ids` (`return_token_ids`) and
 * `logprobs.token_logprobs` deltas, `prompt_token_ids` on the first, `finish_reason`/`stop_reason` on the last, then
 * a usage chunk (`stream_options.include_usage`) and `[DONE]`, as vLLM streams completions.
 */
function completionsStream(sim: SimServer, body: Body, started: Started): Response {
  const { gen, promptIds } = started;
  const withIds = body.return_token_ids === true;
  const withLogprobs = typeof body.logprobs === 'number';
  const pieces = sim.tokenPieces(gen.ids, body.skip_special_tokens !== false);
  const head = { id: `cmpl-${sim.newId('cmpl').split('_').pop()}`, object: 'text_completion', created: Math.floor(started.startedAt / 1000), model: typeof body.model === 'string' ? body.model : sim.servedModelName };
  const includeUsage = (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
  const finishOf = (last: boolean) => (last ? { finish_reason: gen.finish, stop_reason: gen.matchedEos ? null : gen.matched } : { finish_reason: null, stop_reason: null });
  return pacedTokenStream(sim.timing, started, {
    tokens(from, to) {
      const choice: Record<string, unknown> = {
        index: 0, text: pieces.slice(from, to).join(''), logprobs: withLogprobs ? { token_logprobs: gen.logprobs.slice(from, to) } : null, ...finishOf(to === gen.ids.length),
      };
      if (withIds) {
        choice.token_ids = gen.ids.slice(from, to);
        if (from === 0) choice.prompt_token_ids = promptIds;
      }
      return dataFrame({ ...head, choices: [choice] });
    },
    tail() {
      let out = gen.ids.length === 0 ? dataFrame({ ...head, choices: [{ index: 0, text: '', logprobs: null, ...finishOf(true), ...(withIds ? { token_ids: [], prompt_token_ids: promptIds } : {}) }] }) : '';
      if (includeUsage) out += dataFrame({ ...head, choices: [], usage: sim.usage(started) });
      return `${out}data: [DONE]\n\n`;
    },
  });
}

export async function tokenize(sim: SimServer, request: Request): Promise<Response> {
  const body = await readBody(request);
  let ids: number[];
  if (Array.isArray(body.messages)) {
    const kwargs = (body.chat_template_kwargs && typeof body.chat_template_kwargs === 'object' ? body.chat_template_kwargs : {}) as Record<string, unknown>;
    try {
      ids = sim.tokenizer.renderChatIds(body.messages as ChatMessage[], {
        tools: Array.isArray(body.tools) ? (body.tools as ChatTool[]) : [],
        addGenerationPrompt: body.add_generation_prompt !== false,
        enableThinking: typeof kwargs.enable_thinking === 'boolean' ? kwargs.enable_thinking : undefined,
        extra: kwargs,
      });
    } catch (error) {
      throw new SimHttpError(400, `cannot apply the chat template: ${error instanceof Error ? error.message : String(error)}`);
    }
  } else if (typeof body.prompt === 'string') ids = sim.tokenizer.encode(body.prompt);
  else throw new SimHttpError(400, 'either messages or prompt (a string) is required');
  return json({ count: ids.length, max_model_len: sim.maxModelLen, tokens: ids, token_strs: body.return_token_strs === true ? ids.map((id) => sim.tokenizer.idToToken(id) ?? '') : null });
}
