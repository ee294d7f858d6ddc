/** Parsers of sampled text in token mode: Qwen3 JSON-in-<tool_call> and Qwen3.5 XML calls, reasoning, malformed calls; family detection. */
import { describe, expect, test } from 'bun:test';
import { detectModelFamily, loadTokenizer, MODEL_FAMILIES, parseQwen35Output, parseQwen3Output, resolveFamilyIds } from '../../src/tokenization/index.ts';

const tools = [
  { type: 'function', function: { name: 'bash', parameters: { type: 'object', properties: { command: { type: 'string' }, timeout: { type: 'integer' }, ratio: { type: 'number' }, dry: { type: 'boolean' }, env: { type: 'object' }, argv: { type: 'array' } } } } },
];

describe('Qwen3 (hermes JSON in <tool_call>)', () => {
  test('reasoning, content and parallel calls; arguments in Python json.dumps form', () => {
    const text = '<think>\nplan\n</think>\n\nRunning two.\n<tool_call>\n{"name": "bash", "arguments": {"command":"ls"}}\n</tool_call>\n<tool_call>\n{"name": "bash", "arguments": {"command": "pwd", "timeout": 5}}\n</tool_call><|im_end|>';
    const out = parseQwen3Output(text);
    expect(out.reasoning).toBe('\nplan\n');
    expect(out.content).toBe('\n\nRunning two.\n');
    expect(out.toolCalls).toEqual([
      { name: 'bash', arguments: '{"command": "ls"}' },
      { name: 'bash', arguments: '{"command": "pwd", "timeout": 5}' },
    ]);
  });

  test('the opening <think> in the prompt: text before </think> is reasoning', () => {
    const out = parseQwen3Output('thinking on\n</think>\n\nhello', { promptOpenedThinking: true });
    expect(out.reasoning).toBe('thinking on\n');
    expect(out.content).toBe('\n\nhello');
    const cut = parseQwen3Output('still thinking when cut', { promptOpenedThinking: true });
    expect(cut).toEqual({ reasoning: 'still thinking when cut', content: '', toolCalls: [] });
    // Inside the block a `<think>` is literal text of the reasoning (the stream sent it so); one right at the start is
    // the model opening the block again, and dropped.
    expect(parseQwen3Output('the <think> tag, cut off', { promptOpenedThinking: true })).toEqual({ reasoning: 'the <think> tag, cut off', content: '', toolCalls: [] });
    expect(parseQwen3Output('a <think> b</think>\n\nok', { promptOpenedThinking: true })).toMatchObject({ reasoning: 'a <think> b', content: '\n\nok' });
    expect(parseQwen3Output('\n<think>again</think>ok', { promptOpenedThinking: true })).toMatchObject({ reasoning: 'again', content: 'ok' });
  });

  test('cut off (truncated) inside a think block the text opened: reasoning, as the stream sent it; otherwise content, as vLLM\'s whole-answer parser returns it', () => {
    expect(parseQwen3Output('\n<think>\nI should look', { truncated: true })).toEqual({ reasoning: '\nI should look', content: '', toolCalls: [] });
    expect(parseQwen3Output('Use <think> tags', { truncated: true })).toMatchObject({ reasoning: null });
    // Not cut off: an unclosed block stays content, and a tool call in it is still a tool call.
    const stopped = parseQwen3Output('<think>I will call <tool_call>{"name":"f","arguments":{}}</tool_call>');
    expect(stopped).toMatchObject({ reasoning: null, content: 'I will call ' });
    expect(stopped.toolCalls.map((c) => c.name)).toEqual(['f']);
  });

  test('a call inside reasoning stays reasoning', () => {
    const out = parseQwen3Output('<think>\nmaybe <tool_call>\n{"name": "bash", "arguments": {}}\n</tool_call>\n</think>\n\nNo call.');
    expect(out.toolCalls).toEqual([]);
    expect(out.reasoning).toContain('<tool_call>');
    expect(out.content).toBe('\n\nNo call.');
  });

  test('malformed JSON is kept as text and flagged parserInvalid', () => {
    const text = 'ok\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"\n</tool_call>';
    const out = parseQwen3Output(text);
    expect(out.toolCalls).toEqual([{ name: 'bash', arguments: '{"name": "bash", "arguments": {"command": "ls"', parserInvalid: true }]);
    expect(out.content).toBe(text);
  });
});

