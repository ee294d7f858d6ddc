/**
 * `polar proxy --engine-stream`: with the default (auto) a streaming client is served from a streamed engine call
 * (Anthropic's message_start waits for, and carries, the real prompt count); with `never` it gets the synthetic replay
 * (message_start at once, input_tokens unknown: 0). A bad value is a usage error.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SimServer } from '../../src/sim/server.ts';
import { runPolarSync, startPolarProxy } from '../support/polar-cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'polar-proxy-stream-'));
let sim: SimServer;
beforeAll(async () => {
  sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0 });
});
afterAll(async () => {
  await sim.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function messageStart(extra: string[]): Promise<{ inputTokens: number; record: { prompt_ids: number[] } }> {
  const { proc, url } = await startPolarProxy(['--port', '0', '--engine', 'sim', '--engine-url', sim.url, '--db', join(dir, `${extra.join('-') || 'auto'}.db`), ...extra], dir);
  try {
    const res = await fetch(`${url}/v1/messages`, {
      method: 'POST', headers: { 'x-api-key': 'k', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const text = await res.text();
    const start = JSON.parse(text.split('\n').find((l) => l.includes('"message_start"'))!.slice(6)) as { message: { usage: { input_tokens: number } } };
    const listing = (await (await fetch(`${url}/sessions/k/completions`, { headers: { authorization: 'Bearer k' } })).json()) as { completions: { prompt_ids: number[] }[] };
    return { inputTokens: start.message.usage.input_tokens, record: listing.completions[0]! };
  } finally {
    proc.kill('SIGTERM');
    await proc.exited;
  }
}

test('auto streams from the engine (real input_tokens at message_start); never replays (0)', async () => {
  const auto = await messageStart([]);
  expect(auto.record.prompt_ids.length).toBeGreaterThan(0);
  expect(auto.inputTokens).toBe(auto.record.prompt_ids.length);
  const never = await messageStart(['--engine-stream', 'never']);
  expect(never.record.prompt_ids.length).toBe(auto.record.prompt_ids.length);
  expect(never.inputTokens).toBe(0);
});

test('--engine-stream takes auto, always or never', () => {
  const bad = runPolarSync(['proxy', '--port', '0', '--engine', 'sim', '--engine-url', sim.url, '--engine-stream', 'sometimes']);
  expect(bad.exitCode).not.toBe(0);
  expect(bad.stderr.toString()).toContain('--engine-stream');
});
