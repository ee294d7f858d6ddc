/**
 * The engine's HTTP/1.1 client (src/engines/http1.ts) against raw TCP servers that answer exactly as written: framing
 * (content-length, chunked split into single bytes, close-delimited, 1xx first), keep-alive reuse, the keep-alive
 * race (a reused connection closed by the server gets the call again on a new one), failures (refused, closed
 * mid-answer, malformed), abort, backpressure on a large body, and the mapping through engineFetchJson.
 */
import { afterEach, expect, test } from 'bun:test';
import type { Socket, TCPSocketListener } from 'bun';
import { GatewayError } from '../../src/core/errors.ts';
import { engineFetchJson } from '../../src/engines/http.ts';
import { Http1Pool, http1PoolFor } from '../../src/engines/http1.ts';

interface Peer {
  received: Buffer;
  id: number;
}

let listeners: TCPSocketListener<Peer>[] = [];
afterEach(() => {
  for (const listener of listeners) listener.stop(true);
  listeners = [];
});

/**
 * A raw TCP server: `onRequest(socket, request, index)` is called once per complete request head + content-length
 * body received on a connection (index counts requests over all connections); `connections()` counts accepted ones.
 */
function rawServer(onRequest: (socket: Socket<Peer>, request: { head: string; body: Buffer }, index: number) => void) {
  let connections = 0;
  let requests = 0;
  const listener = Bun.listen<Peer>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(socket) {
        socket.data = { received: Buffer.alloc(0), id: ++connections };
      },
      data(socket, data) {
        socket.data.received = Buffer.concat([socket.data.received, data]);
        for (;;) {
          const buffered = socket.data.received;
          const end = buffered.indexOf('\r\n\r\n');
          if (end < 0) return;
          const head = buffered.toString('latin1', 0, end);
          const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
          if (buffered.byteLength < end + 4 + length) return;
          socket.data.received = buffered.subarray(end + 4 + length);
          onRequest(socket, { head, body: buffered.subarray(end + 4, end + 4 + length) }, requests++);
        }
      },
    },
  });
  listeners.push(listener);
  return { port: listener.port, connections: () => connections };
}

