/**
 * The control-plane token on the wire, in both spellings: ours (`Authorization: Bearer <token>`, env
 * POLAR_CONTROL_TOKEN) and the Python Polar's (`x-polar-control-token: <token>`, env POLAR_CONTROL_PLANE_TOKEN; see
 * NVIDIA-NeMo/ProRL-Agent-Server src/polar/rollout/server.py `_require_control_plane_request`). Either header
 * authenticates a request; comparisons take constant time so the token cannot be guessed byte by byte.
 */
import { timingSafeEqual } from 'node:crypto';

/** The Python Polar's header name. */
export const CONTROL_TOKEN_HEADER = 'x-polar-control-token';

/** Environment variables that hold the token, in order of precedence. */
export const CONTROL_TOKEN_ENV_VARS = ['POLAR_CONTROL_TOKEN', 'POLAR_CONTROL_PLANE_TOKEN'] as const;

function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** True when `headers` carry `token` as `Authorization: Bearer <token>` or `x-polar-control-token: <token>`. */
export function controlTokenMatches(headers: Headers, token: string): boolean {
  const authorization = headers.get('authorization');
  if (authorization !== null && same(authorization.trim(), `Bearer ${token}`)) return true;
  const reference = headers.get(CONTROL_TOKEN_HEADER);
  return reference !== null && same(reference.trim(), token);
}

/** The token from the environment (first non-empty of CONTROL_TOKEN_ENV_VARS), or undefined. */
export function controlTokenFromEnv(env: Record<string, string | undefined> = process.env): string | undefined {
  for (const name of CONTROL_TOKEN_ENV_VARS) {
    const value = env[name]?.trim();
    if (value) return value;
  }
  return undefined;
}