describe('Qwen3.5 (XML <function=…><parameter=…>)', () => {
  test('parameters typed by the tool schema; parallel calls', () => {
    const text =
      '<think>\nlook\n</think>\n\n<tool_call>\n<function=bash>\n<parameter=command>\nls -la\n</parameter>\n<parameter=timeout>\n30\n</parameter>\n<parameter=dry>\nfalse\n</parameter>\n<parameter=env>\n{"A": "1"}\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=bash>\n<parameter=command>\necho "multi\nline"\n</parameter>\n<parameter=ratio>\n0.5\n</parameter>\n<parameter=argv>\n["a", 2]\n</parameter>\n</function>\n</tool_call><|im_end|>';
    const out = parseQwen35Output(text, { tools });
    expect(out.reasoning).toBe('\nlook\n');
    expect(out.content).toBe('\n\n');
    expect(out.toolCalls.map((c) => ({ name: c.name, args: JSON.parse(c.arguments), invalid: c.parserInvalid }))).toEqual([
      { name: 'bash', args: { command: 'ls -la', timeout: 30, dry: false, env: { A: '1' } }, invalid: undefined },
      { name: 'bash', args: { command: 'echo "multi\nline"', ratio: 0.5, argv: ['a', 2] }, invalid: undefined },
    ]);
  });

  test('without a schema, values stay strings; a value that does not fit its type stays text', () => {
    const out = parseQwen35Output('<tool_call>\n<function=other>\n<parameter=n>\n7\n</parameter>\n</function>\n</tool_call>', { tools });
    expect(JSON.parse(out.toolCalls[0]!.arguments)).toEqual({ n: '7' });
    const bad = parseQwen35Output('<tool_call>\n<function=bash>\n<parameter=timeout>\nsoon\n</parameter>\n</function>\n</tool_call>', { tools });
    expect(JSON.parse(bad.toolCalls[0]!.arguments)).toEqual({ timeout: 'soon' });
  });

  test('a call inside reasoning stays reasoning', () => {
    const out = parseQwen35Output('I might call\n<tool_call>\n<function=bash>\n</function>\n</tool_call>\n</think>\n\nNo.', { promptOpenedThinking: true, tools });
    expect(out.toolCalls).toEqual([]);
    expect(out.reasoning).toContain('<function=bash>');
    expect(out.content).toBe('\n\nNo.');
  });

  test('malformed calls (no </function>, stray text) are kept as text and flagged', () => {
    const text = 'x<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n</tool_call>';
    const out = parseQwen35Output(text, { tools });
    expect(out.toolCalls).toEqual([{ name: 'bash', arguments: '<function=bash>\n<parameter=command>\nls\n</parameter>', parserInvalid: true }]);
    expect(out.content).toBe(text);
    const stray = parseQwen35Output('<tool_call>\n<function=bash>\nrm -rf\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>', { tools });
    expect(stray.toolCalls[0]!.parserInvalid).toBe(true);
  });
});

describe('model families', () => {
  test('detected from the chat template; ids read from the tokenizer', async () => {
    const tk = await loadTokenizer();
    const family = detectModelFamily(tk);
    expect(family.name).toBe('qwen3');
    expect(resolveFamilyIds(tk, family)).toEqual({ endOfTurn: 151645, stopIds: [151645, 151643], thinkOpen: 151667, thinkClose: 151668 });
    const xmlTemplate = `${tk.chatTemplate}{# <tool_call>\n<function=name> #}`;
    expect(detectModelFamily({ chatTemplate: xmlTemplate, tokenToId: tk.tokenToId }).name).toBe('qwen3.5');
    expect(() => detectModelFamily({ chatTemplate: '{{ messages }}', tokenToId: () => undefined })).toThrow(/does not know this model family/);
    expect(() => detectModelFamily(tk, 'llama9')).toThrow(/unknown model family "llama9"/);
    expect(detectModelFamily(tk, 'qwen3.5')).toBe(MODEL_FAMILIES['qwen3.5']);
  });
});
