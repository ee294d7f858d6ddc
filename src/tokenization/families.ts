/**
 * Model families of token mode. Everything token mode knows about a family beyond its tokenizer and its own chat
 * template lives in ONE entry of `MODEL_FAMILIES`: how to recognise it, which tokens end a sample and close an
 * assistant turn (texts; the ids are read from the loaded tokenizer by `resolveFamilyIds`), the reasoning markers and
 * the template kwarg that switches thinking, how the template wants messages (reasoning field, arguments as objects
 * or JSON text, one call per turn), the parser of sampled text and its inverse (what a model of the family samples,
 * used by the simulator). Nothing outside an entry assumes a family's tokens. Adding a family: docs/model-families.md.
 * Sources (formats): docs/protocol-notes.md#qwen3-tokenizer-and-chat-template; Qwen3 https://huggingface.co/Qwen/Qwen3-8B/blob/main/tokenizer_config.json; vLLM tool parsers
 * https://github.com/vllm-project/vllm/tree/main/vllm/entrypoints/openai/tool_parsers (hermes, qwen3coder,
 * llama3_json, deepseek_v3, deepseek_v31, openai); harmony https://cookbook.openai.com/articles/openai-harmony;
 * Llama 3.1 https://www.llama.com/docs/model-cards-and-prompt-formats/llama3_1/; Gemma 3
 * https://ai.google.dev/gemma/docs/core/prompt-structure.
 */
import type { ChatTool } from './chat-messages.ts';
import { parseDeepSeekOutput, parseHarmonyOutput, parseLlama3Output, parsePlainOutput } from './family-parsers.ts';
import { pythonJsonDumps } from './json.ts';
import { parseQwen35Output, parseQwen3Output, type ParsedOutput } from './parsers.ts';
import type { LoadedTokenizer } from './tokenizer.ts';

export type ModelFamilyName = 'qwen3' | 'qwen3.5' | 'llama3' | 'deepseek-v3' | 'deepseek-v3.1' | 'gpt-oss' | 'gemma3';

/** One sampled turn in structured form (what `formatSample` writes and `parse` reads back). */
export interface SampleParts {
  reasoning: string | null;
  content: string;
  toolCalls: { name: string; arguments: Record<string, unknown> }[];
}

/** Where the rendered generation prompt left the think block. */
export type PromptThinking = 'none' | 'opened' | 'disabled';

/** The per-family entry. Strings are token texts; ids come from `resolveFamilyIds`. */
export interface ModelFamily {
  name: ModelFamilyName;
  /** Models it covers, for messages and docs. */
  covers: string;
  /** True when a tokenizer + chat template belongs to this family (entries are tried in table order). */
  detect(tokenizer: Pick<LoadedTokenizer, 'chatTemplate' | 'tokenToId'>): boolean;
  /** Token closing an assistant turn in the template's history rendering; appended after a sample cut by the limit. */
  endOfTurn: string;
  /** The token that closes this assistant message in a history rendering, when it is not always `endOfTurn`. */
  historyEnd?(message: { tool_calls?: unknown }): string;
  /** Tokens that end a sample (those the tokenizer lacks are skipped); the tokenizer's eos ids are added. */
  stopTokens: readonly string[];
  /** Reasoning markers (null: the family has no reasoning block in text). */
  thinkOpen: string | null;
  thinkClose: string | null;
  /** The template kwarg the thinking switch is passed as (null: the template has none; the switch is ignored). */
  thinkingKwarg: string | null;
  /** The assistant-message field the template reads reasoning from (null: reasoning is not rendered). */
  reasoningField: 'reasoning_content' | 'thinking' | null;
  /** How tool-call arguments reach the template: parsed objects (vLLM's default) or the JSON text. */
  toolArguments: 'object' | 'string';
  /** The template renders one tool call per assistant turn (it raises or drops the others). */
  singleToolCall: boolean;
  /** Text that opens each tool result in a rendered prompt (the simulator counts them), null when none. */
  toolResultMarker: string | null;
  /** Tool-call syntax of the sampled text. */
  toolCallFormat: 'hermes-json' | 'qwen-xml' | 'llama-json' | 'deepseek' | 'harmony' | 'none';
  /**
   * Parse sampled text (special tokens kept) into content, reasoning and tool calls. Never throws.
   * @param tools the request's tools (the XML format types parameter values by their JSON schema).
   */
  parse(text: string, options: { promptOpenedThinking: boolean; truncated?: boolean; tools?: readonly ChatTool[] }): ParsedOutput;
  /** The text a model of this family samples for `parts` after a prompt in state `thinking` (without the final stop token). */
  formatSample(parts: SampleParts, thinking: PromptThinking): string;
  /** The token that ends the sample of `parts` (default: the tokenizer's first eos). */
  sampleEnd?(parts: SampleParts): string;
}

