/**
 * The engine's JSON calls over HTTP/1.1 on Bun's own TCP sockets (`Bun.connect`), with keep-alive connections kept
 * per origin. Used by http.ts for plain `http://` engines when no HTTP proxy is configured; `fetch` serves the rest
 * (TLS, proxies, streamed answers).
 *
 * Why not `fetch`: Bun's `fetch` hands every call to its HTTP client thread and back, and copies a request body from
 * ~16 KB up into a fresh 514 KB block. On the proxy's hot path (one engine call per proxied call) that was a large
 * share of a call: a 100 KB POST to a local engine took 208–310 µs with `fetch` against 132–143 µs here, and a
 * small one 82–128 µs against 52–59 µs, at 15–47 % less CPU (bench/README.md#session-17). undici, the maintained
 * HTTP/1.1 client, runs under Bun but cost twice `fetch`'s CPU in the same test, so no library does this job well
 * here; the client below is the part of HTTP/1.1 an engine call needs and nothing more.
 *
 * What it speaks (RFC 9112): one request at a time per connection (no pipelining), a `content-length` body, a response
 * framed by `content-length`, `transfer-encoding: chunked` or the connection's close; informational 1xx responses are
 * skipped; `connection: close` (or HTTP/1.0 without keep-alive) retires the connection. A call on a reused
 * connection that the server had closed while idle (the keep-alive race: uvicorn closes idle connections after 5 s)
 * fails before any byte of the answer; it is sent again once on a new connection.
 * Source: https://www.rfc-editor.org/rfc/rfc9112, https://bun.com/docs/api/tcp.
 */
import type { Socket } from 'bun';

/** One answer: the status, the header fields (names lowercased; repeated fields joined with ", ") and the body bytes. */
export interface Http1Response {
  status: number;
  headers: Map<string, string>;
  body: Uint8Array;
}

/** A streamed answer: the status and header fields as soon as they arrive, the body as it arrives. */
export interface Http1StreamResponse {
  status: number;
  headers: Map<string, string>;
  /** The body's bytes as they arrive; errors when the connection fails or the call is aborted mid-body. */
  body: ReadableStream<Uint8Array>;
}

/** One request. `path` is the target's path and query (starts with "/"); `body` is sent with its `content-length`. */
export interface Http1Request {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: Uint8Array;
  signal?: AbortSignal;
}

/** Idle connections kept per origin at most; more are closed when their call ends. */
const MAX_IDLE = 256;
/** The largest response head accepted (status line + header fields), bytes. */
const MAX_HEAD_BYTES = 64 * 1024;
const CRLF_CRLF = Buffer.from('\r\n\r\n');
const CRLF = Buffer.from('\r\n');
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Parses one response from the bytes a connection receives (RFC 9112 §2–§7). */
class ResponseParser {
  private head: Buffer | null = null;
  status = 0;
  headers = new Map<string, string>();
  private mode: 'head' | 'length' | 'chunk-size' | 'chunk-data' | 'chunk-crlf' | 'trailers' | 'close' | 'done' = 'head';
  private remaining = 0;
  private fixed: Uint8Array | null = null;
  private filled = 0;
  private pieces: Uint8Array[] = [];
  private line: Buffer | null = null;
  /** Whether the connection may carry another request after this response. */
  keepAlive = true;
  /** Bytes of the response received so far (head included). */
  received = 0;

  /**
   * @param method the request's method (a HEAD answer has no body).
   * @param sink when given, each piece of the body goes to it as it arrives (a copy) instead of being kept.
   */
  constructor(
    private readonly method: string,
    private readonly sink?: (bytes: Uint8Array) => void,
  ) {}

  /** Whether the final (non-1xx) head has arrived. */
  get headReady(): boolean {
    return this.status !== 0;
  }

  get done(): boolean {
    return this.mode === 'done';
  }

  /** The body, once done. */
  body(): Uint8Array {
    if (this.fixed !== null) return this.fixed;
    if (this.pieces.length === 1) return this.pieces[0]!;
    return Buffer.concat(this.pieces);
  }

