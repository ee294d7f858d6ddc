/**
 * The proxy's guards as named hono middleware: the request body limit (413 in the caller's shape) and the access rule
 * of the control endpoints (admin-access.ts). https://hono.dev/docs/guides/middleware
 */
import { bodyLimit } from 'hono/body-limit';
import { createMiddleware } from 'hono/factory';
import { GatewayError } from '../core/errors.ts';
import { controlRefusal, peerAddressOf } from './admin-access.ts';
import { errorDialect, renderError, type Env, type ProxyRuntime } from './context.ts';
import { sessionKeyOf } from './sessions.ts';
import { DEFAULT_MAX_BODY_BYTES } from './types.ts';

/**
 * Refuse a body over `options.maxBodyBytes` with 413 in the dialect owning the path.
 * https://hono.dev/docs/middleware/builtin/body-limit — checks Content-Length first, else counts the streamed body.
 */
export function bodyLimitGuard(rt: ProxyRuntime) {
  const maxBodyBytes = rt.options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  return bodyLimit({
    maxSize: maxBodyBytes,
    onError: (c) => {
      rt.counters.rejected++;
      // The rest of the body is never read: close the connection, or a keep-alive client that reuses it for its
      // next request sends that request after unread body bytes and waits forever.
      c.header('connection', 'close');
      // Set, so the request metrics count this refused model-API call under its path's dialect.
      const dialect = errorDialect(rt, c);
      c.set('dialect', dialect);
      return renderError(c, dialect, new GatewayError('invalid-request', `request body is larger than this proxy's limit of ${maxBodyBytes} bytes (proxy.max_body_bytes)`, { status: 413 }));
    },
  });
}

/**
 * Refuse a control call per the rule of admin-access.ts (token when configured, else loopback-only admin; the
 * completions listing also takes the API key of the session it names, never the `x-polar-session` header alone).
 */
export function controlGuard(rt: ProxyRuntime, endpoint: 'admin' | 'captures') {
  return createMiddleware<Env>(async (c, next) => {
    const ownSession = () => {
      const headers = new Headers(c.req.raw.headers);
      headers.delete('x-polar-session');
      const key = sessionKeyOf(headers, new URL(c.req.url), undefined);
      return key !== '' && rt.deps.sessions.resolve(key)?.session_id === c.req.param('id');
    };
    const refusal = controlRefusal(endpoint, c.req.raw, rt.options.adminToken, peerAddressOf(c.env), ownSession);
    if (refusal) throw new GatewayError(refusal.kind, refusal.message);
    await next();
  });
}
