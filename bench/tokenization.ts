/**
 * Tokenization cost per agent turn with the Qwen3 tokenizer and chat template (src/tokenization loadTokenizer): a
 * full render (Jinja) + encode (BPE) of the whole conversation at ~8k, ~32k and ~128k tokens of context, which is
 * what a stateless proxy pays on every call. For comparison, the encode of only the newest turn (a ~1.4k-token tool
 * result plus the generation prompt), which is what incremental suffix encoding (token mode, docs/architecture.md#chat-mode-and-token-mode)
 * pays instead; that column is the encode cost alone (bench/token-mode.ts measures token mode's whole per-turn work).
 * Encoding repeats within one process: the same conversation every iteration, so the byte-level tokenizers' piece memo
 * (src/tokenization/piece-encoder.ts) is warm after the first; a fresh process's first encode is the `tokenizer load` run.
 * The conversation is a qwen-code system prompt and tool list followed by shell-tool turns whose results are
 * `ls -l`-like listings. Run: bun bench/tokenization.ts [--quick] [8k|32k|128k]
 */
import { loadTokenizer, type ChatMessage, type ChatTool } from '../src/tokenization/index.ts';
import { defineBench } from './lib/bench.ts';
import { fixtureBody } from './lib/requests.ts';
import { median } from './lib/stats.ts';

const TARGETS: Record<string, number> = { '8k': 8_192, '32k': 32_768, '128k': 131_072 };

function toolResult(turn: number, lines: number): string {
  const out: string[] = [];
  for (let i = 0; i < lines; i++) {
    const n = turn * 1000 + i;
    out.push(`-rw-r--r-- 1 dev dev ${String(1000 + ((n * 7919) % 90000)).padStart(6)} Mar ${String(1 + (n % 28)).padStart(2)} 12:${String(n % 60).padStart(2, '0')} src/pkg_${n % 37}/module_${(n * 31) % 977}.py`);
  }
  return out.join('\n');
}

function turnMessages(turn: number): ChatMessage[] {
  const id = `call_${turn}`;
  return [
    { role: 'assistant', content: `Let me look at part ${turn} of the tree.`, tool_calls: [{ id, type: 'function', function: { name: 'run_shell_command', arguments: JSON.stringify({ command: `ls -l src/pkg_${turn}` }) } }] },
    { role: 'tool', tool_call_id: id, content: toolResult(turn, 35) },
  ];
}

await defineBench({
  name: 'tokenization',
  variants: () => Object.keys(TARGETS),
  async run(variant, ctx) {
    const target = TARGETS[variant]!;
    const t0 = performance.now();
    const tok = await loadTokenizer();
    const loadMs = performance.now() - t0;
    const recorded = fixtureBody('qwen-code/quiet/003-request.json');
    const tools = (recorded.tools ?? []) as ChatTool[];
    const head = (recorded.messages as ChatMessage[]).slice(0, 2); // system prompt + first user message
    const options = { tools, addGenerationPrompt: true, enableThinking: true };
    // Size the conversation from one turn's token count, then grow it to the target (setup, not measured).
    const headTokens = tok.renderChatIds(head, options).length;
    const perTurn = tok.renderChatIds([...head, ...turnMessages(0)], options).length - headTokens;
    const turns = Math.max(1, Math.round((target - headTokens) / perTurn));
    const messages = [...head];
    for (let t = 0; t < turns; t++) messages.push(...turnMessages(t));
    const newTurnText = tok.renderChat(messages, options).slice(tok.renderChat(messages.slice(0, -2), { ...options, addGenerationPrompt: false }).length);

    const iterations = ctx.quick ? 3 : 10;
    const renderMs: number[] = [];
    const encodeMs: number[] = [];
    const suffixMs: number[] = [];
    let contextTokens = 0;
    let suffixTokens = 0;
    tok.encode(tok.renderChat(messages, options)); // warm-up: JIT and any lazy tokenizer state
    for (let i = 0; i < iterations; i++) {
      const a = performance.now();
      const text = tok.renderChat(messages, options);
      const b = performance.now();
      contextTokens = tok.encode(text).length;
      const c = performance.now();
      suffixTokens = tok.encode(newTurnText).length;
      const d = performance.now();
      renderMs.push(b - a);
      encodeMs.push(c - b);
      suffixMs.push(d - c);
    }
    const render = median(renderMs);
    const encode = median(encodeMs);
    const total = render + encode;
    return {
      title: 'tokenization per turn · Qwen3 chat template + tokenizer (src/tokenization)',
      columns: ['context', 'messages', 'context tokens', 'render ms', 'encode ms', 'full ms/turn', 'full tok/s', 'new-turn tokens', 'new-turn encode ms', 'tokenizer load ms'],
      rows: [[variant, messages.length, contextTokens, render, encode, total, contextTokens / (total / 1000), suffixTokens, median(suffixMs), loadMs]],
      keyColumns: 1,
      notes: [
        `median of ${iterations} iterations after one warm-up, in one fresh process; full = renderChat (Jinja) + encode of the whole conversation.`,
        "new-turn encode = encode of only the newest tool result + generation prompt (what token mode's incremental suffix encoding pays; bench/token-mode.ts measures token mode whole).",
      ],
    };
  },
});
