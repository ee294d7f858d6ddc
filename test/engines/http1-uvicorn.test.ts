/**
 * The engine's HTTP/1.1 client (src/engines/http1.ts, through engineFetchJson) against a REAL uvicorn, the HTTP
 * server vLLM and SGLang answer with (test/support/uvicorn_engine.py): with uvicorn's h11 parser and, when installed,
 * httptools (the one vLLM's `uvicorn[standard]` picks). Covers what raw-TCP tests cannot vouch for: h11's reading of
 * our request heads, 100 KB bodies sequential and 64 at once, uvicorn's keep-alive timeout closing idle connections
 * (the race must be absorbed by the retry, never surface), error answers with Retry-After, multi-MB answers framed by
 * content-length and chunked, an engine restarted on the same port, and an engine killed mid-answer.
 * Skipped (with the reason in the test name) when no python3 imports uvicorn; .ci/run installs python3-uvicorn and
 * python3-httptools from Debian.
 */
import { afterAll, expect, test } from 'bun:test';
import { GatewayError } from '../../src/core/errors.ts';
import { engineFetchJson } from '../../src/engines/http.ts';
import { Http1Pool } from '../../src/engines/http1.ts';
import { pythonWithUvicorn, startUvicornEngine, type UvicornEngine } from '../support/uvicorn-engine.ts';

const PYTHON = pythonWithUvicorn();
const WITH_HTTPTOOLS = pythonWithUvicorn(true);
const engines: UvicornEngine[] = [];
afterAll(async () => {
  for (const engine of engines) await engine.stop();
});

const skipped = (parser: string, python: string | null) =>
  python === null ? ` (skipped: no python3 imports uvicorn${parser === 'httptools' ? ' and httptools' : ''}; Debian: python3-uvicorn${parser === 'httptools' ? ' python3-httptools' : ''})` : '';
const decode = (bytes: Uint8Array) => JSON.parse(Buffer.from(bytes).toString()) as Record<string, unknown>;
/** A chat request of about 100 KB (the engine answers ~25k prompt_token_ids for it). */
const BIG = Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'a'.repeat(100_000) }] }));