const has = (tokenizer: Pick<LoadedTokenizer, 'tokenToId'>, token: string) => tokenizer.tokenToId(token) !== undefined;

/** Reasoning in `<think>` tags as Qwen3/DeepSeek write it, given where the prompt left the block. */
function thinkBlock(reasoning: string | null, thinking: PromptThinking, open: string, close: string, sep: { inner: string; after: string }): string {
  if (thinking === 'disabled') return '';
  if (reasoning === null) return thinking === 'opened' ? `${sep.inner}${close}${sep.after}` : '';
  return thinking === 'opened' ? `${reasoning}${sep.inner}${close}${sep.after}` : `${open}${sep.inner}${reasoning}${sep.inner}${close}${sep.after}`;
}

const QWEN_COMMON = {
  endOfTurn: '<|im_end|>',
  stopTokens: ['<|im_end|>', '<|endoftext|>'],
  thinkOpen: '<think>',
  thinkClose: '</think>',
  thinkingKwarg: 'enable_thinking',
  reasoningField: 'reasoning_content',
  toolArguments: 'object',
  singleToolCall: false,
  toolResultMarker: '<tool_response>',
} as const;

const qwenThink = (parts: SampleParts, thinking: PromptThinking) => thinkBlock(parts.reasoning, thinking, '<think>', '</think>', { inner: '\n', after: '\n\n' });
const isQwen = (t: Pick<LoadedTokenizer, 'chatTemplate' | 'tokenToId'>) => t.chatTemplate.includes('<|im_start|>') && has(t, '<|im_end|>');

