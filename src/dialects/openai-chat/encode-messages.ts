/**
 * IR messages → OpenAI Chat messages: the one encoder behind every internal Chat-shaped message list (the engine's
 * request in chat mode, token mode's renderer input, `prompt_messages`/`response_messages` in exports and the
 * messages export, and this dialect's own `encodeRequest`). Servers differ in a few details, so those are options
 * ({@link ChatEncodeOptions}); everything else is decided once here, so what a trainer reads in an export is the
 * message list the engine saw, byte for byte.
 * Source: https://platform.openai.com/docs/api-reference/chat/create (messages); vLLM's reading of them:
 * https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/chat_utils.py
 */
import type { IRContentPart, IRMessage, IRTool, Warning } from '../../core/ir.ts';
import { textOf } from '../../core/ir.ts';
import { extendRun, SplitRuns, type SplitOutputRun } from '../../core/element-runs.ts';
import { imagePartToUrl } from '../shared/images.ts';

/** Field under which an assistant turn's reasoning is echoed back: vLLM ≥ 0.10 reads `reasoning`, SGLang and older vLLM `reasoning_content`. */
export type ReasoningField = 'reasoning' | 'reasoning_content';

/**
 * `merge`: every system message joins one leading system message, texts joined with "\n\n" (Qwen3.5-style
 * templates reject any other order).
 * `in-place`: the leading run of system messages is merged, a later one (Claude Code sends a mid-conversation
 * system message after a user turn) stays where it is, so the prompt keeps extending the previous turn's prompt;
 * only for templates that render a system turn anywhere (Qwen3's does).
 * `keep`: every system message stays where it is, as its own message (a faithful re-encoding of a Chat request).
 */
export type SystemMessagePlacement = 'merge' | 'in-place' | 'keep';

export interface ChatEncodeOptions {
  /** Where assistant reasoning goes. */
  reasoningField: ReasoningField;
  /** Where system messages go. */
  systemMessages: SystemMessagePlacement;
  /**
   * Text-only content of a user/system/tool message: a string separator joins its text parts into one string (what
   * string-content templates expect); `null` keeps the parts array whenever there is more than one part.
   * Content with images always keeps the parts form (user turns) or becomes text with a placeholder (tool results).
   */
  joinText: string | null;
  /**
   * Images in tool results: `parts` sends the tool message's content as text and `image_url` parts (vLLM and SGLang
   * accept non-text parts in tool messages and the model sees the image); `placeholder` makes the content a string
   * with "[image]" in its place, with a warning (for servers that take tool results as strings only).
   */
  toolResultImages: 'parts' | 'placeholder';
}

/**
 * The options the engines use (vLLM renders string content after joining text parts with "\n", so joining here
 * changes nothing it sees), and exports use, so that an exported conversation is the engine's: `reasoning_content`
 * (what vLLM/SGLang return), system messages merged, text parts joined with "\n". A chat engine may override
 * `reasoningField` and `systemMessages` (engine config); exports always use these.
 */
export const ENGINE_CHAT_ENCODING: ChatEncodeOptions = { reasoningField: 'reasoning_content', systemMessages: 'merge', joinText: '\n', toolResultImages: 'parts' };

export type ChatContent = string | ChatContentPart[];
export type ChatContentPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };

/** An OpenAI Chat message as this encoder produces it. */
export interface ChatWireMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: ChatContent | null;
  tool_calls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
  name?: string;
  reasoning?: string;
  reasoning_content?: string;
}

function encodeContent(parts: readonly IRContentPart[], joinText: string | null): ChatContent {
  const textOnly = parts.every((part) => part.type === 'text');
  if (textOnly && joinText !== null) return parts.map((part) => (part as { text: string }).text).join(joinText);
  if (textOnly && parts.length === 1) return (parts[0] as { text: string }).text;
  return parts.map((part) => (part.type === 'text' ? { type: 'text' as const, text: part.text } : { type: 'image_url' as const, image_url: { url: imagePartToUrl(part) } }));
}

/**
 * Encode a conversation.
 * - System messages are placed per `opts.systemMessages`; merged texts are joined with "\n\n". Images in a system
 *   message are dropped with a `system-image-dropped` warning when merging (a merged system message is text).
 * - Text-only tool results become strings joined with `joinText`; one with images keeps text and image parts
 *   (`toolResultImages: 'parts'`) or becomes a string with "[image]" and a warning. With `joinText: null` every tool
 *   result keeps its parts, as a client sent them.
 * - Assistant whitespace-only text next to tool calls goes out as `content: null`: the engine's parsers hand back the
 *   whitespace between </think> and <tool_call> as content ("\n\n"); echoed as content, the template renders it again
 *   plus its own separator, and the next prompt no longer extends what was sampled.
 * @returns the messages, the warnings the translation produced (lossy features) and whether a message holds a
 *   non-text part (EncodedChat); never throws.
 */
