/**
 * Per-turn proxy CPU for one new agent turn at ~8k, ~32k and ~128k tokens of context, Qwen3 tokenizer and template:
 * - chat-mode re-rendering: render (Jinja) + encode (BPE) the whole conversation, what a stateless proxy or the
 *   engine pays on every call;
 * - token mode: `SessionTokenBuffers.prepare` for the same turn (compare the messages with the buffer, render the
 *   minimal context, encode only the new tool result and the generation prompt, append to the buffer's ids).
 * The conversation is shell-tool turns whose results are `ls -l`-like listings (~1.4k tokens each). Token mode's cost
 * should stay flat as the context grows; it prints numbers and never passes or fails on time.
 * Run: bun bench/token-mode.ts [--reps N]
 */
import { detectModelFamily, loadTokenizer, pythonJsonDumps, SessionTokenBuffers, type ChatMessage, type ChatTool } from '../src/tokenization/index.ts';

const TARGETS: [string, number][] = [['8k', 8_192], ['32k', 32_768], ['128k', 131_072]];
const repsFlag = process.argv.indexOf('--reps');
const REPS = repsFlag >= 0 ? Number(process.argv[repsFlag + 1]) : 5;
if (!Number.isInteger(REPS) || REPS < 1) {
  console.error('--reps must be a positive integer');
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

function assistantTurn(turn: number): { message: ChatMessage; body: string } {
  const content = `Let me look at part ${turn} of the tree.`;
  const args = { command: `ls -l src/pkg_${turn}` };
  const message: ChatMessage = { role: 'assistant', content, tool_calls: [{ id: `call_${turn}`, type: 'function', function: { name: 'bash', arguments: JSON.stringify(args) } }] };
  // What the model sampled: the template's canonical form of the turn (Qwen3, no reasoning).
  return { message, body: `${content}\n<tool_call>\n{"name": "bash", "arguments": ${pythonJsonDumps(args)}}\n</tool_call>` };
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

const tk = await loadTokenizer();
const family = detectModelFamily(tk);
const eot = tk.eosTokenIds[0]!;
const rows: string[][] = [];
for (const [label, target] of TARGETS) {
  const messages: ChatMessage[] = [{ role: 'system', content: 'You are a coding agent working in a repository.' }, { role: 'user', content: 'Survey the source tree.' }];
  let turn = 0;
  let last = assistantTurn(0);
  // Grow the conversation by whole turns until the rendered context reaches the target (estimated, then checked).
  while (true) {
    last = assistantTurn(turn);
    messages.push(last.message, { role: 'tool', tool_call_id: `call_${turn}`, content: toolResult(turn) });
    turn++;
    if (turn % 2 === 0 && tk.renderChatIds(messages, { tools }).length >= target) break;
  }
  const contextTokens = tk.renderChatIds(messages, { tools }).length;
  // The buffer holds every turn before the newest tool result: prompt of the last call + its sampled ids.
  const before = messages.slice(0, -2);
  const buffers = new SessionTokenBuffers(tk, family);
  const plan0 = buffers.prepare('s', before, { tools });
  buffers.commit(plan0, [...tk.encode(last.body), eot], last.message);
  const plan = buffers.prepare('s', messages, { tools });
  if (!plan.incremental) throw new Error(`the benchmark conversation did not extend the buffer (${plan.reason})`);
  const chatMs = time(() => tk.renderChatIds(messages, { tools }));
  const tokenMs = time(() => buffers.prepare('s', messages, { tools }));
  rows.push([label, String(contextTokens), String(turn), chatMs.toFixed(2), tokenMs.toFixed(2), String(plan.encodedTokens), (chatMs / tokenMs).toFixed(1)]);
}

const header = ['context', 'tokens', 'turns', 'chat re-render ms', 'token mode ms', 'suffix tokens', 'speed-up ×'];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i]!)).join('  ');
console.log(`per-turn proxy CPU, median of ${REPS} (Qwen3 template + tokenizer, ${Bun.version})`);
console.log(line(header));
for (const row of rows) console.log(line(row));
