/**
 * Per-turn proxy cost over long agent sessions: 200-turn Anthropic Messages conversations (Claude Code's ~100 KB first
 * request, then per turn the engine's answer plus a ~600-character tool result) through `polar proxy`, capture and the
 * SQLite commit included, the engine excluded (it runs in its own process):
 * - chat: `polar proxy --engine vllm` → the instant mock engine (bench/lib/mock-engine.ts);
 * - token: `polar proxy --engine sim --mode token` → `polar sim` (instant prefill/decode; the proxy renders the chat
 *   template and tokenizes, the simulator samples).
 * The `-sse` variants ask for a stream (`stream: true`, as Claude Code does) and read the text deltas back: chat mode
 * then streams from the mock engine (vLLM-style, prompt ids on the first chunk), token mode from the simulator.
 * First `--warmup-sessions` whole sessions (default 5) are sent and not measured: JavaScriptCore still compiles the
 * call path's functions to its top tier after 1,000 calls, and a session's early turns would otherwise pay for it.
 * Then `--sessions` measured sessions (default 3) one after the other, each under its own API key.
 * CPU per call is read from /proc/<pid>/task/<tid>/schedstat (nanoseconds) before and after each call, so single calls
 * are resolved (unlike the 10 ms ticks of /proc/<pid>/stat): the JS thread alone, and all threads (JIT and GC helper
 * threads, the HTTP client, the checkpoint worker).
 * Rows: turns 10, 50, 100, 150, 200, each the median over the measured sessions of the 10 turns ending there.
 * Run: bun bench/proxy-turns.ts [--quick] [--sessions=N] [--warmup-sessions=N] [chat|token|chat-sse|token-sse]   (--quick: 60 turns, 1 + 1 sessions)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineBench, numberOption } from './lib/bench.ts';
import { messagesBodies, type Json } from './lib/requests.ts';
import { freePort, startMockEngine, startServer, stopAll, type ServerProcess } from './lib/servers.ts';
import { threadCpuMs } from './lib/proc.ts';
import { median } from './lib/stats.ts';
import type { Cell } from './lib/table.ts';

const ROOT = join(import.meta.dir, '..');

/** On-CPU time of `pid`'s JS thread and of all its threads, ms (bench/lib/proc.ts threadCpuMs). */
function onCpuMs(pid: number): { main: number; all: number } {
  const threads = threadCpuMs(pid);
  return { main: threads.main ?? 0, all: Object.values(threads).reduce((sum, ms) => sum + ms, 0) };
}

/** The text blocks an Anthropic Messages event stream carries (its text deltas joined), as a non-streaming answer has them. */
function streamedText(sse: string): Json[] {
  let text = '';
  for (const line of sse.split('\n')) {
    if (!line.startsWith('data: ')) continue;
    const event = JSON.parse(line.slice(6)) as { type?: string; delta?: { type?: string; text?: string } };
    if (event.type === 'content_block_delta' && event.delta?.type === 'text_delta') text += event.delta.text ?? '';
  }
  return text === '' ? [] : [{ type: 'text', text }];
}

/** A tool result of about 600 characters, different every turn (an `ls -l`-like listing). */
function toolResult(turn: number): string {
  const lines: string[] = [];
  for (let k = 0; k < 8; k++) lines.push(`-rw-r--r-- 1 user user ${(turn * 97 + k * 13) % 9000 + 100} Dec  1 03:${String(k).padStart(2, '0')} file_${turn}_${k}.py`);
  return lines.join('\n');
}

