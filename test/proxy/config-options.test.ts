/**
 * Every knob of the config's `proxy` section changes what a gateway node's proxy does: the section goes through
 * `resolveConfig` and `proxyOptionsFromConfig` (what `polar serve` and `polar gateway` do) into `createProxyApp`, in
 * front of the real simulator.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { resolveConfig } from '../../src/config/load.ts';
import { BILLING_HEADER_PREFIX } from '../../src/dialects/anthropic-messages/decode-request.ts';
import { proxyOptionsFromConfig } from '../../src/proxy/types.ts';
import { SimServer } from '../../src/sim/server.ts';
import { startTestProxy, type TestProxy } from '../support/proxy-harness.ts';

let sim: SimServer;
const proxies: TestProxy[] = [];

beforeAll(async () => {
  // 200 tok/s decode: a default answer takes long enough for several 20 ms keep-alives, and none at 5 s.
  sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 200, scripts: { t: { variants: { a: { weight: 1, steps: [{ say: 'word '.repeat(40) }] } } } } });
});
afterAll(async () => {
  for (const proxy of proxies) await proxy.stop();
  await sim.stop();
});

async function proxyWith(section: Record<string, unknown>): Promise<TestProxy> {
  const config = resolveConfig({ proxy: section }, { env: {} });
  const proxy = await startTestProxy({ engineUrl: sim.url, kind: 'sim', options: proxyOptionsFromConfig(config.proxy), timeoutMs: 30_000 });
  proxies.push(proxy);
  return proxy;
}

const messagesBody = (extra: Record<string, unknown> = {}) => ({ model: 'm', max_tokens: 200, messages: [{ role: 'user', content: 'hi' }], ...extra });

describe('proxy.max_body_bytes', () => {
  test('100 refuses a 2 KB body with 413 in the caller\'s shape; the default accepts it', async () => {
    const small = await proxyWith({ max_body_bytes: 100 });
    const body = JSON.stringify(messagesBody({ system: 'x'.repeat(2048) }));
    const anthropic = await fetch(`${small.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': 'k', 'content-type': 'application/json' }, body });
    expect(anthropic.status).toBe(413);
    expect(await anthropic.json()).toMatchObject({ type: 'error', error: { type: 'request_too_large', message: expect.stringContaining('limit of 100 bytes') } });
    const chat = await fetch(`${small.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer k' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(2048) }] }) });
    expect(chat.status).toBe(413);
    expect(((await chat.json()) as { error: { message: string } }).error.message).toContain('limit of 100 bytes');

    const roomy = await proxyWith({});
    const ok = await fetch(`${roomy.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': 'k', 'content-type': 'application/json' }, body });
    expect(ok.status).toBe(200);
  });

  test('above Bun.serve\'s own 128 MiB limit is a config error at its path', () => {
    expect(() => resolveConfig({ proxy: { max_body_bytes: 256 * 1024 * 1024 } }, { env: {} })).toThrow(/proxy\.max_body_bytes/);
  });
});

describe('proxy.keepalive_interval_ms', () => {
  async function pings(section: Record<string, unknown>): Promise<number> {
    const proxy = await proxyWith(section);
    const res = await fetch(`${proxy.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': 'k', 'content-type': 'application/json' }, body: JSON.stringify(messagesBody({ stream: true })) });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain('event: message_stop');
    return text.split('event: ping').length - 1;
  }

  test('20 ms sends keep-alives while the engine works; the default 5 s sends none for a short answer', async () => {
    expect(await pings({ keepalive_interval_ms: 20 })).toBeGreaterThanOrEqual(2);
    expect(await pings({})).toBe(0);
  });
});

describe('proxy.strip_billing_header', () => {
  async function recordedSystem(section: Record<string, unknown>): Promise<string> {
    const proxy = await proxyWith(section);
    const system = [{ type: 'text', text: `${BILLING_HEADER_PREFIX} cc_version=1; cch=abc;` }, { type: 'text', text: 'You are a coding agent.' }];
    const res = await fetch(`${proxy.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': 'billing', 'content-type': 'application/json' }, body: JSON.stringify(messagesBody({ system })) });
    expect(res.status).toBe(200);
    const [record] = proxy.store.completions.listBySession('billing');
    const first = record!.ir_request.messages[0]!;
    expect(first.role).toBe('system');
    return first.content.map((p) => (p.type === 'text' ? p.text : '')).join('|');
  }

  test('true (default) drops the billing line from the prompt; false keeps it', async () => {
    expect(await recordedSystem({})).not.toContain(BILLING_HEADER_PREFIX);
    expect(await recordedSystem({ strip_billing_header: false })).toContain(BILLING_HEADER_PREFIX);
  });
});