/** The family table, in detection order. Add a family with one entry here (checklist: docs/model-families.md). */
export const MODEL_FAMILIES: Readonly<Record<ModelFamilyName, ModelFamily>> = {
  'qwen3.5': {
    name: 'qwen3.5',
    covers: 'Qwen3.5, Qwen3-Coder (XML tool calls)',
    ...QWEN_COMMON,
    detect: (t) => isQwen(t) && t.chatTemplate.includes('<function='),
    toolCallFormat: 'qwen-xml',
    parse: (text, { promptOpenedThinking, truncated, tools }) => parseQwen35Output(text, { promptOpenedThinking, truncated, tools }),
    formatSample: (parts, thinking) => {
      const calls = parts.toolCalls.map((call) => {
        const params = Object.entries(call.arguments).map(([k, v]) => `<parameter=${k}>\n${typeof v === 'string' ? v : JSON.stringify(v)}\n</parameter>\n`).join('');
        return `<tool_call>\n<function=${call.name}>\n${params}</function>\n</tool_call>`;
      });
      return qwenThink(parts, thinking) + [parts.content, ...calls].filter((s) => s !== '').join('\n');
    },
  },
  qwen3: {
    name: 'qwen3',
    covers: 'Qwen3 (hermes JSON tool calls)',
    ...QWEN_COMMON,
    detect: (t) => isQwen(t) && t.chatTemplate.includes('<tool_call>'),
    toolCallFormat: 'hermes-json',
    parse: (text, { promptOpenedThinking, truncated }) => parseQwen3Output(text, { promptOpenedThinking, truncated }),
    formatSample: (parts, thinking) => {
      const calls = parts.toolCalls.map((call) => `<tool_call>\n${pythonJsonDumps({ name: call.name, arguments: call.arguments })}\n</tool_call>`);
      return qwenThink(parts, thinking) + [parts.content, ...calls].filter((s) => s !== '').join('\n');
    },
  },
  'gpt-oss': {
    name: 'gpt-oss',
    covers: 'gpt-oss-20b, gpt-oss-120b (harmony: analysis/commentary/final channels)',
    detect: (t) => t.chatTemplate.includes('<|channel|>') && has(t, '<|call|>'),
    endOfTurn: '<|end|>',
    historyEnd: (message) => (Array.isArray(message.tool_calls) && message.tool_calls.length > 0 ? '<|call|>' : '<|end|>'),
    stopTokens: ['<|return|>', '<|call|>'],
    thinkOpen: null,
    thinkClose: null,
    thinkingKwarg: null,
    reasoningField: 'thinking',
    toolArguments: 'object',
    singleToolCall: true,
    toolResultMarker: ' to=assistant<|channel|>',
    toolCallFormat: 'harmony',
    parse: (text) => parseHarmonyOutput(text),
    formatSample: (parts) => {
      const messages: string[] = [];
      if (parts.reasoning !== null) messages.push(`<|channel|>analysis<|message|>${parts.reasoning}<|end|>`);
      if (parts.toolCalls.length > 0) {
        if (parts.content !== '') messages.push(`<|channel|>commentary<|message|>${parts.content}<|end|>`);
        parts.toolCalls.forEach((call, i) => messages.push(`<|channel|>commentary to=functions.${call.name} <|constrain|>json<|message|>${JSON.stringify(call.arguments)}${i < parts.toolCalls.length - 1 ? '<|call|>' : ''}`));
      } else messages.push(`<|channel|>final<|message|>${parts.content}`);
      return messages.join('<|start|>assistant');
    },
    sampleEnd: (parts) => (parts.toolCalls.length > 0 ? '<|call|>' : '<|return|>'),
  },
  llama3: {
    name: 'llama3',
    covers: 'Llama 3.1, 3.2, 3.3 (JSON tool calls, <|eot_id|>/<|eom_id|>)',
    detect: (t) => t.chatTemplate.includes('<|start_header_id|>') && has(t, '<|eot_id|>'),
    endOfTurn: '<|eot_id|>',
    stopTokens: ['<|eot_id|>', '<|eom_id|>', '<|end_of_text|>'],
    thinkOpen: null,
    thinkClose: null,
    thinkingKwarg: null,
    reasoningField: null,
    toolArguments: 'object',
    singleToolCall: true,
    toolResultMarker: '<|start_header_id|>ipython<|end_header_id|>',
    toolCallFormat: 'llama-json',
    parse: (text) => parseLlama3Output(text, ['<|eot_id|>', '<|eom_id|>', '<|end_of_text|>']),
    formatSample: (parts) => {
      if (parts.toolCalls.length === 0) return parts.content;
      return parts.toolCalls.map((call) => pythonJsonDumps({ name: call.name, parameters: call.arguments })).join('; ');
    },
  },
  'deepseek-v3.1': {
    name: 'deepseek-v3.1',
    covers: 'DeepSeek-V3.1, V3.2-Exp (thinking switch, NAME<｜tool▁sep｜>ARGS calls)',
    detect: (t) => t.chatTemplate.includes('<｜tool▁calls▁begin｜>') && t.chatTemplate.includes('thinking') && !t.chatTemplate.includes('```json'),
    endOfTurn: '<｜end▁of▁sentence｜>',
    stopTokens: ['<｜end▁of▁sentence｜>'],
    thinkOpen: '<think>',
    thinkClose: '</think>',
    thinkingKwarg: 'thinking',
    reasoningField: null,
    toolArguments: 'string',
    singleToolCall: false,
    toolResultMarker: '<｜tool▁output▁begin｜>',
    toolCallFormat: 'deepseek',
    parse: (text, { promptOpenedThinking, truncated }) => parseDeepSeekOutput(text, { promptOpenedThinking, truncated, stops: ['<｜end▁of▁sentence｜>'] }),
    formatSample: (parts, thinking) => {
      const think = thinkBlock(parts.reasoning, thinking, '<think>', '</think>', { inner: '', after: '' });
      if (parts.toolCalls.length === 0) return think + parts.content;
      const calls = parts.toolCalls.map((c) => `<｜tool▁call▁begin｜>${c.name}<｜tool▁sep｜>${JSON.stringify(c.arguments)}<｜tool▁call▁end｜>`).join('');
      return `${think}${parts.content}<｜tool▁calls▁begin｜>${calls}<｜tool▁calls▁end｜>`;
    },
  },
  'deepseek-v3': {
    name: 'deepseek-v3',
    covers: 'DeepSeek-V3, V3-0324, R1 (function<｜tool▁sep｜>NAME + ```json calls)',
    detect: (t) => t.chatTemplate.includes('<｜tool▁calls▁begin｜>') || (t.chatTemplate.includes('<｜Assistant｜>') && has(t, '<｜end▁of▁sentence｜>')),
    endOfTurn: '<｜end▁of▁sentence｜>',
    stopTokens: ['<｜end▁of▁sentence｜>'],
    thinkOpen: '<think>',
    thinkClose: '</think>',
    thinkingKwarg: null,
    reasoningField: null,
    toolArguments: 'string',
    singleToolCall: false,
    toolResultMarker: '<｜tool▁output▁begin｜>',
    toolCallFormat: 'deepseek',
    parse: (text, { promptOpenedThinking, truncated }) => parseDeepSeekOutput(text, { promptOpenedThinking, truncated, stops: ['<｜end▁of▁sentence｜>'] }),
    formatSample: (parts, thinking) => {
      const think = thinkBlock(parts.reasoning, thinking, '<think>', '</think>', { inner: '\n', after: '\n\n' });
      if (parts.toolCalls.length === 0) return think + parts.content;
      const calls = parts.toolCalls.map((c) => `<｜tool▁call▁begin｜>function<｜tool▁sep｜>${c.name}\n\`\`\`json\n${JSON.stringify(c.arguments)}\n\`\`\`<｜tool▁call▁end｜>`).join('\n');
      return `${think}${parts.content}<｜tool▁calls▁begin｜>${calls}<｜tool▁calls▁end｜>`;
    },
  },
  gemma3: {
    name: 'gemma3',
    covers: 'Gemma 3 (no tool-call format in its template: text only)',
    detect: (t) => t.chatTemplate.includes('<start_of_turn>') && has(t, '<end_of_turn>'),
    endOfTurn: '<end_of_turn>',
    stopTokens: ['<end_of_turn>', '<eos>'],
    thinkOpen: null,
    thinkClose: null,
    thinkingKwarg: null,
    reasoningField: null,
    toolArguments: 'object',
    singleToolCall: false,
    toolResultMarker: null,
    toolCallFormat: 'none',
    parse: (text) => parsePlainOutput(text, ['<end_of_turn>', '<eos>']),
    formatSample: (parts) => parts.content,
  },
};