await defineBench({
  name: 'proxy-turns',
  variants: () => ['chat', 'token', 'chat-sse', 'token-sse'],
  async run(variant, ctx) {
    const mode = variant.startsWith('chat') ? 'chat' : 'token';
    const stream = variant.endsWith('-sse');
    const turns = ctx.quick ? 60 : 200;
    const dir = mkdtempSync(join(tmpdir(), 'polar-proxy-turns-'));
    const servers: ServerProcess[] = [];
    try {
      const enginePort = freePort();
      const engine =
        mode === 'chat'
          ? await startMockEngine()
          : await startServer({
              name: 'polar sim',
              cmd: [process.execPath, join(ROOT, 'src/main.ts'), 'sim', '--port', String(enginePort), '--prefill-tps', '0', '--decode-tps', '0', '--max-model-len', '1000000'],
              port: enginePort,
            });
      servers.push(engine);
      const port = freePort();
      const engineArgs = mode === 'chat' ? ['--engine', 'vllm'] : ['--engine', 'sim', '--mode', 'token'];
      const proxy = await startServer({
        name: 'polar proxy',
        cmd: [process.execPath, join(ROOT, 'src/main.ts'), 'proxy', '--port', String(port), ...engineArgs, '--engine-url', engine.url, '--db', join(dir, 'polar.db')],
        port,
      });
      servers.push(proxy);
      const count = { ok: (value: number) => Number.isInteger(value) && value >= 0, what: 'a non-negative integer' };
      const measured = Math.max(1, numberOption(ctx.args, 'sessions', ctx.quick ? 1 : 3, count));
      const warmups = numberOption(ctx.args, 'warmup-sessions', ctx.quick ? 1 : 5, count);
      const base = messagesBodies().large;
      /** One whole session under `key`; per turn: JS-thread and all-thread CPU ms and the request's bytes. */
      const session = async (key: string) => {
        const messages = [...(base.messages as Json[])];
        const turnsOut: { main: number; all: number; bytes: number }[] = [];
        for (let turn = 1; turn <= turns; turn++) {
          const body = JSON.stringify({ ...base, messages, max_tokens: 32, stream });
          const before = onCpuMs(proxy.pid);
          const response = await fetch(`${proxy.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body });
          const text = await response.text();
          const after = onCpuMs(proxy.pid);
          turnsOut.push({ main: after.main - before.main, all: after.all - before.all, bytes: body.length });
          if (response.status !== 200) throw new Error(`turn ${turn}: proxy answered ${response.status}: ${text.slice(0, 300)}`);
          const content = stream ? streamedText(text) : ((JSON.parse(text) as { content?: Json[] }).content ?? []).filter((block) => block.type === 'text');
          messages.push({ role: 'assistant', content: content.length > 0 ? content : [{ type: 'text', text: '.' }] });
          messages.push({ role: 'user', content: [{ type: 'text', text: toolResult(turn) }] });
        }
        return turnsOut;
      };
      for (let w = 0; w < warmups; w++) await session(`turns-${mode}-warmup-${w}`);
      const sessions: { main: number; all: number; bytes: number }[][] = [];
      for (let m = 0; m < measured; m++) sessions.push(await session(`turns-${mode}-${m}`));
      const window = (t: number, pick: (turn: { main: number; all: number }) => number) => median(sessions.flatMap((turnsOut) => turnsOut.slice(Math.max(0, t - 10), t).map(pick)));
      const marks = [10, 50, 100, 150, 200].filter((t) => t <= turns);
      const rows: Cell[][] = marks.map((t) => {
        const kb = sessions[0]![t - 1]!.bytes / 1024;
        const main = window(t, (x) => x.main);
        return [t, kb, main, window(t, (x) => x.all), (main / kb) * 100];
      });
      const first = window(10, (x) => x.main);
      const last = window(turns, (x) => x.main);
      const sizes = sessions[0]!.map((x) => x.bytes);
      return {
        title: `Per-turn proxy CPU over ${measured} ${turns}-turn session(s) after ${warmups} warm-up session(s) (${mode} mode${stream ? ', streamed' : ''}; capture + SQLite commit included, engine excluded)`,
        columns: ['turn', 'request KB', 'JS thread ms', 'all threads ms', 'JS ms per 100 KB'],
        keyColumns: 1,
        rows,
        notes: [
          `turn ${turns} / turn 10: ${(last / first).toFixed(2)}× the JS thread's CPU for ${(sizes[turns - 1]! / sizes[9]!).toFixed(2)}× the request bytes`,
          'CPU: on-CPU time of the proxy\'s JS thread / all its threads (/proc/<pid>/task/*/schedstat) around each call; median over the sessions of the 10 turns ending at the row\'s turn',
        ],
      };
    } finally {
      await stopAll(servers);
      rmSync(dir, { recursive: true, force: true });
    }
  },
});
