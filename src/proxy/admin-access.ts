/**
 * Who may call the proxy's control endpoints (`/admin/*`: pause, resume, policy_version; and, when a token is set,
 * `GET /sessions/{id}/completions`). The agent being trained runs shell commands next to the proxy and can reach its
 * port, so these must not answer to anyone who merely reaches it. The rule:
 *
 * - with an admin token configured: the caller must send `Authorization: Bearer <token>` (from any address);
 * - without one: `/admin/*` answers only callers whose socket peer is a loopback address (127.0.0.0/8, ::1,
 *   ::ffff:127.x); a caller whose address cannot be determined (the app called without a Bun server) is refused.
 * - `GET /sessions/{id}/completions` always needs a credential: the admin token, or the API key of that very session
 *   (the key the harness used, which attributes its requests to `{id}`). Knowing or guessing an id is not enough.
 *
 * Loopback-only is not a boundary against a harness running on the same host (bwrap/local runtimes, docker with host
 * networking): set a token whenever the agents are untrusted. The gateway passes its control-plane token here.
 */
import { timingSafeEqual } from 'node:crypto';
import { controlTokenMatches } from '../core/control-token.ts';

/** True for an IPv4 127.0.0.0/8, IPv6 ::1 or IPv4-mapped loopback address (as `server.requestIP` reports it). */
export function isLoopbackAddress(address: string): boolean {
  const a = address.trim().toLowerCase();
  if (a === '::1' || a === '0:0:0:0:0:0:0:1') return true;
  return /^(::ffff:)?127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(a);
}

/**
 * True when `authorization` is exactly `Bearer <token>`; compared in constant time so the token cannot be guessed
 * byte by byte from response times.
 */
export function bearerMatches(authorization: string | null | undefined, token: string): boolean {
  if (!authorization) return false;
  const got = Buffer.from(authorization);
  const want = Buffer.from(`Bearer ${token}`);
  return got.length === want.length && timingSafeEqual(got, want);
}

/** The socket peer of a request as Bun's server reports it; null when unknown (no server, or a closed socket). */
export type PeerAddress = (request: Request) => string | null;

/** The peer lookup of a Bun server passed as hono's `env` (the 2nd argument of `fetch`), or null without one. */
export function peerAddressOf(env: unknown): PeerAddress | null {
  const server = env as { requestIP?: (request: Request) => { address: string } | null } | null | undefined;
  if (typeof server?.requestIP !== 'function') return null;
  return (request) => server.requestIP!(request)?.address ?? null;
}

/** A refused control call: `authentication` (401: no or wrong token) or `permission` (403: not a loopback caller). */
export interface ControlRefusal {
  kind: 'authentication' | 'permission';
  message: string;
}

/**
 * Why a control call is refused, or null when it is allowed (the rule in this module's header).
 * @param endpoint `admin` for `/admin/*`, `captures` for `GET /sessions/{id}/completions`
 * @param adminToken the configured token (undefined/null/'' = none)
 * @param peer the socket peer lookup (`peerAddressOf(c.env)`); null = unknown, which is refused for admin
 * @param ownSession for `captures`: true when the key the caller presented belongs to the session it asks for
 */
export function controlRefusal(
  endpoint: 'admin' | 'captures',
  request: Request,
  adminToken: string | null | undefined,
  peer: PeerAddress | null,
  ownSession?: () => boolean,
): ControlRefusal | null {
  if (endpoint === 'captures') {
    if (adminToken && controlTokenMatches(request.headers, adminToken)) return null;
    if (ownSession?.() === true) return null;
    return {
      kind: 'authentication',
      message: `captured completions need ${adminToken ? 'the admin token or ' : ''}the session's own API key (Authorization: Bearer <key>)`,
    };
  }
  if (adminToken) {
    if (controlTokenMatches(request.headers, adminToken)) return null;
    return { kind: 'authentication', message: 'admin endpoints need the admin token (Authorization: Bearer <token>)' };
  }
  const address = peer?.(request) ?? null;
  if (address === null) {
    return { kind: 'permission', message: "admin endpoints without an admin token answer loopback callers only, and this caller's address is unknown" };
  }
  if (!isLoopbackAddress(address)) {
    return { kind: 'permission', message: `admin endpoints without an admin token answer loopback callers only (this caller is ${address}); give the proxy an admin token to allow remote admin calls` };
  }
  return null;
}
