/**
 * The model families of token mode, each with its real tokenizer files (test/support/model-dirs.ts): detection, ids
 * read from the tokenizer, our rendering against the Jinja reference rendering of the model's own template (with the
 * messages in the form that template expects), and the parser on sampled text with reasoning and 0, 1 and 3 tool calls
 * in the formats vLLM's parsers for the family accept.
 */
import { Template } from '@huggingface/jinja';
import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MODEL_FAMILIES, promptThinking, resolveFamilyIds, type ModelFamily, type SampleParts } from '../../src/tokenization/families.ts';
import { loadTokenizer, pythonJsonDumps, type ChatMessage, type LoadedTokenizer } from '../../src/tokenization/index.ts';
import { modelDir, MODEL_DIR_NAMES, MODEL_DIRS, type ModelDirName } from '../support/model-dirs.ts';

const tools = [{ type: 'function', function: { name: 'bash', description: 'Run a shell command', parameters: { type: 'object', properties: { command: { type: 'string', description: 'the command' } }, required: ['command'] } } }];

/** An OpenAI-shaped conversation as the proxy's chat encoder hands it to the renderer. */
const conversation: ChatMessage[] = [
  { role: 'system', content: 'You are a coding agent.' },
  { role: 'user', content: [{ type: 'text', text: 'List the files.' }, { type: 'text', text: 'Then count them ✓.' }] },
  { role: 'assistant', content: null, reasoning_content: 'I should run ls.', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'bash', arguments: '{"command":"ls -1"}' } }] },
  { role: 'tool', tool_call_id: 'call_1', content: 'a.py\nb.py' },
  { role: 'assistant', content: 'There are 2 files.' },
  { role: 'user', content: 'Thanks.' },
];
const textOnly: ChatMessage[] = [conversation[0]!, conversation[1]!, { role: 'assistant', content: 'There are 2 files.' }, conversation[5]!];

/** The same conversation the way each family's own template expects its messages (hand-written, not computed). */
function referenceMessages(family: ModelFamily): Record<string, unknown>[] {
  const user = { role: 'user', content: 'List the files.\nThen count them ✓.' };
  if (family.toolCallFormat === 'none') return [{ role: 'system', content: 'You are a coding agent.' }, user, { role: 'assistant', content: 'There are 2 files.' }, { role: 'user', content: 'Thanks.' }];
  const call = { id: 'call_1', type: 'function', function: { name: 'bash', arguments: family.toolArguments === 'string' ? '{"command":"ls -1"}' : { command: 'ls -1' } } };
  const reasoning = family.reasoningField === null ? {} : { [family.reasoningField]: 'I should run ls.' };
  return [
    { role: 'system', content: 'You are a coding agent.' },
    user,
    { role: 'assistant', content: '', ...reasoning, tool_calls: [call] },
    { role: 'tool', tool_call_id: 'call_1', content: 'a.py\nb.py' },
    { role: 'assistant', content: 'There are 2 files.' },
    { role: 'user', content: 'Thanks.' },
  ];
}

