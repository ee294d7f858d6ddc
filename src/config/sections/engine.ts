/**
 * `engine`: the inference engine the proxy forwards to. Kinds and capture modes: docs/architecture.md#chat-mode-and-token-mode,
 * docs/protocol-notes.md#inference-engines. Sampling defaults fill only fields a request leaves out; they are never clamps.
 */
import { z } from 'zod';

/** Sampling parameters applied when a request omits them (vLLM/SGLang sampling-params names). */
export const defaultSamplingSchema = z
  .strictObject({
    /** Softmax temperature; 1.0 samples the policy's own distribution, which RL needs. */
    temperature: z.number().min(0).default(1.0).describe('Softmax temperature used when a request omits it; 1.0 samples the policy distribution as is.'),
    /** Nucleus mass in (0, 1]; 1 disables it. */
    top_p: z.number().gt(0).max(1).default(1.0).describe('Nucleus sampling mass in (0, 1]; 1 disables it.'),
    /** Top-k cut-off; -1 disables it (vLLM/SGLang convention). */
    top_k: z.number().int().min(-1).default(-1).describe('Top-k cut-off; -1 disables it (vLLM/SGLang convention).'),
    /** Min-p cut-off in [0, 1]; 0 disables it. */
    min_p: z.number().min(0).max(1).default(0).describe('Min-p cut-off in [0, 1]; 0 disables it.'),
    /** Max new tokens when the request gives none; null leaves it to the engine (context length). */
    max_tokens: z.number().int().positive().nullable().default(null).describe('Max new tokens when a request gives none; null leaves the limit to the engine.'),
  })
  .describe('Sampling parameters applied when a request leaves them out; values a request sets are forwarded unchanged.');

/** The `engine` section. */
export const engineSchema = z
  .strictObject({
    /** Which engine contract to speak. */
    kind: z.enum(['sim', 'vllm', 'sglang', 'llamacpp', 'openai']).default('sim').describe('Engine contract: sim (built-in simulator), vllm, sglang, llamacpp or openai (no token capture).'),
    /** Base URL of the engine server, without a trailing path. */
    url: z.url().default('http://127.0.0.1:8000').describe('Base URL of the engine server (scheme, host, port).'),
    /** Replicas of one engine; two or more are routed with session affinity (engines/replicas.ts) and `url` is ignored. */
    urls: z
      .array(z.url())
      .default([])
      .describe('Base URLs of replicas of the same engine. With two or more, each session sticks to one replica (its prefix cache), new sessions go to the replica with the fewest calls in flight, replicas are health-checked and can be drained (POST /admin/engine/replicas/drain); `url` is then ignored. Empty: `url` alone.'),
    /** Secret. Bearer key for the engine; env POLAR_ENGINE_API_KEY fills it when unset. */
    api_key: z.string().min(1).nullable().default(null).describe('Secret: API key sent to the engine as a bearer token. When null, the env var POLAR_ENGINE_API_KEY is used if set. Printed redacted.'),
    /** Model name to send; null = ask the engine (/v1/models) at start-up. */
    served_model: z.string().min(1).nullable().default(null).describe('Model name sent to the engine; null asks the engine (/v1/models) at start-up.'),
    /** chat: the engine renders the template; token: the proxy renders and sends token ids. */
    mode: z.enum(['chat', 'token']).default('chat').describe('Capture mode: chat (the engine renders the chat template) or token (the proxy renders and sends prompt ids).'),
    /** Per-call timeout in seconds. */
    timeout_s: z.number().positive().default(600).describe('Timeout of one engine call, in seconds.'),
    /** Where system messages after the first turn go (engines/chat-request.ts SystemMessagePlacement). */
    system_messages: z
      .enum(['auto', 'merge', 'in_place'])
      .default('auto')
      .describe('auto (default): detect at start-up whether the chat template renders a system message after a user turn (vLLM POST /tokenize in chat mode, our own template in token mode) and choose in_place when it does, merge otherwise, logging the choice; merge: every system message joins one leading system message (templates such as Qwen3.5 reject any other order); in_place: a later system message (Claude Code sends one mid-conversation) stays where it is, which keeps prompts prefix-extending for templates that render it (Qwen3).'),
    /** Token mode: the served model's Hugging Face directory; null = the Qwen3 files embedded in the binary. */
    tokenizer: z
      .string()
      .min(1)
      .nullable()
      .default(null)
      .describe('Token mode: the served model\'s Hugging Face directory (tokenizer.json, tokenizer_config.json or chat_template.jinja, generation_config.json); null uses the Qwen3 tokenizer embedded in the binary.'),
    /** Token mode: serve although the start-up golden check found a rendering mismatch. */
    allow_golden_mismatch: z
      .boolean()
      .default(false)
      .describe('Token mode: start even when the start-up golden check finds that our chat template rendering differs from the engine\'s own (/tokenize); false refuses to start.'),
    /** Streamed engine calls for streaming clients (engines/types.ts EngineStreamSetting). */
    stream: z
      .enum(['auto', 'always', 'never'])
      .default('auto')
      .describe("Streaming clients are served from a streamed engine call, translated chunk by chunk: auto (when the start-up probe's streamed capture is sound), always, or never (the non-streaming call is replayed as a synthetic stream)."),
    default_sampling: defaultSamplingSchema.prefault({}),
  })
  .describe('The inference engine the proxy forwards model calls to. With `polar serve --with-sim` it is the in-process simulator, served with these settings; kind, url, urls, api_key and served_model are then unused.');

export type EngineConfig = z.output<typeof engineSchema>;