/** The family names, in detection order. */
export const MODEL_FAMILY_NAMES: readonly ModelFamilyName[] = Object.keys(MODEL_FAMILIES) as ModelFamilyName[];

/**
 * The family of a loaded model, detected from its chat template and vocabulary (first matching entry of
 * `MODEL_FAMILIES`).
 * @param override a family name given by the operator (wins over detection).
 * @throws Error when the family is unknown or cannot be detected (token mode cannot parse that model's output).
 */
export function detectModelFamily(tokenizer: Pick<LoadedTokenizer, 'chatTemplate' | 'tokenToId'>, override?: string): ModelFamily {
  if (override !== undefined) {
    if (!Object.hasOwn(MODEL_FAMILIES, override)) throw new Error(`unknown model family ${JSON.stringify(override)} (known: ${Object.keys(MODEL_FAMILIES).join(', ')})`);
    return MODEL_FAMILIES[override as ModelFamilyName];
  }
  const found = findModelFamily(tokenizer);
  if (found) return found;
  throw new Error(`token mode does not know this model family (known: ${Object.values(MODEL_FAMILIES).map((f) => `${f.name}: ${f.covers}`).join('; ')}); pass --family to pick one, or add an entry to src/tokenization/families.ts`);
}

/** The detected family, or null when no entry matches. */
export function findModelFamily(tokenizer: Pick<LoadedTokenizer, 'chatTemplate' | 'tokenToId'>): ModelFamily | null {
  for (const family of Object.values(MODEL_FAMILIES)) if (family.detect(tokenizer)) return family;
  return null;
}

/** A family's token ids, read from the tokenizer. */
export interface FamilyIds {
  /** Id of the end-of-turn token (e.g. Qwen3 `<|im_end|>` 151645, Llama 3 `<|eot_id|>` 128009). */
  endOfTurn: number;
  /** Ids that end a sample: the family's stop tokens the tokenizer has, then its other eos ids. */
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
  const stopIds: number[] = [];
  for (const token of family.stopTokens) {
    const id = tokenizer.tokenToId(token);
    if (id !== undefined && !stopIds.includes(id)) stopIds.push(id);
  }
  for (const id of tokenizer.eosTokenIds) if (!stopIds.includes(id)) stopIds.push(id);
  const idOf = (token: string | null) => (token === null ? undefined : tokenizer.tokenToId(token));
  return { endOfTurn, stopIds, thinkOpen: idOf(family.thinkOpen), thinkClose: idOf(family.thinkClose) };
}

/** Where a rendered prompt's tail left the think block, by the family's markers. */
export function promptThinking(family: ModelFamily, promptTail: string): PromptThinking {
  if (family.thinkOpen === null || family.thinkClose === null) return 'none';
  const tail = promptTail.trimEnd();
  if (tail.endsWith(family.thinkClose)) return 'disabled';
  if (tail.endsWith(family.thinkOpen)) return 'opened';
  return 'none';
}
