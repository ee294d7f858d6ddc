/**
 * Token mode's incremental prompt on recorded harness traffic (OpenAI Chat requests of Cline, Continue, Kilo Code,
 * OpenClaw, OpenCode, pi, Qwen Code, with their real tool lists): after the turn that produced the recording's last
 * assistant message, the next request's prompt (previous prompt + sampled ids + the suffix rendered for only the new
 * messages) equals the full chat-template rendering of that request encoded from scratch, token for token. The
 * embedded Qwen3 template reads the tools only in its system header, so the suffix is rendered without them; this test
 * is what shows that leaves the ids unchanged.
 */
import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { detectModelFamily, loadTokenizer, SessionTokenBuffers, type ChatMessage, type ChatTool } from '../../src/tokenization/index.ts';
import { templateToolsOnlyInHeader } from '../../src/tokenization/tokenizer.ts';
import { HARNESS_TRAFFIC } from '../support/harness-traffic.ts';

const tk = await loadTokenizer();
const family = detectModelFamily(tk);
const eot = tk.eosTokenIds[0]!;
const RUNS = ['cline/polar-run', 'continue/polar-run', 'kilo/polar-run', 'openclaw/polar-run', 'opencode/quiet', 'pi/chat', 'qwen-code/quiet'];

function lastRequest(run: string): { messages: ChatMessage[]; tools: ChatTool[] } {
  const dir = join(HARNESS_TRAFFIC, run);
  const file = readdirSync(dir).filter((f) => f.endsWith('-request.json')).sort().pop()!;
  const body = JSON.parse(readFileSync(join(dir, file), 'utf8')).body as { messages: ChatMessage[]; tools?: ChatTool[] };
  return { messages: body.messages, tools: body.tools ?? [] };
}

describe('incremental prompt equals the full render + encode on recorded harness requests', () => {
  test('the embedded Qwen3 template reads tools only in its header (the suffix is rendered without them)', () => {
    expect(tk.toolsOnlyInHeader).toBe(true);
  });
  for (const run of RUNS) {
    test(run, () => {
      const { messages, tools } = lastRequest(run);
      expect(tools.length).toBeGreaterThan(0);
      const at = messages.map((m) => m.role).lastIndexOf('assistant');
      expect(at).toBeGreaterThan(0);
      const settings = { tools };
      // Turn 1: the messages before the assistant turn, rendered in full.
      const buffers = new SessionTokenBuffers(tk, family);
      const first = buffers.prepare(run, messages.slice(0, at), settings);
      expect(first.incremental).toBe(false);
      // What the model sampled: the template's own tokens of that assistant turn (its text in the next full render).
      const fullText = tk.renderChat(messages, { tools });
      const promptText = tk.renderChat(messages.slice(0, at), { tools });
      expect(fullText.startsWith(promptText)).toBe(true);
      const end = fullText.indexOf('<|im_end|>', promptText.length);
      const sampled = [...tk.encode(fullText.slice(promptText.length, end)), eot];
      buffers.commit(first, sampled, messages[at]!);
      // Turn 2: only the new messages are rendered and encoded.
      const second = buffers.prepare(run, messages, settings);
      expect(second.incremental).toBe(true);
      expect(Array.from(second.promptIds)).toEqual(tk.encode(fullText));
      expect(second.encodedTokens).toBeLessThan(second.promptIds.length / 4);
    });
  }
});

describe('templateToolsOnlyInHeader', () => {
  const fixtures = join(import.meta.dir, '..', 'fixtures', 'model-templates');
  test('Llama 3.1 (binds tools with set) and gpt-oss (no messages loop at top level) are treated as tool-dependent', () => {
    expect(templateToolsOnlyInHeader(readFileSync(join(fixtures, 'llama-3.1.jinja'), 'utf8'))).toBe(false);
    expect(templateToolsOnlyInHeader(readFileSync(join(fixtures, 'gpt-oss.jinja'), 'utf8'))).toBe(false);
  });
  test('a template that reads tools inside the messages loop is tool-dependent; one that reads them before is not', () => {
    const header = '{%- if tools %}{{ tools | tojson }}{%- endif %}{%- for m in messages %}{{ m.content }}{%- endfor %}';
    const inLoop = '{%- for m in messages %}{%- if tools %}[T]{%- endif %}{{ m.content }}{%- endfor %}';
    const viaMacro = '{%- macro t() %}{{ tools | length }}{%- endmacro %}{%- for m in messages %}{{ t() }}{%- endfor %}';
    expect(templateToolsOnlyInHeader(header)).toBe(true);
    expect(templateToolsOnlyInHeader(inLoop)).toBe(false);
    expect(templateToolsOnlyInHeader(viaMacro)).toBe(false);
  });
});
