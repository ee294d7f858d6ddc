/**
 * Per-turn proxy CPU for one new agent turn at ~8k, ~32k and ~128k tokens of context, for each model family with its
 * real tokenizer and chat template (test/support/model-dirs.ts; `--family NAME` picks one):
 * - chat-mode re-rendering: render (Jinja) + encode (BPE) the whole conversation, what a stateless proxy or the
 *   engine pays on every call;
 * - token mode: `SessionTokenBuffers.prepare` for the same turn (compare the messages with the buffer, render the
 *   minimal context, encode only the new tool result and the generation prompt, append to the buffer's ids).
 * The conversation is shell-tool turns whose results are `ls -l`-like listings (~1.4k tokens each; Gemma 3, whose
 * template has no tool turns, gets them as user turns); the sampled ids of each turn are what the family's model
 * writes (`formatSample`). Token mode's cost should stay flat as the context grows; it prints numbers and never passes
 * or fails on time.
 * Run: bun bench/token-mode.ts [--reps N] [--family NAME]
 */
import { detectModelFamily, loadTokenizer, SessionTokenBuffers, type ChatMessage, type ChatTool, type LoadedTokenizer } from '../src/tokenization/index.ts';
import type { ModelFamily } from '../src/tokenization/families.ts';
import { modelDir, MODEL_DIR_NAMES, type ModelDirName } from '../test/support/model-dirs.ts';

const TARGETS: [string, number][] = [['8k', 8_192], ['32k', 32_768], ['128k', 131_072]];
const repsFlag = process.argv.indexOf('--reps');
const REPS = repsFlag >= 0 ? Number(process.argv[repsFlag + 1]) : 5;
if (!Number.isInteger(REPS) || REPS < 1) {
  console.error('--reps must be a positive integer');
  process.exit(2);
}
const familyFlag = process.argv.indexOf('--family');
const ONLY = familyFlag >= 0 ? process.argv[familyFlag + 1] : undefined;
if (ONLY !== undefined && !(MODEL_DIR_NAMES as string[]).includes(ONLY)) {
  console.error(`--family must be one of ${MODEL_DIR_NAMES.join(', ')}`);
  process.exit(2);
}

const tools: ChatTool[] = [
  { type: 'function', function: { name: 'bash', description: 'Run a shell command in the workspace and return its output.', parameters: { type: 'object', properties: { command: { type: 'string' }, timeout: { type: 'integer' } }, required: ['command'] } } },
  { type: 'function', function: { name: 'read_file', description: 'Read a file.', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } },
];

function toolResult(turn: number): string {
  const out: string[] = [];
  for (let i = 0; i < 35; i++) {
    const n = turn * 1000 + i;
    out.push(`-rw-r--r-- 1 dev dev ${String(1000 + ((n * 7919) % 90000)).padStart(6)} Mar ${String(1 + (n % 28)).padStart(2)} 12:${String(n % 60).padStart(2, '0')} src/pkg_${n % 37}/module_${(n * 31) % 977}.py`);
  }
  return out.join('\n');
}

/** One assistant turn (a shell call, or plain text for families without tool turns) and the text its model samples. */
function assistantTurn(family: ModelFamily, turn: number): { message: ChatMessage; body: string; result: ChatMessage } {
  const content = `Let me look at part ${turn} of the tree.`;
  if (family.toolCallFormat === 'none') {
    return { message: { role: 'assistant', content }, body: family.formatSample({ reasoning: null, content, toolCalls: [] }, 'none'), result: { role: 'user', content: toolResult(turn) } };
  }
  const args = { command: `ls -l src/pkg_${turn}` };
  const message: ChatMessage = { role: 'assistant', content: '', tool_calls: [{ id: `call_${turn}`, type: 'function', function: { name: 'bash', arguments: JSON.stringify(args) } }] };
  return { message, body: family.formatSample({ reasoning: null, content: '', toolCalls: [{ name: 'bash', arguments: args }] }, 'none'), result: { role: 'tool', tool_call_id: `call_${turn}`, content: toolResult(turn) } };
}

function time(fn: () => void): number {
  const samples: number[] = [];
  for (let i = 0; i < REPS; i++) {
    const started = Bun.nanoseconds();
    fn();
    samples.push((Bun.nanoseconds() - started) / 1e6);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)]!;
}

function benchFamily(name: ModelDirName, tk: LoadedTokenizer): string[][] {
  const family = detectModelFamily(tk);
  const renderTools = family.toolCallFormat === 'none' ? [] : tools;
  const rows: string[][] = [];
  for (const [label, target] of TARGETS) {
    const messages: ChatMessage[] = [{ role: 'system', content: 'You are a coding agent working in a repository.' }, { role: 'user', content: 'Survey the source tree.' }];
    let turn = 0;
    let last = assistantTurn(family, 0);
    // Grow the conversation by whole turns until the rendered context reaches the target (estimated, then checked).
    while (true) {
      last = assistantTurn(family, turn);
      messages.push(last.message, last.result);
      turn++;
      if (turn % 2 === 0 && tk.renderChatIds(messages, { tools: renderTools }).length >= target) break;
    }
    const contextTokens = tk.renderChatIds(messages, { tools: renderTools }).length;
    // The buffer holds every turn before the newest result: prompt of the last call + its sampled ids.
    const before = messages.slice(0, -2);
    const buffers = new SessionTokenBuffers(tk, family);
    const plan0 = buffers.prepare('s', before, { tools: renderTools });
    // The token the sample ends on: the family's (gpt-oss <|call|> after a call), else the tokenizer's first eos.
    const endToken = family.sampleEnd?.({ reasoning: null, content: '', toolCalls: last.message.tool_calls ? [{ name: 'bash', arguments: {} }] : [] });
    const endId = (endToken === undefined ? undefined : tk.tokenToId(endToken)) ?? tk.eosTokenIds[0]!;
    buffers.commit(plan0, [...tk.encode(last.body), endId], last.message);
    const plan = buffers.prepare('s', messages, { tools: renderTools });
    if (!plan.incremental) throw new Error(`${name}: the benchmark conversation did not extend the buffer (${plan.reason})`);
    const chatMs = time(() => tk.renderChatIds(messages, { tools: renderTools }));
    const tokenMs = time(() => buffers.prepare('s', messages, { tools: renderTools }));
    rows.push([name, label, String(contextTokens), String(turn), chatMs.toFixed(2), tokenMs.toFixed(2), String(plan.encodedTokens), (chatMs / tokenMs).toFixed(1)]);
  }
  return rows;
}

const rows: string[][] = [];
for (const name of MODEL_DIR_NAMES) {
  if (ONLY !== undefined && name !== ONLY) continue;
  rows.push(...benchFamily(name, await loadTokenizer(modelDir(name))));
}

const header = ['model', 'context', 'tokens', 'turns', 'chat re-render ms', 'token mode ms', 'suffix tokens', 'speed-up ×'];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
console.log(`per-turn proxy CPU, median of ${REPS} (each model's own template + tokenizer, ${Bun.version})`);
console.log(line(header));
for (const row of rows) console.log(line(row));