  /**
   * Feed received bytes. @returns the bytes after the end of this response (empty when none).
   * @throws Error on a malformed response.
   */
  push(data: Uint8Array): Uint8Array {
    this.received += data.byteLength;
    let at = 0;
    while (at < data.byteLength && this.mode !== 'done') {
      switch (this.mode) {
        case 'head': {
          const chunk = data.subarray(at);
          const joined: Buffer = this.head === null ? Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength) : Buffer.concat([this.head, chunk]);
          const from = this.head === null ? 0 : Math.max(0, this.head.byteLength - 3);
          const end = joined.indexOf(CRLF_CRLF, from);
          if (end < 0) {
            if (joined.byteLength > MAX_HEAD_BYTES) throw new Error(`the engine's response head exceeds ${MAX_HEAD_BYTES} bytes`);
            this.head = Buffer.from(joined); // own copy: the socket may reuse the chunk's memory
            at = data.byteLength;
            break;
          }
          const used = end + 4 - (this.head?.byteLength ?? 0);
          this.head = null;
          at += used;
          this.parseHead(joined.toString('latin1', 0, end));
          break;
        }
        case 'length': {
          const n = Math.min(this.remaining, data.byteLength - at);
          if (this.sink) this.sink(Buffer.from(data.subarray(at, at + n)));
          else this.fixed!.set(data.subarray(at, at + n), this.filled);
          this.filled += n;
          this.remaining -= n;
          at += n;
          if (this.remaining === 0) this.mode = 'done';
          break;
        }
        case 'close': {
          const piece = Buffer.from(data.subarray(at));
          if (this.sink) this.sink(piece);
          else this.pieces.push(piece);
          at = data.byteLength;
          break;
        }
        case 'chunk-size':
        case 'trailers': {
          const line = this.readLine(data, at);
          if (line === null) {
            at = data.byteLength;
            break;
          }
          at = line.next;
          if (this.mode === 'trailers') {
            if (line.text === '') this.mode = 'done';
            break;
          }
          const size = line.text.split(';')[0]!.trim();
          if (!/^[0-9a-fA-F]{1,12}$/.test(size)) throw new Error(`the engine sent a malformed chunk size "${line.text.slice(0, 40)}"`);
          this.remaining = parseInt(size, 16);
          this.mode = this.remaining === 0 ? 'trailers' : 'chunk-data';
          break;
        }
        case 'chunk-data': {
          const n = Math.min(this.remaining, data.byteLength - at);
          const piece = Buffer.from(data.subarray(at, at + n));
          if (this.sink) this.sink(piece);
          else this.pieces.push(piece);
          this.remaining -= n;
          at += n;
          if (this.remaining === 0) this.mode = 'chunk-crlf';
          break;
        }
        case 'chunk-crlf': {
          const line = this.readLine(data, at);
          if (line === null) {
            at = data.byteLength;
            break;
          }
          if (line.text !== '') throw new Error('the engine sent chunk data longer than its chunk size');
          at = line.next;
          this.mode = 'chunk-size';
          break;
        }
      }
    }
    return data.subarray(at);
  }

  /** The connection closed: completes a response framed by the close. @returns whether the response is complete. */
  closed(): boolean {
    if (this.mode === 'close') {
      this.mode = 'done';
      this.keepAlive = false;
    }
    return this.mode === 'done';
  }

  /** One CRLF-terminated line starting at `at` (buffered across chunks), or null when its end has not arrived. */
  private readLine(data: Uint8Array, at: number): { text: string; next: number } | null {
    const view = Buffer.from(data.buffer, data.byteOffset + at, data.byteLength - at);
    const joined: Buffer = this.line === null ? view : Buffer.concat([this.line, view]);
    const end = joined.indexOf(CRLF);
    if (end < 0) {
      if (joined.byteLength > 4096) throw new Error('the engine sent a chunk line over 4096 bytes');
      this.line = Buffer.from(joined);
      return null;
    }
    const consumed = end + 2 - (this.line?.byteLength ?? 0);
    this.line = null;
    return { text: joined.toString('latin1', 0, end), next: at + consumed };
  }

  private parseHead(head: string): void {
    const lines = head.split('\r\n');
    const match = /^HTTP\/1\.([01]) (\d{3})(?: .*)?$/.exec(lines[0] ?? '');
    if (match === null) throw new Error(`the engine did not answer with HTTP/1.x: "${(lines[0] ?? '').slice(0, 80)}"`);
    const status = Number(match[2]);
    const headers = new Map<string, string>();
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(':');
      if (colon <= 0) throw new Error(`the engine sent a malformed header line "${line.slice(0, 80)}"`);
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      const known = headers.get(name);
      headers.set(name, known === undefined ? value : `${known}, ${value}`);
    }
    // 1xx: an informational response precedes the real one (RFC 9110 §15.2).
    if (status >= 100 && status < 200) return;
    this.status = status;
    this.headers = headers;
    const connection = (headers.get('connection') ?? '').toLowerCase();
    this.keepAlive = match[1] === '1' ? !/\bclose\b/.test(connection) : /\bkeep-alive\b/.test(connection);
    const encoding = headers.get('transfer-encoding');
    const length = headers.get('content-length');
    if (this.method === 'HEAD' || status === 204 || status === 304) {
      this.mode = 'done';
    } else if (encoding !== undefined) {
      if (!/\bchunked\s*$/i.test(encoding)) {
        this.mode = 'close';
        this.keepAlive = false;
      } else {
        this.mode = 'chunk-size';
      }
    } else if (length !== undefined) {
      if (!/^\d{1,15}$/.test(length)) throw new Error(`the engine sent an invalid content-length "${length.slice(0, 40)}"`);
      this.remaining = Number(length);
      if (!this.sink) this.fixed = Buffer.allocUnsafe(this.remaining);
      this.mode = this.remaining === 0 ? 'done' : 'length';
    } else {
      this.mode = 'close';
      this.keepAlive = false;
    }
  }
}