function specialTokens(dir: string): Record<string, string> {
  const config = JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
  const out: Record<string, string> = {};
  for (const name of ['bos_token', 'eos_token', 'pad_token', 'unk_token']) {
    const value = config[name];
    if (typeof value === 'string') out[name] = value;
    else if (value && typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string') out[name] = (value as { content: string }).content;
  }
  return out;
}

const loaded = new Map<ModelDirName, LoadedTokenizer>();
async function tokenizerOf(name: ModelDirName): Promise<LoadedTokenizer> {
  if (!loaded.has(name)) loaded.set(name, await loadTokenizer(modelDir(name)));
  return loaded.get(name)!;
}

describe.each(MODEL_DIR_NAMES)('%s', (name) => {
  const expected = MODEL_DIRS[name].family;

  test('the family is detected from the chat template; its ids are read from the tokenizer', async () => {
    const tk = await tokenizerOf(name);
    expect(tk.family?.name).toBe(expected);
    const ids = resolveFamilyIds(tk, tk.family!);
    expect(tk.decode([ids.endOfTurn])).toBe(tk.family!.endOfTurn);
    for (const id of ids.stopIds) expect(tk.eosTokenIds).toContain(id);
    for (const token of tk.family!.stopTokens) {
      const id = tk.tokenToId(token);
      if (id !== undefined) expect(ids.stopIds).toContain(id);
    }
  });

  test('render(messages + tools) equals the Jinja reference rendering of the model\'s own template', async () => {
    const tk = await tokenizerOf(name);
    const family = tk.family!;
    const noTools = family.toolCallFormat === 'none';
    const reference = new Template(tk.chatTemplate).render({
      ...specialTokens(modelDir(name)),
      messages: referenceMessages(family),
      ...(noTools ? {} : { tools }),
      add_generation_prompt: true,
    });
    expect(tk.renderChat(noTools ? textOnly : conversation, { tools: noTools ? [] : tools })).toBe(reference);
    if (!noTools) {
      // Ending on the tool result, templates render the pending turn's reasoning (Qwen3, gpt-oss): its field matters.
      const pending = new Template(tk.chatTemplate).render({ ...specialTokens(modelDir(name)), messages: referenceMessages(family).slice(0, 4), tools, add_generation_prompt: true });
      expect(tk.renderChat(conversation.slice(0, 4), { tools })).toBe(pending);
      if (family.reasoningField !== null) expect(pending).toContain('I should run ls.');
    }
    // And the ids are the tokenizer's encoding of that text, which decodes back to it.
    const ids = tk.renderChatIds(noTools ? textOnly : conversation, { tools: noTools ? [] : tools });
    expect(tk.decode(ids)).toBe(reference);
  });

  test('parse(format(sample)) through the tokenizer gives back reasoning, content and 0, 1, 3 tool calls', async () => {
    const tk = await tokenizerOf(name);
    const family = tk.family!;
    const prompt = tk.renderChat([{ role: 'user', content: 'hi' }], { tools: family.toolCallFormat === 'none' ? [] : tools, enableThinking: true });
    const thinking = promptThinking(family, prompt.slice(-32));
    const call = (i: number) => ({ name: `tool_${i}`, arguments: { command: `echo ${i}`, n: i, flags: ['-l', '-a'] } });
    for (const count of family.toolCallFormat === 'none' ? [0] : [0, 1, 3]) {
      const parts: SampleParts = { reasoning: family.thinkOpen === null && family.toolCallFormat !== 'harmony' ? null : 'Think about it.', content: count === 0 ? 'The answer is 4.' : '', toolCalls: Array.from({ length: count }, (_, i) => call(i)) };
      const end = family.sampleEnd?.(parts) ?? tk.decode([tk.eosTokenIds[0]!]);
      const ids = tk.encode(family.formatSample(parts, thinking) + end);
      const parsed = family.parse(tk.decode(ids), { promptOpenedThinking: thinking === 'opened', tools });
      expect(parsed.reasoning?.trim() ?? null).toBe(parts.reasoning);
      expect(parsed.content.trim()).toBe(parts.content);
      expect(parsed.toolCalls).toEqual(parts.toolCalls.map((c) => ({ name: c.name, arguments: pythonJsonDumps(c.arguments) })));
    }
  });
});

describe('Llama 3.1/3.2 (vLLM llama3_json)', () => {
  const llama = MODEL_FAMILIES.llama3;
  const parse = (text: string) => llama.parse(text, { promptOpenedThinking: false });
  test('an answer is content; JSON calls with "parameters" or "arguments", after <|python_tag|> or not, ";"-separated', () => {
    expect(parse('The answer is 4.<|eot_id|>')).toEqual({ content: 'The answer is 4.', reasoning: null, toolCalls: [] });
    expect(parse('{"name": "bash", "parameters": {"command": "ls"}}<|eot_id|>').toolCalls).toEqual([{ name: 'bash', arguments: '{"command": "ls"}' }]);
    expect(parse('<|python_tag|>{"name": "bash", "arguments": {"command":"ls"}}<|eom_id|>').toolCalls).toEqual([{ name: 'bash', arguments: '{"command": "ls"}' }]);
    const three = parse('{"name": "a", "parameters": {"x": 1}}; {"name": "b", "parameters": {}}; {"name": "c", "parameters": {"s": "y;}z"}}');
    expect(three.toolCalls.map((c) => [c.name, c.arguments])).toEqual([['a', '{"x": 1}'], ['b', '{}'], ['c', '{"s": "y;}z"}']]);
    expect(three.content).toBe('');
  });
  test('a JSON answer that is not a call is content; a broken call is flagged and kept as text', () => {
    expect(parse('{"result": 4}')).toEqual({ content: '{"result": 4}', reasoning: null, toolCalls: [] });
    const broken = parse('{"name": "bash", "parameters": {"command": "ls"');
    expect(broken.toolCalls).toEqual([{ name: 'bash', arguments: '{"name": "bash", "parameters": {"command": "ls"', parserInvalid: true }]);
    expect(broken.content).toBe('{"name": "bash", "parameters": {"command": "ls"');
  });
});

describe('DeepSeek-V3 / V3.1 (vLLM deepseek_v3, deepseek_v31)', () => {
  const v31 = MODEL_FAMILIES['deepseek-v3.1'];
  const parse = (text: string, opened = true) => v31.parse(text, { promptOpenedThinking: opened });
  const call = (name: string, args: string) => `<｜tool▁call▁begin｜>${name}<｜tool▁sep｜>${args}<｜tool▁call▁end｜>`;
  test('reasoning up to </think> (opened by the prompt), content, then V3.1 calls', () => {
    expect(parse('Let me think.</think>The answer.<｜end▁of▁sentence｜>')).toEqual({ content: 'The answer.', reasoning: 'Let me think.', toolCalls: [] });
    expect(parse('The answer.', false)).toEqual({ content: 'The answer.', reasoning: null, toolCalls: [] });
    const one = parse(`Plan.</think>Listing.<｜tool▁calls▁begin｜>${call('bash', '{"command":"ls"}')}<｜tool▁calls▁end｜><｜end▁of▁sentence｜>`);
    expect(one).toEqual({ content: 'Listing.', reasoning: 'Plan.', toolCalls: [{ name: 'bash', arguments: '{"command": "ls"}' }] });
    const three = parse(`x</think><｜tool▁calls▁begin｜>${call('a', '{}')}${call('b', '{"k": [1]}')}${call('c', '{"s": "t"}')}<｜tool▁calls▁end｜>`);
    expect(three.toolCalls.map((c) => c.name)).toEqual(['a', 'b', 'c']);
    expect(three.toolCalls[1]!.arguments).toBe('{"k": [1]}');
  });
  test('the V3 form (function<｜tool▁sep｜>NAME + ```json fence) is read too; broken JSON is flagged', () => {
    const v3 = MODEL_FAMILIES['deepseek-v3'].parse('<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>bash\n```json\n{"command": "ls"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>cat\n```json\n{"path": "a"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>', { promptOpenedThinking: false });
    expect(v3.toolCalls).toEqual([{ name: 'bash', arguments: '{"command": "ls"}' }, { name: 'cat', arguments: '{"path": "a"}' }]);
    const broken = parse(`x</think>Text.<｜tool▁calls▁begin｜>${call('bash', '{"command": ')}<｜tool▁calls▁end｜>`);
    expect(broken.toolCalls[0]!.parserInvalid).toBe(true);
    expect(broken.content).toContain('<｜tool▁calls▁begin｜>');
  });
});

describe('gpt-oss (harmony)', () => {
  const parse = (text: string) => MODEL_FAMILIES['gpt-oss'].parse(text, { promptOpenedThinking: false });
  test('analysis is reasoning, final is content', () => {
    expect(parse('<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Answer.<|return|>')).toEqual({ content: 'Answer.', reasoning: 'Think.', toolCalls: [] });
  });
  test('commentary addressed to functions.NAME is a call, with the recipient before or after the channel', () => {
    const after = parse('<|channel|>analysis<|message|>Need ls.<|end|><|start|>assistant<|channel|>commentary to=functions.bash <|constrain|>json<|message|>{"command":"ls"}<|call|>');
    expect(after).toEqual({ content: '', reasoning: 'Need ls.', toolCalls: [{ name: 'bash', arguments: '{"command": "ls"}' }] });
    const before = parse('<|channel|>analysis<|message|>x<|end|><|start|>assistant to=functions.bash<|channel|>commentary json<|message|>{"command": "ls"}<|call|>');
    expect(before.toolCalls).toEqual([{ name: 'bash', arguments: '{"command": "ls"}' }]);
  });
  test('three calls, a preamble, and broken arguments', () => {
    const msg = (name: string, args: string) => `<|start|>assistant<|channel|>commentary to=functions.${name} <|constrain|>json<|message|>${args}<|call|>`;
    const three = parse(`<|channel|>commentary<|message|>Running three.<|end|>${msg('a', '{}')}${msg('b', '{"x": 1}')}${msg('c', '{"y": "z"}')}`);
    expect(three.content).toBe('Running three.');
    expect(three.toolCalls.map((c) => [c.name, c.arguments])).toEqual([['a', '{}'], ['b', '{"x": 1}'], ['c', '{"y": "z"}']]);
    const broken = parse('<|channel|>commentary to=functions.bash <|constrain|>json<|message|>{"command": <|call|>');
    expect(broken.toolCalls).toEqual([{ name: 'bash', arguments: '{"command":', parserInvalid: true }]);
  });
});

test('Gemma 3 and unknown templates: plain text; detection names the known families', async () => {
  expect(MODEL_FAMILIES.gemma3.parse('Hello there.<end_of_turn>', { promptOpenedThinking: false })).toEqual({ content: 'Hello there.', reasoning: null, toolCalls: [] });
  const { detectModelFamily } = await import('../../src/tokenization/families.ts');
  expect(() => detectModelFamily({ chatTemplate: '{{ messages }}', tokenToId: () => undefined })).toThrow(/llama3: Llama 3\.1/);
});