const json = (body: string, extra = '') => `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

test('content-length answers; the connection is kept and reused; request head and body arrive as sent', async () => {
  const heads: string[] = [];
  const server = rawServer((socket, request) => {
    heads.push(request.head);
    socket.write(json(JSON.stringify({ echo: request.body.toString() })));
  });
  const pool = new Http1Pool('127.0.0.1', server.port);
  for (let i = 0; i < 3; i++) {
    const answer = await pool.request({ method: 'POST', path: '/v1/chat/completions?x=1', headers: { 'content-type': 'application/json', authorization: 'Bearer k' }, body: Buffer.from(`{"i":${i}}`) });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe('application/json');
    expect(JSON.parse(Buffer.from(answer.body).toString())).toEqual({ echo: `{"i":${i}}` });
  }
  expect(server.connections()).toBe(1);
  expect(heads[0]).toStartWith('POST /v1/chat/completions?x=1 HTTP/1.1\r\n');
  expect(heads[0]).toContain(`host: 127.0.0.1:${server.port}`);
  expect(heads[0]).toContain('authorization: Bearer k');
  expect(heads[0]).toContain('content-length: 7');
  pool.close();
});

test('a chunked answer delivered one byte at a time, with chunk extensions and trailers, after a 100 Continue', async () => {
  const payload = JSON.stringify({ ids: Array.from({ length: 300 }, (_, i) => i) });
  const chunks = [payload.slice(0, 10), payload.slice(10, 500), payload.slice(500)];
  const wire =
    'HTTP/1.1 100 Continue\r\n\r\n' +
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nx-a: 1\r\nx-a: 2\r\n\r\n' +
    chunks.map((c, i) => `${c.length.toString(16)}${i === 1 ? ';ext=1' : ''}\r\n${c}\r\n`).join('') +
    '0\r\nx-trailer: t\r\n\r\n';
  const server = rawServer(async (socket) => {
    for (const byte of Buffer.from(wire)) {
      socket.write(Buffer.from([byte]));
      socket.flush();
      if (byte === 0x0a) await Bun.sleep(0);
    }
  });
  const pool = new Http1Pool('127.0.0.1', server.port);
  const answer = await pool.request({ method: 'GET', path: '/x', headers: {} });
  expect(answer.status).toBe(200);
  expect(answer.headers.get('x-a')).toBe('1, 2');
  expect(Buffer.from(answer.body).toString()).toBe(payload);
  // Kept alive after a chunked answer: the next call uses the same connection.
  const again = await pool.request({ method: 'GET', path: '/x', headers: {} });
  expect(Buffer.from(again.body).toString()).toBe(payload);
  expect(server.connections()).toBe(1);
  pool.close();
});

test('an answer framed by the connection closing, and connection: close, retire the connection', async () => {
  const server = rawServer((socket, _request, index) => {
    if (index === 0) socket.end('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{"until":"close"}');
    else socket.write(json('{"n":2}', 'connection: close\r\n'));
  });
  const pool = new Http1Pool('127.0.0.1', server.port);
  expect(Buffer.from((await pool.request({ method: 'GET', path: '/', headers: {} })).body).toString()).toBe('{"until":"close"}');
  expect(Buffer.from((await pool.request({ method: 'GET', path: '/', headers: {} })).body).toString()).toBe('{"n":2}');
  expect(Buffer.from((await pool.request({ method: 'GET', path: '/', headers: {} })).body).toString()).toBe('{"n":2}');
  expect(server.connections()).toBe(3);
});

test('the keep-alive race: a reused connection the server closes without answering gets the call again on a new one', async () => {
  const server = rawServer((socket, _request, index) => {
    // The second request arrives on the kept connection and is dropped, as a server closing it while idle would.
    if (index === 1) socket.terminate();
    else socket.write(json(`{"n":${index}}`));
  });
  const pool = new Http1Pool('127.0.0.1', server.port);
  expect(Buffer.from((await pool.request({ method: 'POST', path: '/', headers: {}, body: Buffer.from('a') })).body).toString()).toBe('{"n":0}');
  expect(Buffer.from((await pool.request({ method: 'POST', path: '/', headers: {}, body: Buffer.from('b') })).body).toString()).toBe('{"n":2}');
  expect(server.connections()).toBe(2);
  pool.close();
});

test('failures: closed mid-answer, a first connection closed without an answer (no retry), a malformed answer, refused', async () => {
  const partial = rawServer((socket) => socket.end('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"short":'));
  await expect(new Http1Pool('127.0.0.1', partial.port).request({ method: 'GET', path: '/', headers: {} })).rejects.toThrow(/closed the connection before its answer was complete/);
  const silent = rawServer((socket) => socket.terminate());
  await expect(new Http1Pool('127.0.0.1', silent.port).request({ method: 'GET', path: '/', headers: {} })).rejects.toThrow();
  expect(silent.connections()).toBe(1); // a new connection that fails is not retried
  const garbage = rawServer((socket) => socket.write('SSH-2.0-OpenSSH\r\n\r\n'));
  await expect(new Http1Pool('127.0.0.1', garbage.port).request({ method: 'GET', path: '/', headers: {} })).rejects.toThrow(/did not answer with HTTP\/1\.x/);
  const badChunk = rawServer((socket) => socket.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n'));
  await expect(new Http1Pool('127.0.0.1', badChunk.port).request({ method: 'GET', path: '/', headers: {} })).rejects.toThrow(/malformed chunk size/);
  const closed = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
  const port = closed.port;
  closed.stop(true);
  await expect(new Http1Pool('127.0.0.1', port).request({ method: 'GET', path: '/', headers: {} })).rejects.toThrow();
});

test('an abort ends the call with the signal reason and drops its connection', async () => {
  const server = rawServer((_socket, _request, index) => void index); // never answers
  const pool = new Http1Pool('127.0.0.1', server.port);
  const controller = new AbortController();
  const call = pool.request({ method: 'GET', path: '/', headers: {}, signal: controller.signal });
  await Bun.sleep(50);
  controller.abort(new Error('client left'));
  await expect(call).rejects.toThrow('client left');
  // Already aborted: refused before anything is sent.
  await expect(pool.request({ method: 'GET', path: '/', headers: {}, signal: controller.signal })).rejects.toThrow('client left');
  expect(server.connections()).toBe(1);
});

test('a header that cannot be sent is a TypeError, nothing is sent', async () => {
  const server = rawServer(() => {});
  const pool = new Http1Pool('127.0.0.1', server.port);
  await expect(pool.request({ method: 'GET', path: '/', headers: { authorization: 'Bearer a\r\nx-injected: 1' } })).rejects.toThrow(TypeError);
  await expect(pool.request({ method: 'GET', path: '/', headers: { 'bad name': 'v' } })).rejects.toThrow(TypeError);
  expect(server.connections()).toBe(0);
});

test('a 16 MiB body goes out whole through the socket backpressure', async () => {
  const body = Buffer.alloc(16 * 1024 * 1024);
  for (let i = 0; i < body.byteLength; i += 4096) body[i] = (i / 4096) % 251;
  const server = rawServer((socket, request) => {
    let sum = 0;
    for (let i = 0; i < request.body.byteLength; i += 4096) sum += request.body[i]!;
    socket.write(json(JSON.stringify({ length: request.body.byteLength, sum })));
  });
  let expected = 0;
  for (let i = 0; i < body.byteLength; i += 4096) expected += body[i]!;
  const answer = await new Http1Pool('127.0.0.1', server.port).request({ method: 'POST', path: '/', headers: {}, body });
  expect(JSON.parse(Buffer.from(answer.body).toString())).toEqual({ length: body.byteLength, sum: expected });
});

test('engineFetchJson over the client: a 503 with Retry-After maps to upstream, a refused engine to "unreachable", JSON parses', async () => {
  const server = rawServer((socket, request) => {
    if (request.head.startsWith('GET /busy')) socket.write('HTTP/1.1 503 Service Unavailable\r\nretry-after: 7\r\ncontent-length: 25\r\n\r\n{"error":"engine asleep"}');
    else socket.write(json('{"ok":true}'));
  });
  const base = `http://127.0.0.1:${server.port}`;
  expect(await engineFetchJson(`${base}/fine`, { method: 'POST', body: { a: 1 } }, { timeoutMs: 5000 }, 'engine e')).toEqual({ ok: true });
  const busy = await engineFetchJson(`${base}/busy`, { method: 'GET' }, { timeoutMs: 5000 }, 'engine e').catch((e: unknown) => e);
  expect(busy).toBeInstanceOf(GatewayError);
  expect((busy as GatewayError).kind).toBe('upstream');
  expect((busy as GatewayError).message).toContain('engine asleep');
  expect((busy as GatewayError).details.upstream?.retryAfter).toBe('7');
  const refused = await engineFetchJson('http://127.0.0.1:9/v1/models', { method: 'GET' }, { timeoutMs: 5000 }, 'engine e').catch((e: unknown) => e);
  expect((refused as GatewayError).kind).toBe('upstream');
  expect((refused as GatewayError).message).toContain('engine e unreachable at http://127.0.0.1:9/v1/models');
  const timedOut = await engineFetchJson(`${base}/fine`, { method: 'GET' }, { timeoutMs: 1 }, 'engine e').catch((e: unknown) => e);
  // 1 ms may or may not be enough for a loopback answer; when it is not, the error is the timeout one.
  if (timedOut instanceof GatewayError) expect(timedOut.kind).toBe('timeout');
  else expect(timedOut).toEqual({ ok: true });
});

