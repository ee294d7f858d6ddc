/**
 * `polar proxy` flags that change what a client or the engine sees, each checked against a proxy started without it:
 * --keepalive-ms (the keep-alive interval of synthetic streams), --abort-on-disconnect (a client that leaves aborts the
 * engine call: nothing is recorded), --keep-billing-header (Claude Code's billing line reaches the engine) and --family
 * (token mode's model family, reported on GET /). The engine is the fake engine behind a forwarder that can delay chat
 * completions, and the simulator for token mode.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { join } from 'node:path';
import { SimServer } from '../../src/sim/server.ts';
import { startEngineProxy, startFakeEngine, type EngineProxy, type FakeEngine } from '../support/fake-engine.ts';
import { startPolarProxy, useScratch } from '../support/polar-cli.ts';

const { dir, procs } = useScratch('polar-proxy-flags-stream-');
let engine: FakeEngine;
let slow: EngineProxy;
let delayMs = 0;
/** Started with --keepalive-ms 100 --abort-on-disconnect --keep-billing-header; `plain` with none of them. */
let flagged: string;
let plain: string;

beforeAll(async () => {
  engine = await startFakeEngine({ shape: 'vllm', script: [{ kind: 'text', text: 'late reply' }] });
  slow = startEngineProxy(engine.url, async (pathname) => {
    if (pathname === '/v1/chat/completions' && delayMs > 0) await Bun.sleep(delayMs);
  });
  const base = ['--port', '0', '--engine', 'vllm', '--engine-url', slow.url, '--engine-stream', 'never'];
  const a = await startPolarProxy([...base, '--db', join(dir, 'flagged.db'), '--keepalive-ms', '100', '--abort-on-disconnect', '--keep-billing-header'], dir);
  const b = await startPolarProxy([...base, '--db', join(dir, 'plain.db')], dir);
  procs.push(a.proc, b.proc);
  flagged = a.url;
  plain = b.url;
}, 60_000);
afterAll(async () => {
  slow.stop();
  await engine.stop();
});

const messages = (key: string, stream: boolean, init: RequestInit = {}, system?: unknown) => (url: string) =>
  fetch(`${url}/v1/messages`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ model: 'm', max_tokens: 20, stream, messages: [{ role: 'user', content: 'hello' }], ...(system !== undefined ? { system } : {}) }),
    ...init,
  });

async function completions(url: string, session: string): Promise<unknown[]> {
  // A session's own API key may read its records.
  const res = await fetch(`${url}/sessions/${session}/completions`, { headers: { 'x-api-key': session } });
  expect(res.status).toBe(200);
  return ((await res.json()) as { completions: unknown[] }).completions;
}

test('--keepalive-ms: a synthetic stream waiting on a slow engine gets keep-alive pings at that interval (none at the 5 s default)', async () => {
  delayMs = 700;
  try {
    const read = async (url: string, key: string) => (await messages(key, true)(url)).text();
    const [withFlag, without] = await Promise.all([read(flagged, 'keepalive-flagged'), read(plain, 'keepalive-plain')]);
    const pings = (text: string) => text.split('event: ping').length - 1;
    expect(withFlag).toContain('late reply');
    expect(without).toContain('late reply');
    expect(pings(withFlag)).toBeGreaterThanOrEqual(pings(without) + 3);
  } finally {
    delayMs = 0;
  }
}, 30_000);

test('--abort-on-disconnect: a client that leaves aborts the engine call and nothing is recorded (by default the call finishes and is recorded)', async () => {
  delayMs = 700;
  try {
    const leave = async (url: string) => {
      const abort = new AbortController();
      const pending = messages('leaver', true, { signal: abort.signal })(url).then((r) => r.text()).catch((e: unknown) => e);
      await Bun.sleep(200);
      abort.abort();
      await pending;
    };
    await Promise.all([leave(flagged), leave(plain)]);
    let kept: unknown[] = [];
    for (let i = 0; i < 300 && kept.length === 0; i++) {
      kept = await completions(plain, 'leaver');
      if (kept.length === 0) await Bun.sleep(10);
    }
    expect(kept).toHaveLength(1);
    await Bun.sleep(500);
    expect(await completions(flagged, 'leaver')).toHaveLength(0);
  } finally {
    delayMs = 0;
  }
}, 30_000);

test('--keep-billing-header: Claude Code\'s x-anthropic-billing-header system line reaches the engine (stripped by default)', async () => {
  const system = [{ type: 'text', text: 'x-anthropic-billing-header: cc_version=2.0.14; cc_entrypoint=cli' }, { type: 'text', text: 'You are Claude Code.' }];
  const sentSystem = async (url: string, key: string) => {
    const before = engine.chatRequests().length;
    const res = await messages(key, false, {}, system)(url);
    expect(res.status).toBe(200);
    const sent = engine.chatRequests().slice(before);
    expect(sent).toHaveLength(1);
    return JSON.stringify((sent[0]!.body.messages as unknown[])[0]);
  };
  const kept = await sentSystem(flagged, 'billing-kept');
  expect(kept).toContain('x-anthropic-billing-header: cc_version=2.0.14');
  expect(kept).toContain('You are Claude Code.');
  const stripped = await sentSystem(plain, 'billing-stripped');
  expect(stripped).not.toContain('x-anthropic-billing-header');
  expect(stripped).toContain('You are Claude Code.');
}, 30_000);

test('--family: token mode renders with the named model family instead of the one detected from the chat template', async () => {
  const sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0 });
  try {
    const base = ['--port', '0', '--engine', 'sim', '--engine-url', sim.url, '--mode', 'token', '--allow-golden-mismatch'];
    const named = await startPolarProxy([...base, '--db', join(dir, 'family.db'), '--family', 'qwen3.5'], dir);
    const detected = await startPolarProxy([...base, '--db', join(dir, 'detected.db')], dir);
    procs.push(named.proc, detected.proc);
    const familyOf = async (url: string) => ((await (await fetch(`${url}/`)).json()) as { engine_stats: { family: string } }).engine_stats.family;
    expect(await familyOf(detected.url)).toBe('qwen3');
    expect(await familyOf(named.url)).toBe('qwen3.5');
  } finally {
    await sim.stop();
  }
}, 60_000);
