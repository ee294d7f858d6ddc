/**
 * Session attribution (docs/architecture.md#the-proxy), checked in this order: the path prefix `/s/{session_id}/…`, the header
 * `x-polar-session`, then the API key (`Authorization: Bearer`, `x-api-key`, `x-goog-api-key`, `?key=`).
 */
import { ByteLru } from '../core/byte-lru.ts';
import type { ProxySessionInfo, SessionDirectory } from './types.ts';

/**
 * The key a caller presented, in attribution order.
 * @param pathSession the `{session_id}` of a `/s/{session_id}/…` path, if any.
 * @returns the key, or `''` when the caller presented none.
 */
export function sessionKeyOf(headers: Headers, url: URL, pathSession: string | undefined): string {
  if (pathSession) return decodeURIComponent(pathSession);
  const header = headers.get('x-polar-session');
  if (header) return header.trim();
  const authorization = headers.get('authorization');
  if (authorization) {
    const match = /^Bearer\s+(.+)$/i.exec(authorization.trim());
    if (match?.[1]) return match[1].trim();
  }
  return headers.get('x-api-key')?.trim() || headers.get('x-goog-api-key')?.trim() || url.searchParams.get('key')?.trim() || '';
}

const SAFE_KEY = /^[A-Za-z0-9_.:-]{1,128}$/;

/**
 * The directory of `polar proxy`: every key opens (or re-joins) an ad-hoc session, so a harness run by hand is
 * captured without registration. A key that is safe as an id is the session id itself (so
 * `GET /sessions/{key}/completions` finds it); anything else is hashed so a real secret is never stored verbatim.
 * No key → the one session `defaultSession`, by default an id minted at random (`anon-` + 24 hex digits) so it cannot
 * be guessed.
 * A key's session is a pure function of the key; the last `maxCachedKeys` keys (default 4,096) are kept so a hashed key
 * is not hashed again on every call. Ad-hoc sessions never end, so the cache is bounded: an evicted key is resolved
 * again, to the same session, on its next call (a soak of new sessions grew an unbounded cache by one object and one
 * string per session; bench/README.md#session-12).
 */
export function adHocSessions(opts: { defaultSession?: string; taskId?: string; maxCachedKeys?: number } = {}): SessionDirectory & { defaultSession: string; cachedKeys(): number } {
  const defaultSession = opts.defaultSession ?? `anon-${Buffer.from(crypto.getRandomValues(new Uint8Array(12))).toString('hex')}`;
  const cache = new ByteLru<ProxySessionInfo>(opts.maxCachedKeys ?? 4096, () => 1);
  return {
    defaultSession,
    cachedKeys: () => cache.size,
    resolve(key: string): ProxySessionInfo {
      let info = cache.get(key);
      if (!info) {
        const session_id = key === '' ? defaultSession : SAFE_KEY.test(key) ? key : `key-${new Bun.CryptoHasher('sha256').update(key).digest('hex').slice(0, 24)}`;
        info = { session_id, ...(opts.taskId ? { task_id: opts.taskId } : {}) };
        cache.set(key, info);
      }
      return info;
    },
  };
}

/** A fixed directory (tests, embedding): known keys map to sessions, anything else is unknown (→ 401). */
export function staticSessions(sessions: Record<string, ProxySessionInfo>): SessionDirectory {
  return { resolve: (key) => (Object.hasOwn(sessions, key) ? sessions[key]! : null) };
}