test('an answer that arrives before the request body is sent: the body still goes out whole and the next call is not lost', async () => {
  // A server that answers POST /big as soon as it has its head (as a proxy rejecting a call early does), keeps the
  // connection and reads the rest of the body before the next request; it answers any other call after its body.
  let connections = 0;
  const heads: string[] = [];
  const listener = Bun.listen<{ buffered: Buffer; skip: number; answer: string | null }>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(socket) {
        connections++;
        socket.data = { buffered: Buffer.alloc(0), skip: 0, answer: null };
      },
      data(socket, data) {
        let bytes = Buffer.concat([socket.data.buffered, data]);
        for (;;) {
          if (socket.data.skip > 0) {
            const n = Math.min(socket.data.skip, bytes.byteLength);
            socket.data.skip -= n;
            bytes = bytes.subarray(n);
            if (socket.data.skip > 0) break;
          }
          if (socket.data.answer !== null) socket.write(json(socket.data.answer));
          socket.data.answer = null;
          const end = bytes.indexOf('\r\n\r\n');
          if (end < 0) break;
          const head = bytes.toString('latin1', 0, end);
          heads.push(head);
          socket.data.skip = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
          bytes = bytes.subarray(end + 4);
          if (head.startsWith('POST /big')) socket.write(json(`{"n":${heads.length}}`));
          else if (socket.data.skip === 0) socket.write(json(`{"n":${heads.length}}`));
          else socket.data.answer = `{"n":${heads.length}}`;
        }
        socket.data.buffered = Buffer.from(bytes);
      },
    },
  });
  listeners.push(listener as unknown as TCPSocketListener<Peer>);
  const pool = new Http1Pool('127.0.0.1', listener.port);
  const signal = AbortSignal.timeout(5_000);
  const first = await pool.request({ method: 'POST', path: '/big', headers: {}, body: Buffer.alloc(16 * 1024 * 1024), signal });
  expect(Buffer.from(first.body).toString()).toBe('{"n":1}');
  // A body over the one-write size (16 KiB): head and body go out in two writes.
  const second = await pool.request({ method: 'POST', path: '/next', headers: {}, body: Buffer.alloc(64 * 1024, 97), signal });
  expect(Buffer.from(second.body).toString()).toBe('{"n":2}');
  expect(heads[1]).toStartWith('POST /next HTTP/1.1');
  pool.close();
  expect(connections).toBe(2); // the first connection, its body still going out, was not reused
});

