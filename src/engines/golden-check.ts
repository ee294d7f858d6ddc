/**
 * Token mode's golden check: our full rendering of a conversation compared with the engine's own (vLLM and the
 * simulator `POST /tokenize` with messages, ids compared; llama.cpp `POST /apply-template`, text compared; SGLang its
 * `/tokenize` when the build has one), at start-up and on a deterministic sample of turns. A mismatch is logged and
 * counted; at start-up the token engine refuses to serve on one (token-engine.ts `GoldenMismatchError`). https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html#tokenizer-api,
 * https://github.com/ggml-org/llama.cpp/tree/master/tools/server
 */
import { GatewayError } from '../core/errors.ts';
import type { ChatMessage, ChatTool } from '../tokenization/chat-messages.ts';
import type { ModelFamily } from '../tokenization/families.ts';
import type { RenderSettings } from '../tokenization/token-buffer.ts';
import type { LoadedTokenizer } from '../tokenization/tokenizer.ts';
import { engineFetchJson } from './http.ts';
import type { EngineKind } from './types.ts';

/** Golden-check counters. */
export interface GoldenStats {
  checks: number;
  mismatches: number;
  /** The engine has no endpoint to render with (reported once at start-up, counted per skipped check). */
  unavailable: number;
  /** Checks that failed to run (engine error). */
  errors: number;
  /** The last mismatch, for the operator: where the two renderings diverge. */
  lastMismatch: string | null;
}

export /** A fixed conversation for the start-up golden check: system, tools, reasoning, a tool call, a tool result, a reply. */
const GOLDEN_CONVERSATION: { messages: ChatMessage[]; tools: ChatTool[] } = {
  tools: [{ type: 'function', function: { name: 'bash', description: 'Run a shell command', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } } }],
  messages: [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'List the files, then say how many there are. ✓ ünïcode' },
    { role: 'assistant', content: '', reasoning_content: 'I should run ls.', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'bash', arguments: '{"command":"ls -1"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: 'a.py\nb.py' },
    { role: 'assistant', content: 'There are 2 files.' },
    { role: 'user', content: 'Thanks.' },
  ],
};

/** The golden conversation for a family without a tool-call format (its template rejects tool turns, e.g. Gemma 3). */
export const GOLDEN_TEXT_ONLY: { messages: ChatMessage[]; tools: ChatTool[] } = {
  tools: [],
  messages: [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'How many files are there? ✓ ünïcode' },
    { role: 'assistant', content: 'There are 2 files.' },
    { role: 'user', content: 'Thanks.' },
  ],
};

export interface GoldenCheckerDeps {
  url: string;
  id: string;
  kind: EngineKind;
  timeoutMs: number;
  /** Fraction of turns checked, in [0, 1]. */
  rate: number;
  headers(extra: Record<string, string>): Record<string, string>;
  log(message: string): void;
}

export class GoldenChecker {
  private credit = 0;
  private endpoint: 'tokenize' | 'apply-template' | null = null;
  private readonly counters: GoldenStats = { checks: 0, mismatches: 0, unavailable: 0, errors: 0, lastMismatch: null };

  /** @throws Error when `rate` is outside [0, 1]. */
  constructor(private readonly deps: GoldenCheckerDeps) {
    if (!(deps.rate >= 0 && deps.rate <= 1)) throw new Error(`goldenRate must be in [0, 1], got ${deps.rate}`);
  }

  stats(): GoldenStats {
    return { ...this.counters };
  }

  /** Whether this turn is one of the sampled ones (deterministic: every 1/rate-th turn). */
  takeSample(): boolean {
    if (this.deps.rate <= 0) return false;
    this.credit += this.deps.rate;
    if (this.credit < 1 - 1e-9) return false;
    this.credit -= 1;
    return true;
  }