export function encodeChatMessages(messages: readonly IRMessage[], opts: ChatEncodeOptions): EncodedChat {
  const run = encodeRun(messages, opts);
  const systems = run.apartAt;
  const lead = messages.length - run.inputs.length;
  if (systems.length > 0 && opts.systemMessages !== 'merge') return interleaved(messages, lead, run, opts);
  // Every system message goes in front: the leading ones, and in `merge` the later ones too.
  const front: ChatWireMessage[] = [];
  const systemTexts: string[] = [];
  let systemImage = false;
  const place = (message: IRMessage) => {
    if (opts.systemMessages === 'keep') {
      front.push({ role: 'system', content: encodeContent(message.content, opts.joinText) });
      return;
    }
    if (message.content.some((p) => p.type === 'image')) systemImage = true;
    systemTexts.push(textOf(message.content));
  };
  for (let i = 0; i < lead; i++) place(messages[i]!);
  for (const at of systems) place(run.inputs[at]!);
  if (systemTexts.length > 0) front.push({ role: 'system', content: systemTexts.join('\n\n') });
  const warnings = run.warnings.slice();
  if (systemImage) warnings.push(systemImageDropped());
  if (systems.length > 0) warnings.push(systemMessageMoved());
  return { messages: front.length > 0 ? front.concat(run.wire) : run.wire.slice(), warnings, nonText: run.nonText > 0 || front.some(hasNonText) };
}

/** `in-place` and `keep` with a system message after another message: every message where it stands (`in-place` merges the leading ones). */
function interleaved(messages: readonly IRMessage[], lead: number, run: MessagesRun, opts: ChatEncodeOptions): EncodedChat {
  const warnings: Warning[] = [];
  const systemTexts: string[] = [];
  const out: ChatWireMessage[] = [];
  let systemImage = false;
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    const entry = i < lead ? null : run.outputs[i - lead]!;
    if (entry !== null) {
      for (const warning of entry.warnings) warnings.push(warning);
      out.push(entry.message);
      continue;
    }
    if (opts.systemMessages === 'keep') {
      out.push({ role: 'system', content: encodeContent(message.content, opts.joinText) });
      continue;
    }
    if (message.content.some((p) => p.type === 'image')) systemImage = true;
    if (out.length > 0) out.push({ role: 'system', content: textOf(message.content) });
    else systemTexts.push(textOf(message.content));
  }
  if (systemImage) warnings.push(systemImageDropped());
  if (systemTexts.length > 0) out.unshift({ role: 'system', content: systemTexts.join('\n\n') });
  return { messages: out, warnings, nonText: run.nonText > 0 || (opts.systemMessages === 'keep' && out.some((m) => m.role === 'system' && hasNonText(m))) };
}

/**
 * What encodeChatMessages returns: the Chat messages, the warnings of the translation, and whether any message's
 * content holds a part that is not text (an image), so a text-only consumer need not walk the messages to find out.
 */
export interface EncodedChat {
  messages: ChatWireMessage[];
  warnings: Warning[];
  nonText: boolean;
}

const hasNonText = (message: ChatWireMessage) => Array.isArray(message.content) && message.content.some((part) => part.type !== 'text');

const systemImageDropped = (): Warning => ({ code: 'system-image-dropped', message: 'images in the system prompt are not sent to the engine' });
const systemMessageMoved = (): Warning => ({
  code: 'system-message-moved',
  message: 'system/developer messages after the first turn were merged into the leading system message (engine.system_messages: merge)',
});

type NonSystem = Exclude<IRMessage, { role: 'system' }>;
interface Encoded {
  opts: ChatEncodeOptions;
  message: ChatWireMessage;
  warnings: readonly Warning[];
}

/**
 * One call's messages after its leading system messages (`inputs`), with the encoding of each (null for a system
 * message, placed by encodeChatMessages) and the non-system encodings' messages and warnings flattened in order.
 */
interface MessagesRun extends SplitOutputRun<IRMessage, Encoded> {
  opts: ChatEncodeOptions;
  wire: readonly ChatWireMessage[];
  warnings: readonly Warning[];
  /** How many of `wire` hold a part that is not text. */
  nonText: number;
}

/**
 * Each non-system IR message encoded so far, with the options and the warnings: a decoder hands a session's next call
 * the same IR objects for the messages it had already (dialects/shared/decode-memo.ts), so the engine body of a long
 * session encodes only its new turns, and its message objects are the previous body's (the body memo compares them
 * by reference). The encoded messages are shared between calls and must not be mutated.
 */
const encodedMessages = new WeakMap<IRMessage, Encoded>();
/**
 * The last call's encodings by its first message after the system ones: its leading messages again cost one compare
 * each, and a call that extends it copies its flattened lists and reads only its new messages (core/element-runs.ts).
 */