test('an engine URL with an IPv6 host and a path prefix: the pool connects to the bare address, the target keeps the prefix', async () => {
  let listener: TCPSocketListener<Peer>;
  try {
    listener = Bun.listen<Peer>({ hostname: '::1', port: 0, socket: { data() {} } });
  } catch {
    return; // no IPv6 loopback on this machine
  }
  listener.stop(true);
  const heads: string[] = [];
  const server = Bun.listen<Peer>({
    hostname: '::1',
    port: 0,
    socket: {
      open(socket) {
        socket.data = { received: Buffer.alloc(0), id: 0 };
      },
      data(socket, data) {
        socket.data.received = Buffer.concat([socket.data.received, data]);
        const end = socket.data.received.indexOf('\r\n\r\n');
        if (end < 0) return;
        heads.push(socket.data.received.toString('latin1', 0, end));
        socket.data.received = Buffer.alloc(0);
        socket.write(json('{"ok":true}'));
      },
    },
  });
  listeners.push(server);
  const url = `http://[::1]:${server.port}/serving/qwen/v1/models?x=1`;
  expect(http1PoolFor(new URL(url))).not.toBeNull();
  expect(await engineFetchJson(url, { method: 'GET' }, { timeoutMs: 5000 }, 'engine e')).toEqual({ ok: true });
  expect(heads[0]).toStartWith('GET /serving/qwen/v1/models?x=1 HTTP/1.1\r\n');
  expect(heads[0]).toContain(`host: [::1]:${server.port}`);
});

test('an abort that lands between a keep-alive race and its retry ends the call instead of leaving it pending', async () => {
  const server = rawServer((socket, _request, index) => {
    if (index === 1) socket.terminate(); // the kept connection, closed as a server closing it while idle would
    else socket.write(json(`{"n":${index}}`));
  });
  const pool = new Http1Pool('127.0.0.1', server.port);
  await pool.request({ method: 'GET', path: '/', headers: {} });
  const controller = new AbortController();
  // The caller's abort arrives after the first attempt failed and before the retry connects (as an AbortSignal.any
  // of the call's timeout and the client's disconnect can): the retry must see it.
  const internals = pool as unknown as { exchange(...args: unknown[]): Promise<unknown> };
  const exchange = internals.exchange.bind(pool);
  internals.exchange = (...args: unknown[]) =>
    exchange(...args).catch((thrown: unknown) => {
      controller.abort(new Error('client left'));
      throw thrown;
    });
  const call = pool.request({ method: 'GET', path: '/', headers: {}, signal: controller.signal });
  const outcome = await Promise.race([call.then(() => 'answered', (e: unknown) => (e instanceof Error ? e.message : String(e))), Bun.sleep(2000).then(() => 'still pending')]);
  expect(outcome).toBe('client left');
  pool.close();
});

test('a connection whose close already ran when its call starts fails the call at once instead of leaving it pending', async () => {
  const server = rawServer((socket) => socket.write(json('{"ok":true}')));
  const pool = new Http1Pool('127.0.0.1', server.port);
  // The close event of a new connection landing between its open and the exchange, forced.
  const connect = (pool as unknown as { connect(): Promise<{ closed: boolean }> }).connect.bind(pool);
  (pool as unknown as { connect(): Promise<{ closed: boolean }> }).connect = async () => {
    const connection = await connect();
    connection.closed = true;
    return connection;
  };
  const outcome = await Promise.race([pool.request({ method: 'GET', path: '/', headers: {} }).then(() => 'answered', (e: Error) => e.message), Bun.sleep(2000).then(() => 'pending')]);
  expect(outcome).toBe('the engine closed the connection before the call was sent');
});

