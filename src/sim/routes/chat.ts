/**
 * `POST /v1/chat/completions`: the OpenAI chat contract of vLLM and SGLang with their token extensions
 * (`return_token_ids`, `return_prompt_token_ids`, SGLang `return_meta_info`), JSON or streamed at the decode rate.
 * https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html#chat-api,
 * https://docs.sglang.ai/basic_usage/openai_api_completions.html
 */
import type { ChatMessage, ChatTool } from '../../tokenization/chat-messages.ts';
import { promptThinking } from '../../tokenization/families.ts';
import { splitQwen3Reasoning } from '../../tokenization/parsers.ts';
import { intField, json, readBody, SimHttpError, stopList, tokenIdsField, type Body } from '../request.ts';
import type { PromptFacts, SimServer, Started } from '../server.ts';
import { pacedTokenStream } from '../stream.ts';
import { guidedSchemaOfOpenAiBody } from '../guided.ts';
import { sglangMeta } from './sglang.ts';

export async function chatCompletions(sim: SimServer, request: Request): Promise<Response> {
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
    promptText = sim.tokenizer.renderChat(messages, { tools, addGenerationPrompt: body.add_generation_prompt !== false, enableThinking, extra: kwargs });
  } catch (error) {
    throw new SimHttpError(400, `cannot apply the chat template: ${error instanceof Error ? error.message : String(error)}`);
  }
  const promptIds = sim.tokenizer.encode(promptText);
  const requestedMax = body.max_completion_tokens ?? body.max_tokens;
  // vLLM refuses max_tokens < 1 with 400 (SamplingParams: "max_tokens must be at least 1").
  const maxTokens = sim.checkContext(promptIds.length, requestedMax === undefined || requestedMax === null ? null : intField(body, body.max_completion_tokens !== undefined ? 'max_completion_tokens' : 'max_tokens', 0, 1));
  const facts: PromptFacts = { tools, toolResults: messages.filter((m) => m.role === 'tool').length, thinking: promptThinking(sim.family, promptText.slice(-32)) };
  const stream = body.stream === true;
  const started = await sim.run(request, body, {
    promptIds,
    facts,
    maxTokens,
    stop: stopList(body.stop),
    stopTokenIds: tokenIdsField(body.stop_token_ids, 'stop_token_ids') ?? [],
    ignoreEos: body.ignore_eos === true,
    holdSlot: stream,
    guided: guidedSchemaOfOpenAiBody(body),
  });
  const parseTools = tools.length > 0 && body.tool_choice !== 'none';
  const ctx = { body, started, parseTools, promptOpenedThinking: facts.thinking === 'opened' };
  return stream ? chatStream(sim, ctx) : json(chatResponse(sim, ctx));
}

export function chatResponse(sim: SimServer, ctx: { body: Body; started: Started; parseTools: boolean; promptOpenedThinking: boolean }) {
  const { body, started, parseTools } = ctx;
  const { gen, promptIds } = started;
  const text = sim.tokenizer.decode(gen.ids, { skipSpecialTokens: body.skip_special_tokens !== false });
  const parsed = sim.family.parse(text, { promptOpenedThinking: ctx.promptOpenedThinking, tools: Array.isArray(body.tools) ? (body.tools as ChatTool[]) : [] });
  const valid = parseTools && parsed.toolCalls.length > 0 && parsed.toolCalls.every((c) => !c.parserInvalid);
  let content: string | null;
  if (valid) content = parsed.content === '' ? null : parsed.content;
  else content = splitQwen3Reasoning(text, { promptOpenedThinking: ctx.promptOpenedThinking }).rest;
  if (content === '' && parsed.reasoning !== null) content = null;
  const toolCalls = valid ? parsed.toolCalls.map((c) => ({ id: `chatcmpl-tool-${sim.newId('call').split('_').pop()}`, type: 'function', function: { name: c.name, arguments: c.arguments } })) : [];
  const finishReason = gen.finish === 'length' ? 'length' : valid ? 'tool_calls' : 'stop';
  const logprobs = body.logprobs === true ? { content: sim.tokenLogprobs(promptIds, gen.ids, gen.logprobs, typeof body.top_logprobs === 'number' ? body.top_logprobs : 0) } : null;
  const choice: Record<string, unknown> = {
    index: 0,
    message: { role: 'assistant', content, refusal: null, annotations: null, audio: null, function_call: null, tool_calls: toolCalls, reasoning: parsed.reasoning, reasoning_content: parsed.reasoning },
    logprobs,
    finish_reason: finishReason,
    stop_reason: gen.matchedEos ? null : gen.matched,
  };
  if (body.return_token_ids === true) choice.token_ids = gen.ids;
  if (body.return_prompt_token_ids === true) choice.prompt_token_ids = promptIds;
  if (body.return_meta_info === true) choice.meta_info = sglangMeta(sim, started, String(body.rid ?? ''), true);
  return {
    id: `chatcmpl-${sim.newId('chat').split('_').pop()}`,
    object: 'chat.completion',
    created: Math.floor(started.startedAt / 1000),
    model: typeof body.model === 'string' ? body.model : sim.servedModelName,
    choices: [choice],
    service_tier: null,
    system_fingerprint: null,
    usage: sim.usage(started),
    prompt_logprobs: null,
    prompt_token_ids: body.return_token_ids === true ? promptIds : null,
    kv_transfer_params: null,
    metadata: { weight_version: started.weightVersion },
  };
}

export function chatStream(sim: SimServer, ctx: { body: Body; started: Started; parseTools: boolean; promptOpenedThinking: boolean }): Response {
  const { body, started } = ctx;
  const { gen, promptIds } = started;
  const id = `chatcmpl-${sim.newId('chat').split('_').pop()}`;
  const created = Math.floor(started.startedAt / 1000);
  const model = typeof body.model === 'string' ? body.model : sim.servedModelName;
  const withIds = body.return_token_ids === true;
  const final = chatResponse(sim, ctx);
  const finalChoice = final.choices[0] as { message: { tool_calls: unknown[] }; finish_reason: string; stop_reason: unknown };
  const skip = body.skip_special_tokens !== false;
  const pieces = sim.tokenPieces(gen.ids, skip);
  const fullText = pieces.join('');
  const regions = chatRegions(fullText, finalChoice.message.tool_calls.length > 0, ctx.promptOpenedThinking);
  const logprobs = body.logprobs === true ? sim.tokenLogprobs(promptIds, gen.ids, gen.logprobs, typeof body.top_logprobs === 'number' ? body.top_logprobs : 0) : null;
  const includeUsage = (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
  const chunk = (choice: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [choice], ...extra })}\n\n`;
  let offset = 0;
  return pacedTokenStream(sim.timing, started, {
    head: chunk({ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }, withIds ? { prompt_token_ids: promptIds } : {}),
    tokens: (from, to) => {
      const out: string[] = [];
      for (let index = from; index < to; index++) {
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
      return out.join('');
    },
    tail: () => {
      let out = '';
      if (gen.ids.length === 0) out += chunk({ index: 0, delta: {}, logprobs: null, finish_reason: finalChoice.finish_reason, stop_reason: finalChoice.stop_reason });
      if (includeUsage) out += `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [], usage: final.usage })}\n\n`;
      return `${out}data: [DONE]\n\n`;
    },
  });
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

