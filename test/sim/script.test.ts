import { expect, test } from 'bun:test';
import { join } from 'node:path';
import { MODEL_FAMILIES } from '../../src/tokenization/families.ts';
import { chooseVariant, findShellTool, parseBehaviourScript, planTurn, shellArguments } from '../../src/sim/script.ts';
import type { ChatTool } from '../../src/tokenization/chat-messages.ts';
import { HARNESS_TRAFFIC } from '../support/harness-traffic.ts';

const fixtures = HARNESS_TRAFFIC;
const body = async (path: string) => ((await Bun.file(join(fixtures, path)).json()) as { body: Record<string, unknown> }).body;
const fn = (name: string, parameters: Record<string, unknown>): ChatTool => ({ type: 'function', function: { name, parameters } });

test('finds the shell-like tool of each harness (recorded tool lists)', async () => {
  const pi = (await body('pi/chat/001-request.json')).tools as ChatTool[];
  expect(findShellTool(pi)).toMatchObject({ name: 'bash', commandArg: 'command', commandKind: 'string' });
  const opencode = (await body('opencode/quiet/002-request.json')).tools as ChatTool[];
  const oc = findShellTool(opencode)!;
  expect(oc.name).toBe('bash');
  expect(shellArguments(oc, 'ls')).toEqual({ command: 'ls' });
  const claude = ((await body('claude-code/quiet/001-request.json')).tools as { name: string; input_schema: Record<string, unknown> }[]).map((t) => fn(t.name, t.input_schema));
  expect(findShellTool(claude)?.name).toBe('Bash');
  const codex = ((await body('codex/quiet/001-request.json')).tools as { type: string; name?: string; parameters?: Record<string, unknown> }[])
    .filter((t) => t.type === 'function' && t.name)
    .map((t) => fn(t.name!, t.parameters ?? {}));
  expect(findShellTool(codex)).toMatchObject({ name: 'exec_command', commandArg: 'cmd' });
  const gemini = ((await body('gemini-cli/quiet/001-request.json')).tools as { functionDeclarations: { name: string; parametersJsonSchema?: Record<string, unknown>; parameters?: Record<string, unknown> }[] }[])
    .flatMap((t) => t.functionDeclarations)
    .map((d) => fn(d.name, d.parametersJsonSchema ?? d.parameters ?? {}));
  expect(findShellTool(gemini)?.name).toBe('run_shell_command');
});

test('an unknown tool with one required command: string or argv array; other required args filled from the schema', () => {
  const argv = fn('terminal', { type: 'object', required: ['command'], properties: { command: { type: 'array', items: { type: 'string' } } } });
  const tool = findShellTool([fn('read', { type: 'object', required: ['path'], properties: { path: { type: 'string' } } }), argv])!;
  expect(tool).toMatchObject({ name: 'terminal', commandKind: 'argv' });
  expect(shellArguments(tool, 'echo hi')).toEqual({ command: ['bash', '-lc', 'echo hi'] });
  const withDescription = fn('bash', { type: 'object', required: ['command', 'description', 'timeout'], properties: { command: { type: 'string' }, description: { type: 'string' }, timeout: { type: 'integer' }, mode: { enum: ['a', 'b'] } } });
  expect(shellArguments(findShellTool([withDescription])!, 'ls -la')).toEqual({ command: 'ls -la', description: 'Run: ls -la', timeout: 120000 });
  expect(findShellTool([fn('run', { type: 'object', required: ['command', 'x'], properties: { command: { type: 'string' }, x: { type: 'string' } } })])).toBeNull();
});

test('scripts validate with clear errors', () => {
  expect(() => parseBehaviourScript('variants: {a: {weight: 1, steps: [{shel: ls}]}}')).toThrow(/invalid behaviour script: variants\.a\.steps\.0/);
  expect(() => parseBehaviourScript('variants: {}')).toThrow(/at least one variant/);
  expect(() => parseBehaviourScript('variants: [')).toThrow(/not valid YAML/);
  expect(parseBehaviourScript({ variants: { a: { steps: [{ say: 'x' }] } } }).variants.a?.weight).toBe(1);
});