/** One chunk of a chunked body (RFC 9112 §7.1): its size in hex, CRLF, the data, CRLF. */
const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;

/** All of a stream's bytes as text. */
async function readAll(body: ReadableStream<Uint8Array>): Promise<string> {
  return Buffer.from(await new Response(body).arrayBuffer()).toString();
}

test('requestStream resolves at the head and streams a chunked body as it arrives; the connection is kept after it', async () => {
  let release!: () => void;
  const later = new Promise<void>((resolve) => (release = resolve));
  const server = rawServer(async (socket, _request, index) => {
    if (index > 0) {
      socket.write(json('{"again":true}'));
      return;
    }
    // Head and first event in one write, the rest only once the client has read the first event.
    socket.write(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n${chunk('data: {"n":1}\n\n')}`);
    await later;
    socket.write(`${chunk('data: {"n":2}\n\n')}0\r\n\r\n`);
  });
  const pool = new Http1Pool('127.0.0.1', server.port);
  const answer = await pool.requestStream({ method: 'POST', path: '/v1/chat/completions', headers: {}, body: Buffer.from('{}') });
  expect(answer.status).toBe(200);
  expect(answer.headers.get('content-type')).toBe('text/event-stream');
  const reader = answer.body.getReader();
  expect(Buffer.from((await reader.read()).value!).toString()).toBe('data: {"n":1}\n\n');
  release();
  expect(Buffer.from((await reader.read()).value!).toString()).toBe('data: {"n":2}\n\n');
  expect((await reader.read()).done).toBe(true);
  expect(Buffer.from((await pool.request({ method: 'GET', path: '/', headers: {} })).body).toString()).toBe('{"again":true}');
  expect(server.connections()).toBe(1);
  pool.close();
});

test('requestStream: a connection lost mid-body and an abort mid-body error the stream; a cancelled stream drops its connection', async () => {
  const server = rawServer((socket, request) => {
    const head = 'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n6\r\ndata: \r\n';
    if (request.head.startsWith('POST /lost')) socket.end(head);
    else socket.write(head); // then nothing more: the stream stays open
  });
  const pool = new Http1Pool('127.0.0.1', server.port);
  const lost = await pool.requestStream({ method: 'POST', path: '/lost', headers: {} });
  await expect(readAll(lost.body)).rejects.toThrow(/closed the connection before its answer was complete/);
  const controller = new AbortController();
  const aborted = await pool.requestStream({ method: 'POST', path: '/open', headers: {}, signal: controller.signal });
  const reading = readAll(aborted.body);
  controller.abort(new Error('engine timeout'));
  await expect(reading).rejects.toThrow('engine timeout');
  const cancelled = await pool.requestStream({ method: 'POST', path: '/open', headers: {} });
  await cancelled.body.cancel();
  // Each of the three took its own connection: none went back to the pool mid-body.
  expect(server.connections()).toBe(3);
});

test('engineFetchStream over the client: the SSE body reads through sseData, an engine 4xx before the stream is an invalid-request error', async () => {
  const { engineFetchStream } = await import('../../src/engines/http.ts');
  const { sseData } = await import('../../src/engines/sse.ts');
  const server = rawServer((socket, request) => {
    if (request.head.startsWith('POST /bad')) socket.write('HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 28\r\n\r\n{"error":{"message":"nope"}}');
    else socket.write(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n${chunk('data: {"a":1}\n\ndata: [DONE]\n\n')}0\r\n\r\n`);
  });
  const base = `http://127.0.0.1:${server.port}`;
  const { response } = await engineFetchStream(`${base}/ok`, { stream: true }, { timeoutMs: 5000 }, 'engine e');
  const events: string[] = [];
  for await (const data of sseData(response.body!, 'engine e')) events.push(Buffer.from(data).toString());
  expect(events).toEqual(['{"a":1}']);
  const bad = await engineFetchStream(`${base}/bad`, { stream: true }, { timeoutMs: 5000 }, 'engine e').catch((e: unknown) => e);
  expect((bad as GatewayError).kind).toBe('invalid-request');
  expect((bad as GatewayError).message).toBe('nope');
});