  /**
   * Compare our full rendering of a conversation with the engine's own: vLLM and the simulator `POST /tokenize` with
   * messages (ids compared), llama.cpp `POST /apply-template` (text compared), SGLang its `/tokenize` when the build
   * has one. Never throws: a mismatch is logged and counted, an engine without such an endpoint is reported once.
   */
  async check(tokenizer: LoadedTokenizer, family: ModelFamily, served: string | undefined, messages: ChatMessage[], settings: RenderSettings, startup: boolean): Promise<void> {
    if (!startup && this.endpoint === null) {
      this.counters.unavailable++;
      return;
    }
    const renderOptions = { tools: settings.tools, enableThinking: settings.enableThinking, addGenerationPrompt: true, family };
    let oursText: string;
    try {
      oursText = tokenizer.renderChat(messages, renderOptions);
    } catch (thrown) {
      this.counters.errors++;
      this.deps.log(`polar token mode: golden check failed to run: our ${family.name} chat template rejected the conversation: ${thrown instanceof Error ? thrown.message : String(thrown)}`);
      return;
    }
    const http = { timeoutMs: this.deps.timeoutMs, headers: this.deps.headers({ 'x-polar-session': 'polar-golden' }) };
    // The thinking switch under the family's own template kwarg (Qwen3 enable_thinking, DeepSeek-V3.1 thinking).
    const kwargs = settings.enableThinking !== undefined && family.thinkingKwarg ? { chat_template_kwargs: { [family.thinkingKwarg]: settings.enableThinking } } : {};
    const tools = settings.tools.length > 0 ? { tools: settings.tools } : {};
    const endpoints: ('tokenize' | 'apply-template')[] = this.endpoint ? [this.endpoint] : this.deps.kind === 'llamacpp' ? ['apply-template'] : ['tokenize'];
    for (const endpoint of endpoints) {
      let answer: unknown;
      try {
        const body = endpoint === 'tokenize'
          ? { model: served, messages, add_generation_prompt: true, ...tools, ...kwargs }
          : { messages, add_generation_prompt: true, ...tools, ...kwargs };
        answer = await engineFetchJson(`${this.deps.url}/${endpoint}`, { method: 'POST', body }, http, `engine ${this.deps.id} /${endpoint}`);
      } catch (thrown) {
        const error = thrown instanceof GatewayError ? thrown : null;
        if (startup && error && (error.kind === 'invalid-request' || error.details.upstream?.status === 404)) {
          this.counters.unavailable++;
          this.deps.log(`polar token mode: golden check unavailable: engine ${this.deps.id} has no usable /${endpoint} (${error.message.slice(0, 200)})`);
          return;
        }
        this.counters.errors++;
        this.deps.log(`polar token mode: golden check failed to run: ${thrown instanceof Error ? thrown.message : String(thrown)}`);
        return;
      }
      this.endpoint = endpoint;
      this.counters.checks++;
      const a = answer as { tokens?: unknown; prompt?: unknown };
      let mismatch: string | null = null;
      if (endpoint === 'tokenize') {
        if (!Array.isArray(a.tokens)) mismatch = '/tokenize answered without tokens';
        else {
          const ours = tokenizer.encode(oursText);
          const theirs = a.tokens as number[];
          const at = firstDifference(ours, theirs);
          if (at >= 0) mismatch = `token ${at} of ${ours.length}/${theirs.length}: ours ${JSON.stringify(tokenizer.decode(ours.slice(at, at + 8)))}, engine ${JSON.stringify(tokenizer.decode(theirs.slice(at, at + 8)))}`;
        }
      } else if (typeof a.prompt !== 'string') mismatch = '/apply-template answered without prompt';
      else if (a.prompt !== oursText) {
        const at = firstDifference([...oursText], [...a.prompt]);
        mismatch = `character ${at}: ours ${JSON.stringify(oursText.slice(at, at + 40))}, engine ${JSON.stringify(a.prompt.slice(at, at + 40))}`;
      }
      if (mismatch !== null) {
        this.counters.mismatches++;
        this.counters.lastMismatch = mismatch;
        this.deps.log(`polar token mode: golden check MISMATCH (${startup ? 'start-up' : 'sampled turn'}): our chat template rendering differs from engine ${this.deps.id}'s at ${mismatch}`);
      }
      return;
    }
  }
}

/** Index of the first differing element, or -1 when equal. */
function firstDifference<T>(a: readonly T[], b: readonly T[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}
