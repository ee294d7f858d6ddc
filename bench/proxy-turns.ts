/**
 * Per-turn proxy cost over a long agent session: one 200-turn Anthropic Messages conversation (Claude Code's ~100 KB
 * first request, then per turn the engine's answer plus a ~600-character tool result) through `polar proxy`, capture
 * and the SQLite commit included, the engine excluded (it runs in its own process):
 * - chat: `polar proxy --engine vllm` → the instant mock engine (bench/lib/mock-engine.ts);
 * - token: `polar proxy --engine sim --mode token` → `polar sim` (instant prefill/decode; the proxy renders the chat
 *   template and tokenizes, the simulator samples).
 * CPU per call is the proxy's on-CPU time from /proc/<pid>/task/<tid>/schedstat (nanoseconds, all threads), read
 * before and after each call, so single calls are resolved (unlike the 10 ms ticks of /proc/<pid>/stat).
 * Rows: turns 10, 50, 100, 150, 200 (each the median of the 5 turns ending there), with the request size and CPU per
 * 100 KB of request. Run: bun bench/proxy-turns.ts [--quick] [chat|token]   (--quick: 60 turns)
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineBench } from './lib/bench.ts';
import { messagesBodies, type Json } from './lib/requests.ts';
import { freePort, startMockEngine, startServer, stopAll, type ServerProcess } from './lib/servers.ts';
import { median } from './lib/stats.ts';
import type { Cell } from './lib/table.ts';

const ROOT = join(import.meta.dir, '..');

/** On-CPU time of every thread of `pid`, ms (schedstat field 1 is nanoseconds; proc(5)). */
function onCpuMs(pid: number): number {
  let ns = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread exited between listing and reading
    }
  }
  return ns / 1e6;
}

/** A tool result of about 600 characters, different every turn (an `ls -l`-like listing). */
function toolResult(turn: number): string {
  const lines: string[] = [];
  for (let k = 0; k < 8; k++) lines.push(`-rw-r--r-- 1 user user ${(turn * 97 + k * 13) % 9000 + 100} Dec  1 03:${String(k).padStart(2, '0')} file_${turn}_${k}.py`);
  return lines.join('\n');
}

await defineBench({
  name: 'proxy-turns',
  variants: () => ['chat', 'token'],
  async run(variant, ctx) {
    const mode = variant as 'chat' | 'token';
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
      const base = messagesBodies().large;
      const messages = [...(base.messages as Json[])];
      const cpu: number[] = [];
      const sizes: number[] = [];
      for (let turn = 1; turn <= turns; turn++) {
        const body = JSON.stringify({ ...base, messages, max_tokens: 32, stream: false });
        const before = onCpuMs(proxy.pid);
        const response = await fetch(`${proxy.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': `turns-${mode}` }, body });
        const answer = (await response.json()) as { content?: Json[] };
        cpu.push(onCpuMs(proxy.pid) - before);
        sizes.push(body.length);
        if (response.status !== 200) throw new Error(`turn ${turn}: proxy answered ${response.status}: ${JSON.stringify(answer).slice(0, 300)}`);
        const content = (answer.content ?? []).filter((block) => block.type === 'text');
        messages.push({ role: 'assistant', content: content.length > 0 ? content : [{ type: 'text', text: '.' }] });
        messages.push({ role: 'user', content: [{ type: 'text', text: toolResult(turn) }] });
      }
      const marks = [10, 50, 100, 150, 200].filter((t) => t <= turns);
      const rows: Cell[][] = marks.map((t) => {
        const window = cpu.slice(t - 5, t);
        const ms = median(window);
        const kb = sizes[t - 1]! / 1024;
        return [t, kb, ms, (ms / kb) * 100];
      });
      const first = median(cpu.slice(5, 10));
      const last = median(cpu.slice(turns - 5, turns));
      return {
        title: `Per-turn proxy CPU over a ${turns}-turn session (${mode} mode; capture + SQLite commit included, engine excluded)`,
        columns: ['turn', 'request KB', 'proxy CPU ms', 'CPU ms per 100 KB'],
        keyColumns: 1,
        rows,
        notes: [
          `turn ${turns} / turn 10: ${(last / first).toFixed(2)}× the CPU for ${(sizes[turns - 1]! / sizes[9]!).toFixed(2)}× the request bytes`,
          'proxy CPU: on-CPU time of all the proxy\'s threads (/proc/<pid>/task/*/schedstat) around each call; median of the 5 turns ending at the row\'s turn',
        ],
      };
    } finally {
      await stopAll(servers);
      rmSync(dir, { recursive: true, force: true });
    }
  },
});
