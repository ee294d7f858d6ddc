/**
 * Request bodies for the proxy benchmarks, built from recorded harness traffic
 * (test/fixtures/harness-traffic, or a copy under src/dialects/<name>/__fixtures__): a small request and a ~100 KB one per dialect. The large ones are a real Claude Code (Anthropic Messages)
 * or qwen-code (OpenAI Chat) request whose last tool result is padded with `ls -l`-like lines, the shape that makes
 * agent contexts large.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { HARNESS_TRAFFIC } from '../../test/support/harness-traffic.ts';

const TRAFFIC = HARNESS_TRAFFIC;
const REPO = join(import.meta.dir, '..', '..');

export type Json = Record<string, unknown>;

/** The `body` of a recorded request; tries test/fixtures/harness-traffic first, then the given copies (paths from the repository root). */
export function fixtureBody(recording: string, ...repoCopies: string[]): Json {
  for (const path of [join(TRAFFIC, recording), ...repoCopies.map((p) => join(REPO, p))]) {
    if (!existsSync(path)) continue;
    const recorded = JSON.parse(readFileSync(path, 'utf8')) as Json;
    return (recorded.body ?? recorded) as Json;
  }
  throw new Error(`fixture ${recording} not found (looked in ${TRAFFIC} and ${repoCopies.join(', ')})`);
}

function filler(bytes: number): string {
  const lines: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const line = `-rw-r--r-- 1 dev dev ${String(1000 + ((i * 7919) % 90000)).padStart(6)} Mar ${String(1 + (i % 28)).padStart(2)} 12:${String(i % 60).padStart(2, '0')} src/module_${i}/file_${(i * 31) % 977}.py\n`;
    lines.push(line);
    size += line.length + 1; // JSON escapes the newline as two bytes
  }
  return lines.join('').slice(0, Math.max(0, bytes));
}

/**
 * Pads the last tool result of `body` (Anthropic `tool_result` block or Chat `tool` message) so the serialized body
 * is about `targetBytes` long (JSON escaping leaves it within ~0.1 %).
 * @throws Error when the body has no tool result to pad.
 */
export function padToBytes(body: Json, targetBytes: number): Json {
  const copy = structuredClone(body);
  const messages = copy.messages as Json[];
  let setText: ((extra: string) => void) | null = null;
  for (let i = messages.length - 1; i >= 0 && !setText; i--) {
    const m = messages[i]!;
    if (m.role === 'tool') {
      const original = typeof m.content === 'string' ? m.content : JSON.stringify(m.content);
      setText = (extra) => (m.content = original + extra);
    } else if (Array.isArray(m.content)) {
      const block = (m.content as Json[]).findLast((b) => b.type === 'tool_result');
      if (block) {
        const original = typeof block.content === 'string' ? block.content : JSON.stringify(block.content);
        setText = (extra) => (block.content = original + extra);
      }
    }
  }
  if (!setText) throw new Error('request has no tool result to pad');
  setText('');
  const base = JSON.stringify(copy).length;
  setText(`\n${filler(targetBytes - base - 2)}`);
  // Escaping makes the first guess slightly off; trim the filler to the exact size.
  const over = JSON.stringify(copy).length - targetBytes;
  if (over > 0) setText(`\n${filler(targetBytes - base - 2 - over)}`);
  return copy;
}

export const SMALL_PROMPT = 'Run ls in the current directory and tell me what you see';

/** Anthropic Messages bodies (no `stream` field; set it per call). */
export function messagesBodies(): { small: Json; large: Json } {
  const recorded = fixtureBody('claude-code/quiet/002-request.json', 'src/dialects/anthropic-messages/__fixtures__/claude-code-002-request.json');
  delete recorded.stream;
  return {
    small: { model: 'claude-sonnet-4-5', max_tokens: 1024, messages: [{ role: 'user', content: SMALL_PROMPT }] },
    large: padToBytes(recorded, 100 * 1024),
  };
}

/** OpenAI Chat bodies (no `stream` field; set it per call). */
export function chatBodies(): { small: Json; large: Json } {
  const recorded = fixtureBody('qwen-code/quiet/003-request.json');
  delete recorded.stream;
  delete recorded.stream_options;
  return {
    small: { model: 'mock', max_tokens: 1024, messages: [{ role: 'user', content: SMALL_PROMPT }] },
    large: padToBytes(recorded, 100 * 1024),
  };
}