/** State of one connection: the call it carries (if any) and whether it was used before. */
interface Connection {
  socket: Socket<Connection> | null;
  call: Call | null;
  reused: boolean;
  closed: boolean;
  /** Body bytes still to write when the socket pushed back. */
  pending: Uint8Array | null;
}

interface Call {
  parser: ResponseParser;
  /** The final head arrived (a streamed call resolves here; called again after that, it does nothing). */
  headArrived(): void;
  /** The whole answer arrived. */
  complete(): void;
  /** `retryable`: nothing of the answer arrived on a reused connection (the server had closed it). */
  fail(error: Error, retryable: boolean): void;
}

/** Keep-alive connections to one origin (`http://host:port`). */
export class Http1Pool {
  private readonly idle: Connection[] = [];
  private readonly hostHeader: string;

  /**
   * @param hostname the engine's host (a name or an IP literal; IPv6 without brackets).
   * @param port its TCP port.
   */
  constructor(
    private readonly hostname: string,
    private readonly port: number,
  ) {
    this.hostHeader = `${hostname.includes(':') ? `[${hostname}]` : hostname}:${port}`;
  }

  /**
   * Send one request and read its whole answer.
   * @throws Error when the connection fails or closes before the answer is complete, or the answer is malformed; the
   *   signal's reason when `request.signal` aborts (the connection is then dropped); TypeError for a header name or
   *   value that cannot be sent (a CR or LF in it).
   */
  async request(request: Http1Request): Promise<Http1Response> {
    return this.send(request, false) as Promise<Http1Response>;
  }

  /**
   * Send one request and resolve once the answer's status and header fields have arrived; its body streams. Calls on
   * a kept connection closed by the server are sent again as in `request`, before the head only.
   * @throws like `request` until the head arrives; after it, the body stream errors instead (the connection failed
   *   or closed mid-body, or `request.signal` aborted). Cancelling the body stream drops the connection.
   */
  async requestStream(request: Http1Request): Promise<Http1StreamResponse> {
    return this.send(request, true) as Promise<Http1StreamResponse>;
  }

  private async send(request: Http1Request, stream: boolean): Promise<Http1Response | Http1StreamResponse> {
    const head = this.head(request);
    request.signal?.throwIfAborted();
    let connection = this.idle.pop() ?? null;
    while (connection !== null && connection.closed) connection = this.idle.pop() ?? null;
    try {
      return await this.exchange(connection ?? (await this.connectFor(request.signal)), head, request, stream);
    } catch (thrown) {
      if (!(thrown instanceof RetryOnNewConnection)) throw thrown;
      return this.exchange(await this.connectFor(request.signal), head, request, stream);
    }
  }