for (const [parser, python] of [['h11', PYTHON], ['httptools', WITH_HTTPTOOLS]] as const) {
  const start = async (port = 0) => {
    const engine = await startUvicornEngine(python!, { http: parser, keepAliveS: 1, port });
    engines.push(engine);
    return engine;
  };

  test.skipIf(python === null)(`uvicorn ${parser}: request heads as uvicorn reads them; 100 KB bodies sequential and 64 at once; vLLM-shaped answers; errors with Retry-After; multi-MB answers${skipped(parser, python)}`, async () => {
    const engine = await start();
    const pool = new Http1Pool('127.0.0.1', engine.port);
    const head = decode((await pool.request({ method: 'GET', path: '/head?a=1&b=%20', headers: { 'Content-Type': 'application/json', Authorization: 'Bearer k' } })).body);
    expect(head.http_version).toBe('1.1');
    expect(head.query).toBe('a=1&b=%20');
    expect(head.headers).toEqual([['host', `127.0.0.1:${engine.port}`], ['content-type', 'application/json'], ['authorization', 'Bearer k']]);

    const ids = Math.floor(BIG.byteLength / 4);
    for (let i = 0; i < 10; i++) {
      const answer = (await engineFetchJson(`${engine.url}/v1/chat/completions`, { method: 'POST', bodyBytes: BIG }, { timeoutMs: 30_000 }, 'engine')) as Record<string, unknown>;
      expect(answer.echo_bytes).toBe(BIG.byteLength);
      expect((answer.prompt_token_ids as number[]).length).toBe(ids);
    }
    const all = await Promise.all(Array.from({ length: 64 }, () => pool.request({ method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, body: BIG })));
    for (const answer of all) {
      expect(answer.status).toBe(200);
      expect((decode(answer.body).prompt_token_ids as number[]).length).toBe(ids);
    }

    for (const status of [400, 404, 500, 503]) {
      const error = await engineFetchJson(`${engine.url}/error/${status}`, { method: 'GET' }, { timeoutMs: 10_000 }, 'engine e').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(GatewayError);
      expect((error as GatewayError).kind).toBe(status === 400 ? 'invalid-request' : 'upstream');
      expect((error as GatewayError).message).toContain(`engine answered ${status}`);
      expect((error as GatewayError).details.upstream?.retryAfter).toBe(status === 503 ? '7' : undefined);
    }
    // A 404 for a POST whose body uvicorn never hands to a route leaves the connection usable.
    expect((await pool.request({ method: 'POST', path: '/no/such/route', headers: {}, body: BIG })).status).toBe(404);
    expect((await pool.request({ method: 'GET', path: '/v1/models', headers: {} })).status).toBe(200);

    const long = await pool.request({ method: 'POST', path: '/v1/chat/completions', headers: {}, body: Buffer.from('{"answer_bytes":6000000}') });
    expect(((decode(long.body).choices as { message: { content: string } }[])[0]!.message.content).length).toBe(6_000_000);
    const chunked = await Promise.all(Array.from({ length: 4 }, () => pool.request({ method: 'GET', path: '/chunked?mb=6', headers: {} })));
    for (const answer of chunked) expect((decode(answer.body).ids as number[]).length).toBe(3 * 1024 * 1024 + 1);
    pool.close();
  }, 60_000);

  test.skipIf(python === null)(`uvicorn ${parser}: idle past --timeout-keep-alive, calls at the moment it closes, a restart on the same port: every call succeeds${skipped(parser, python)}`, async () => {
    let engine = await start();
    const pool = new Http1Pool('127.0.0.1', engine.port);
    const call = () => pool.request({ method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, body: BIG });
    await Promise.all(Array.from({ length: 8 }, call));
    await Bun.sleep(1300); // uvicorn closed all 8 (keep-alive 1 s)
    for (const answer of await Promise.all(Array.from({ length: 8 }, call))) expect(answer.status).toBe(200);
    // Calls sent as uvicorn's keep-alive timer fires: some meet a connection closing under them (the retry's case).
    for (const delay of [985, 995, 1000, 1005, 1015]) {
      await Promise.all(Array.from({ length: 4 }, call));
      await Bun.sleep(delay);
      for (const answer of await Promise.all(Array.from({ length: 4 }, call))) expect(answer.status).toBe(200);
    }
    // The race itself, made certain: the event loop is blocked while uvicorn closes the idle connections, so the
    // pool has not seen their FIN when the calls go out on them; each must fail and be sent again on a new one.
    await Promise.all(Array.from({ length: 4 }, call));
    Bun.sleepSync(1300);
    for (const answer of await Promise.all(Array.from({ length: 4 }, call))) expect(answer.status).toBe(200);
    // Restart: the idle connections die with the old process; the next call opens a new one.
    const port = engine.port;
    await engine.stop();
    engine = await start(port);
    expect((await call()).status).toBe(200);
    pool.close();
  }, 60_000);

  test.skipIf(python === null)(`uvicorn ${parser}: an engine killed mid-answer fails the call with a clear error; the restarted engine then answers${skipped(parser, python)}`, async () => {
    let engine = await start();
    const url = engine.url;
    const died = await engineFetchJson(`${url}/die-mid-answer`, { method: 'GET' }, { timeoutMs: 10_000 }, 'engine e').catch((e: unknown) => e);
    expect(died).toBeInstanceOf(GatewayError);
    expect((died as GatewayError).kind).toBe('upstream');
    expect((died as GatewayError).message).toMatch(/engine e unreachable at .*: the engine closed the connection before its answer was complete \(\d+ bytes received\)/);
    await engine.process.exited;
    engine = await start(engine.port);
    expect(await engineFetchJson(`${url}/v1/models`, { method: 'GET' }, { timeoutMs: 10_000 }, 'engine e')).toMatchObject({ data: [{ id: 'm', max_model_len: 32768 }] });
  }, 60_000);
}