const encodedRuns = new SplitRuns<IRMessage, MessagesRun>();

const isSystem = (message: IRMessage) => message.role === 'system';

const sameOptions = (a: ChatEncodeOptions, b: ChatEncodeOptions) =>
  a === b || (a.reasoningField === b.reasoningField && a.systemMessages === b.systemMessages && a.joinText === b.joinText && a.toolResultImages === b.toolResultImages);

/** The run of this call: the last call's, extended, when this call continues it; else its shared part and the rest encoded. */
function encodeRun(messages: readonly IRMessage[], opts: ChatEncodeOptions): MessagesRun {
  const { tail, outputs, apartAt, continued } = extendRun(encodedRuns, messages, isSystem, (run) => sameOptions(run.opts, opts), (message) => encodeMessageOnce(message as NonSystem, opts));
  const wire = continued !== undefined ? continued.wire.slice() : [];
  const warnings = continued !== undefined ? continued.warnings.slice() : [];
  let nonText = continued?.nonText ?? 0;
  for (let i = continued?.inputs.length ?? 0; i < outputs.length; i++) {
    const entry = outputs[i]!;
    if (entry === null) continue;
    wire.push(entry.message);
    if (hasNonText(entry.message)) nonText++;
    for (const warning of entry.warnings) warnings.push(warning);
  }
  const made: MessagesRun = { inputs: tail, apartAt, opts, outputs, wire, warnings, nonText };
  encodedRuns.keep(made);
  return made;
}

function encodeMessageOnce(message: NonSystem, opts: ChatEncodeOptions): Encoded {
  const kept = encodedMessages.get(message);
  if (kept !== undefined && sameOptions(kept.opts, opts)) return kept;
  const own: Warning[] = [];
  const entry = { opts, message: encodeMessage(message, opts, own), warnings: own };
  encodedMessages.set(message, entry);
  return entry;
}

/** One non-system IR message. */
function encodeMessage(message: Exclude<IRMessage, { role: 'system' }>, opts: ChatEncodeOptions, warnings: Warning[]): ChatWireMessage {
  switch (message.role) {
    case 'user':
      return { role: 'user', content: encodeContent(message.content, opts.joinText) };
    case 'assistant': {
      // Assistant text is joined with nothing: its parts are pieces of one sampled text, not separate blocks.
      const text = textOf(message.content);
      const hasCalls = (message.toolCalls?.length ?? 0) > 0;
      const empty = message.content.length === 0 || (text.trim() === '' && hasCalls);
      const out: ChatWireMessage = { role: 'assistant', content: empty ? null : opts.joinText === null ? encodeContent(message.content, null) : text };
      if (message.content.some((p) => p.type === 'image')) {
        warnings.push({ code: 'assistant-image-dropped', message: 'images in assistant turns are not sent to the engine' });
      }
      if (message.reasoning?.text) out[opts.reasoningField] = message.reasoning.text;
      if (hasCalls) {
        out.tool_calls = message.toolCalls!.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } }));
      }
      return out;
    }
    case 'tool': {
      if (opts.joinText === null || (opts.toolResultImages === 'parts' && message.content.some((p) => p.type === 'image'))) return withName({ role: 'tool', tool_call_id: message.toolCallId, content: encodeContent(message.content, null) }, message.name);
      const texts: string[] = [];
      for (const part of message.content) {
        if (part.type === 'text') texts.push(part.text);
        else {
          texts.push('[image]');
          warnings.push({ code: 'tool-result-image', message: 'an image in a tool result was replaced by "[image]" (chat templates take tool results as strings)' });
        }
      }
      return withName({ role: 'tool', tool_call_id: message.toolCallId, content: texts.join(opts.joinText) }, message.name);
    }
  }
}

function withName(message: ChatWireMessage, name: string | undefined): ChatWireMessage {
  if (name !== undefined) message.name = name;
  return message;
}

type ChatWireTool = { type: 'function'; function: { name: string; description?: string; parameters: unknown } };

/**
 * Each IR tool encoded so far: a decoder hands a session's next call the same IR tool objects (decode-memo.ts), so the
 * engine body's tool list is made of the same objects again and the body memo finds it equal without walking it.
 * Shared between calls: not to be mutated.
 */
const encodedTools = new WeakMap<IRTool, ChatWireTool>();

/** IR tools → OpenAI Chat `tools` (`{type: 'function', function: {name, description?, parameters}}`). */
export function encodeChatTools(tools: readonly IRTool[]): ChatWireTool[] {
  return tools.map((tool) => {
    let encoded = encodedTools.get(tool);
    if (encoded === undefined) {
      encoded = { type: 'function', function: { name: tool.name, ...(tool.description !== undefined ? { description: tool.description } : {}), parameters: tool.parameters } };
      encodedTools.set(tool, encoded);
    }
    return encoded;
  });
}