test('planTurn: think + tool call in Qwen3 format, step = tool results, then "Done."', () => {
  const script = parseBehaviourScript({ variants: { solve: { weight: 1, steps: [{ think: 'look', shell: 'ls' }, { say: 'Fixed.' }] } } });
  const tools = [fn('bash', { type: 'object', required: ['command'], properties: { command: { type: 'string' } } })];
  const plan = (toolResults: number, thinking: 'none' | 'opened' | 'disabled' = 'none') => planTurn({ script, sessionId: 's', toolResults, tools, thinking, family: MODEL_FAMILIES.qwen3 });
  expect(plan(0).text).toBe('<think>\nlook\n</think>\n\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>');
  expect(plan(0, 'opened').text).toBe('look\n</think>\n\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>');
  expect(plan(0, 'disabled').text).toBe('<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>');
  expect(plan(1)).toMatchObject({ text: 'Fixed.', kind: 'say', variant: 'solve' });
  expect(plan(2)).toMatchObject({ text: 'Done.', kind: 'done' });
  expect(planTurn({ script: null, sessionId: 's', toolResults: 0, tools, thinking: 'none', family: MODEL_FAMILIES.qwen3 }).kind).toBe('default');
});

test('variant choice is a seeded hash of the session id', () => {
  const script = parseBehaviourScript({ variants: { solve: { weight: 0.5, steps: [] }, give_up: { weight: 0.5, steps: [] } } });
  const picks = Array.from({ length: 64 }, (_, i) => chooseVariant(script, `session-${i}`));
  expect(new Set(picks)).toEqual(new Set(['solve', 'give_up']));
  expect(Array.from({ length: 64 }, (_, i) => chooseVariant(script, `session-${i}`))).toEqual(picks);
  const reseeded = parseBehaviourScript({ ...script, seed: 7 });
  expect(Array.from({ length: 64 }, (_, i) => chooseVariant(reseeded, `session-${i}`))).not.toEqual(picks);
  const onlyOne = parseBehaviourScript({ variants: { a: { weight: 0, steps: [] }, b: { weight: 2, steps: [] } } });
  expect(chooseVariant(onlyOne, 'x')).toBe('b');
});

test("Cline CLI's run_commands takes a list of whole command lines: the command goes in as one element, not as bash -lc argv", () => {
  const runCommands = fn('run_commands', {
    type: 'object', required: ['commands'], additionalProperties: false,
    properties: { commands: { type: 'array', items: { type: 'string' }, description: 'Array of complete shell command strings to execute.' } },
  });
  const tool = findShellTool([fn('read_files', { type: 'object', required: ['paths'], properties: { paths: { type: 'array', items: { type: 'string' } } } }), runCommands])!;
  expect(tool).toMatchObject({ name: 'run_commands', commandArg: 'commands', commandKind: 'list' });
  expect(shellArguments(tool, 'cat stats.py && python3 -m unittest -q')).toEqual({ commands: ['cat stats.py && python3 -m unittest -q'] });
});

test('finds the shell-like tool in the recorded tool lists of Cline (run_commands), Continue (Bash) and Kilo Code (bash)', async () => {
  const cline = findShellTool((await body('cline/polar-run/001-request.json')).tools as ChatTool[])!;
  expect(cline).toMatchObject({ name: 'run_commands', commandKind: 'list' });
  expect(shellArguments(cline, 'ls')).toEqual({ commands: ['ls'] });
  const cont = findShellTool((await body('continue/polar-run/001-request.json')).tools as ChatTool[])!;
  expect(cont).toMatchObject({ name: 'Bash', commandArg: 'command', commandKind: 'string' });
  const kilo = findShellTool((await body('kilo/polar-run/001-request.json')).tools as ChatTool[])!;
  expect(kilo).toMatchObject({ name: 'bash', commandArg: 'command', commandKind: 'string' });
});

test("OpenClaw's exec tool (not a known name) is found by its one required string property, command", async () => {
  const tools = (await body('openclaw/polar-run/001-request.json')).tools as ChatTool[];
  const tool = findShellTool(tools)!;
  expect(tool).toMatchObject({ name: 'exec', commandArg: 'command', commandKind: 'string' });
  expect(shellArguments(tool, 'ls')).toMatchObject({ command: 'ls' });
});

test('OpenClaw ends every request with an internal-context user message that the next request drops (why its calls do not prefix-merge)', async () => {
  const first = (await body('openclaw/polar-run/001-request.json')).messages as { role: string; content: unknown }[];
  const second = (await body('openclaw/polar-run/002-request.json')).messages as { role: string; content: unknown }[];
  const internal = (m: { content: unknown }) => JSON.stringify(m.content).includes('BEGIN_OPENCLAW_INTERNAL_CONTEXT');
  expect(first.map((m) => m.role)).toEqual(['system', 'user', 'user']);
  expect(internal(first.at(-1)!)).toBe(true);
  expect(second.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'user']);
  expect(internal(second.at(-1)!)).toBe(true);
  // The first request's last message is not in the second at its position: the second does not extend the first.
  expect(JSON.stringify(second[2])).not.toBe(JSON.stringify(first[2]));
});
