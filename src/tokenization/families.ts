/**
 * Model-family details token mode needs beyond the tokenizer and the chat template: how a turn ends (the end-of-turn
 * token and the newline the template writes after it, which the model never samples), the generation prompt, the
 * thinking switch and tags, and which parser reads the sampled text. Token ids are never hard-coded here: they are
 * read from the loaded tokenizer (Qwen3 and Qwen3.5 have different ids for the same strings).
 * Sources: docs/protocol-notes.md#qwen3-tokenizer-and-chat-template; Qwen3 chat template (https://huggingface.co/Qwen/Qwen3-8B/blob/main/tokenizer_config.json);
 * Qwen3-Coder / Qwen3.5 XML tool calls (vLLM vllm/entrypoints/openai/tool_parsers/qwen3coder_tool_parser.py).
 */
import type { ChatTool } from './chat-messages.ts';
import { parseQwen35Output, parseQwen3Output, type ParsedOutput } from './parsers.ts';
import type { LoadedTokenizer } from './tokenizer.ts';

export type ModelFamilyName = 'qwen3' | 'qwen3.5';

/** Per-family rendering and parsing facts (text forms; ids come from `resolveFamilyIds`). */
export interface ModelFamily {
  name: ModelFamilyName;
  /** The end-of-turn token text the template closes every turn with. */
  endOfTurn: string;
  /** What the template writes right after the end-of-turn token (never sampled by the model). */
  afterEndOfTurn: string;
  /** The generation prompt without any thinking block. */
  generationPrompt: string;
  /** Reasoning tags. */
  thinkOpen: string;
  thinkClose: string;
  /** The template kwarg that switches thinking (false renders an empty think block). */
  thinkingSwitch: 'enable_thinking';
  /** Tool-call syntax of the sampled text. */
  toolCallFormat: 'hermes-json' | 'qwen-xml';
  /**
   * Parse sampled text (special tokens kept) into content, reasoning and tool calls. Never throws.
   * @param tools the request's tools, used by the XML format to type parameter values by their JSON schema.
   */
  parse(text: string, options: { promptOpenedThinking: boolean; tools?: readonly ChatTool[] }): ParsedOutput;
}

const QWEN_COMMON = {
  endOfTurn: '<|im_end|>',
  afterEndOfTurn: '\n',
  generationPrompt: '<|im_start|>assistant\n',
  thinkOpen: '<think>',
  thinkClose: '</think>',
  thinkingSwitch: 'enable_thinking',
} as const;

/** The family table. Add a family with one entry (and a detection rule in `detectModelFamily`). */
export const MODEL_FAMILIES: Readonly<Record<ModelFamilyName, ModelFamily>> = {
  qwen3: {
    name: 'qwen3',
    ...QWEN_COMMON,
    toolCallFormat: 'hermes-json',
    parse: (text, { promptOpenedThinking }) => parseQwen3Output(text, { promptOpenedThinking }),
  },
  'qwen3.5': {
    name: 'qwen3.5',
    ...QWEN_COMMON,
    toolCallFormat: 'qwen-xml',
    parse: (text, { promptOpenedThinking, tools }) => parseQwen35Output(text, { promptOpenedThinking, tools }),
  },
};

/**
 * The family of a loaded model, from its chat template: a template that writes `<function=` inside `<tool_call>`
 * is the Qwen3.5/Qwen3-Coder XML form; one with `<tool_call>` and `<|im_start|>` is Qwen3.
 * @param override a family name given by the operator (wins over detection).
 * @throws Error when the family is unknown or cannot be detected (token mode cannot parse that model's output).
 */
export function detectModelFamily(tokenizer: Pick<LoadedTokenizer, 'chatTemplate' | 'tokenToId'>, override?: string): ModelFamily {
  if (override !== undefined) {
    if (!Object.hasOwn(MODEL_FAMILIES, override)) throw new Error(`unknown model family ${JSON.stringify(override)} (known: ${Object.keys(MODEL_FAMILIES).join(', ')})`);
    return MODEL_FAMILIES[override as ModelFamilyName];
  }
  const template = tokenizer.chatTemplate;
  if (template.includes('<|im_start|>') && tokenizer.tokenToId('<|im_end|>') !== undefined) {
    if (template.includes('<function=')) return MODEL_FAMILIES['qwen3.5'];
    if (template.includes('<tool_call>')) return MODEL_FAMILIES.qwen3;
  }
  throw new Error(`token mode does not know this model family (known: ${Object.keys(MODEL_FAMILIES).join(', ')}); its chat template is not a Qwen3/Qwen3.5 template`);
}

/** A family's token ids, read from the tokenizer. */
export interface FamilyIds {
  /** Id of the end-of-turn token (e.g. Qwen3 `<|im_end|>` 151645, Qwen3.5 248046). */
  endOfTurn: number;
  /** Ids that end a sample (end-of-turn first): the tokenizer's `eosTokenIds`. */
  stopIds: number[];
  thinkOpen: number | undefined;
  thinkClose: number | undefined;
}

/**
 * Resolve a family's token ids in a tokenizer.
 * @throws Error when the tokenizer lacks the family's end-of-turn token.
 */
export function resolveFamilyIds(tokenizer: Pick<LoadedTokenizer, 'tokenToId' | 'eosTokenIds'>, family: ModelFamily): FamilyIds {
  const endOfTurn = tokenizer.tokenToId(family.endOfTurn);
  if (endOfTurn === undefined) throw new Error(`the tokenizer has no ${family.endOfTurn} token, which the ${family.name} family ends turns with`);
  const stopIds = [endOfTurn, ...tokenizer.eosTokenIds.filter((id) => id !== endOfTurn)];
  return { endOfTurn, stopIds, thinkOpen: tokenizer.tokenToId(family.thinkOpen), thinkClose: tokenizer.tokenToId(family.thinkClose) };
}
