/**
 * The messages in exports are the messages the engine saw: for every recorded harness request (Claude Code, Codex,
 * Gemini CLI, Qwen Code, OpenCode, pi on four APIs, Cline, Continue, Kilo Code, OpenClaw), decoded by its dialect,
 * the engine's chat-mode request body (engines/chat-request.ts) and `polar export --format messages`
 * (rollout/export.ts `acceptedMessages`, one record in a real store) carry byte-identical messages and tools. Claude
 * Code's first user turn has four text blocks: an encoder that joins them differently from the engine's fails here.
 */
import { expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fixedClock } from '../../src/core/clock.ts';
import { sequentialIds } from '../../src/core/ids.ts';
import type { IRRequest } from '../../src/core/ir.ts';
import { buildChatRequest, DEFAULT_SAMPLING } from '../../src/engines/chat-request.ts';
import { defaultDialectRoutes } from '../../src/proxy/dialect-table.ts';
import { acceptedMessages } from '../../src/rollout/export.ts';
import { openStore } from '../../src/store/index.ts';
import { HARNESS_TRAFFIC } from '../support/harness-traffic.ts';
import { chatCompletionRecord } from '../support/records.ts';
import { useTempStores } from '../support/temp-stores.ts';

const temp = useTempStores('polar-export-engine-');

interface Recorded { name: string; url: string; body: unknown }

function recordedRequests(): Recorded[] {
  const out: Recorded[] = [];
  for (const harness of readdirSync(HARNESS_TRAFFIC).sort()) {
    for (const run of readdirSync(join(HARNESS_TRAFFIC, harness)).sort()) {
      for (const file of readdirSync(join(HARNESS_TRAFFIC, harness, run)).filter((f) => f.endsWith('-request.json')).sort()) {
        const raw = JSON.parse(readFileSync(join(HARNESS_TRAFFIC, harness, run, file), 'utf8')) as { url: string; body: unknown };
        out.push({ name: `${harness}/${run}/${file}`, url: raw.url, body: raw.body });
      }
    }
  }
  return out;
}

function decode(recorded: Recorded): IRRequest {
  const url = new URL(recorded.url, 'http://127.0.0.1');
  const path = url.pathname;
  const route = defaultDialectRoutes().find((r) =>
    r.prefixes.some((prefix) => path === prefix || path.startsWith(`${prefix}/`)) && (r.fromUrl === undefined || r.fromUrl(url).model !== undefined));
  if (!route) throw new Error(`${recorded.name}: no dialect serves ${path}`);
  const fromUrl = route.fromUrl?.(url);
  return route.dialect.decodeRequest(recorded.body, { now: fixedClock(0), newId: sequentialIds(), pathModel: fromUrl?.model, pathStream: fromUrl?.stream });
}

const requests = recordedRequests();

test('every harness in the recorded traffic is covered', () => {
  const harnesses = new Set(requests.map((r) => r.name.split('/')[0]));
  expect([...harnesses].sort()).toEqual(['claude-code', 'cline', 'codex', 'continue', 'gemini-cli', 'kilo', 'openclaw', 'opencode', 'pi', 'qwen-code']);
  // The case that drifted: Claude Code's first user turn is several text blocks.
  const claude = decode(requests.find((r) => r.name.startsWith('claude-code/'))!);
  expect(claude.messages.find((m) => m.role === 'user')!.content.filter((p) => p.type === 'text').length).toBeGreaterThan(1);
});

for (const recorded of requests) {
  test(`${recorded.name}: exported messages and tools equal the engine request's, byte for byte`, () => {
    const ir = decode(recorded);
    const { body } = buildChatRequest(ir, { servedModel: 'm', defaults: DEFAULT_SAMPLING, reasoningField: 'reasoning_content' });
    const store = openStore(join(temp.tempDir(), 'polar.db'));
    temp.stores.push(store);
    store.completions.insert(chatCompletionRecord({
      completion_id: 'c0', session_id: 's0', seq: 0, engine_id: 'test', prompt_ids: [1], response_ids: [2], logprobs: [-0.5], ir_request: ir,
      ir_response: {
        id: 'r', model: 'm', content: [{ type: 'text', text: 'done' }], toolCalls: [], finishReason: { unified: 'stop', raw: 'stop' },
        usage: { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, reasoningTokens: 0 }, warnings: [], createdAt: 0,
      },
    }));
    const [row] = acceptedMessages(store, { includeUnevaluated: true });
    expect(row).toBeDefined();
    const exported = row!.messages.slice(0, -1);
    expect(JSON.stringify(exported)).toBe(JSON.stringify(body.messages));
    expect(JSON.stringify(row!.tools)).toBe(JSON.stringify(body.tools ?? []));
  });
}