  /** A new connection, given up when `signal` aborts first (a connection that opens later is closed). */
  private connectFor(signal: AbortSignal | undefined): Promise<Connection> {
    // Already aborted (e.g. between a keep-alive race and its retry): its abort event has fired and would not again.
    if (signal?.aborted) return Promise.reject(signal.reason);
    const connecting = this.connect();
    if (signal === undefined) return connecting;
    return new Promise<Connection>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      connecting.then(
        (connection) => {
          signal.removeEventListener('abort', onAbort);
          if (signal.aborted) connection.socket?.end();
          else resolve(connection);
        },
        (error: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(error);
        },
      );
    });
  }

  /** Close every idle connection (calls in flight finish). */
  close(): void {
    for (const connection of this.idle.splice(0)) connection.socket?.end();
  }

  private head(request: Http1Request): Buffer {
    let text = `${request.method} ${request.path} HTTP/1.1\r\nhost: ${this.hostHeader}\r\n`;
    for (const [name, value] of Object.entries(request.headers)) {
      if (!TOKEN.test(name) || /[\r\n\0]/.test(value)) throw new TypeError(`header ${JSON.stringify(name)} cannot be sent: invalid name or a CR/LF in its value`);
      if (name.toLowerCase() === 'content-length' || name.toLowerCase() === 'host') continue;
      text += `${name}: ${value}\r\n`;
    }
    if (request.body !== undefined) text += `content-length: ${request.body.byteLength}\r\n`;
    return Buffer.from(`${text}\r\n`, 'latin1');
  }

  private async connect(): Promise<Connection> {
    const connection: Connection = { socket: null, call: null, reused: false, closed: false, pending: null };
    const ended = (error: Error | undefined) => {
      if (connection.closed) return;
      connection.closed = true;
      const call = connection.call;
      connection.call = null;
      if (call === null) return;
      if (error === undefined && call.parser.closed()) {
        call.headArrived();
        call.complete();
        return;
      }
      const received = call.parser.received;
      call.fail(error ?? new Error(`the engine closed the connection before its answer was complete (${received} bytes received)`), received === 0 && connection.reused);
    };
    connection.socket = await Bun.connect<Connection>({
      hostname: this.hostname,
      port: this.port,
      data: connection,
      socket: {
        data: (_socket, data) => this.onData(connection, data),
        drain: (socket) => {
          const pending = connection.pending;
          if (pending === null) return;
          const written = socket.write(pending);
          connection.pending = written < 0 ? null : written < pending.byteLength ? pending.subarray(written) : null;
        },
        error: (_socket, error) => ended(error),
        close: (_socket, error) => ended(error),
        end: (socket) => {
          // The server closed its side: a response framed by the close is complete; anything else is an error.
          ended(undefined);
          socket.end();
        },
      },
    });
    connection.socket.setNoDelay(true);
    // Only a call in flight keeps the process alive (as fetch's pooled connections do): an idle keep-alive
    // connection must not hold up a graceful exit.
    connection.socket.unref();
    return connection;
  }

  private onData(connection: Connection, data: Uint8Array): void {
    const call = connection.call;
    if (call === null) {
      // Bytes nobody asked for: the connection is out of step; retire it.
      connection.closed = true;
      connection.socket?.terminate();
      return;
    }
    let rest: Uint8Array;
    try {
      rest = call.parser.push(data);
    } catch (thrown) {
      connection.call = null;
      connection.closed = true;
      connection.socket?.terminate();
      call.fail(thrown instanceof Error ? thrown : new Error(String(thrown)), false);
      return;
    }
    if (call.parser.headReady) call.headArrived();
    if (!call.parser.done) return;
    connection.call = null;
    connection.socket?.unref();
    call.complete();
    // Part of the request body still unsent (the server answered early): the connection carries no other call, which
    // would have to wait behind it and whose bytes the server may not read as a new request.
    if (!call.parser.keepAlive || rest.byteLength > 0 || connection.closed || connection.pending !== null) {
      connection.closed = true;
      connection.socket?.end();
      return;
    }
    connection.reused = true;
    if (this.idle.length < MAX_IDLE) this.idle.push(connection);
    else connection.socket?.end();
  }

  private exchange(connection: Connection, head: Buffer, request: Http1Request, stream: boolean): Promise<Http1Response | Http1StreamResponse> {
    return new Promise<Http1Response | Http1StreamResponse>((resolve, reject) => {
      const socket = connection.socket!;
      const signal = request.signal;
      if (signal?.aborted) {
        // Aborted while its connection was being opened: nothing is sent; the new connection is not kept.
        connection.closed = true;
        socket.end();
        reject(signal.reason);
        return;
      }
      if (connection.closed) {
        // Its close event already ran (between the pool handing it out and now): nothing would ever settle the
        // call. A kept connection gets it again on a new one, as in the keep-alive race.
        reject(connection.reused ? new RetryOnNewConnection(new Error('the engine closed the kept connection')) : new Error('the engine closed the connection before the call was sent'));
        return;
      }
      /** Drop the connection mid-call (abort, or the reader cancelled the body). */
      const drop = () => {
        if (connection.call !== call) return false;
        connection.call = null;
        connection.closed = true;
        socket.terminate();
        return true;
      };
      const onAbort = () => {
        if (drop()) call.fail(signal!.reason instanceof Error ? signal!.reason : new Error(String(signal!.reason)), false);
      };
      const settle = () => signal?.removeEventListener('abort', onAbort);
      // A streamed call resolves at its head; its body goes to this stream as it arrives.
      let body: ReadableStreamDefaultController<Uint8Array> | null = null;
      /** Body pieces that arrived with the head, before the stream exists. */
      const early: Uint8Array[] = [];
      let headSent = false;
      const parser = new ResponseParser(request.method, stream ? (bytes) => (body === null ? early.push(bytes) : body.enqueue(bytes)) : undefined);
      const call: Call = {
        parser,
        headArrived: () => {
          if (!stream || headSent) return;
          headSent = true;
          const readable = new ReadableStream<Uint8Array>({
            start: (controller) => {
              body = controller;
              for (const piece of early.splice(0)) controller.enqueue(piece);
            },
            cancel: () => {
              settle();
              drop();
            },
          });
          resolve({ status: parser.status, headers: parser.headers, body: readable });
        },
        complete: () => {
          settle();
          if (stream) body?.close();
          else resolve({ status: parser.status, headers: parser.headers, body: parser.body() });
        },
        fail: (error, retryable) => {
          settle();
          if (headSent) body?.error(error);
          else reject(retryable ? new RetryOnNewConnection(error) : error);
        },
      };
      connection.call = call;
      signal?.addEventListener('abort', onAbort, { once: true });
      socket.ref();
      const requestBody = request.body;
      // Small requests go out in one write; a large body follows its head without being copied next to it.
      const first = requestBody !== undefined && requestBody.byteLength <= 16 * 1024 ? Buffer.concat([head, requestBody]) : head;
      const rest = first === head ? requestBody : undefined;
      // The body follows even when the socket kept part of the head for its drain (it queues behind it).
      if (this.write(connection, first) && rest !== undefined) this.write(connection, rest);
    });
  }

  /**
   * Write bytes, keeping what the socket does not take for its drain (bytes written later queue behind them).
   * @returns false when the socket is closed (its close handler fails the call), else true.
   */
  private write(connection: Connection, bytes: Uint8Array): boolean {
    if (connection.pending !== null) {
      connection.pending = Buffer.concat([connection.pending, bytes]);
      return true;
    }
    const written = connection.socket!.write(bytes);
    if (written < 0) return false;
    if (written < bytes.byteLength) connection.pending = Buffer.from(bytes.subarray(written));
    return true;
  }
}

/** A call on a reused connection that the server had closed: nothing was received, so it is sent again. */
class RetryOnNewConnection extends Error {
  constructor(cause: Error) {
    super(cause.message, { cause });
  }
}

const pools = new Map<string, Http1Pool>();

/**
 * The pool for an `http:` URL's origin (kept for the process), or null when this client must not carry the call: a
 * URL that is not plain `http:` or has credentials, or an HTTP proxy configured in the environment (`http_proxy` /
 * `HTTP_PROXY`, which `fetch` honours).
 */
export function http1PoolFor(url: URL): Http1Pool | null {
  if (url.protocol !== 'http:' || url.username !== '' || url.password !== '') return null;
  if (process.env.http_proxy || process.env.HTTP_PROXY) return null;
  const key = url.host;
  let pool = pools.get(key);
  if (pool === undefined) {
    const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    pool = new Http1Pool(hostname, url.port === '' ? 80 : Number(url.port));
    pools.set(key, pool);
  }
  return pool;
}
