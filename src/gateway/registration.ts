/**
 * A gateway node's membership in a rollout server: register (retried until it succeeds), then heartbeat stage counts
 * and each held session's live status every interval; a 404 heartbeat (the server forgot the node: restart, drain)
 * registers again. Shapes: src/core/contracts/nodes.ts.
 */
import { controlPlaneHeaders, handbackAnswerSchema, type NodeCapacity, type PoolSizesReport, type StageCounts } from '../core/contracts/index.ts';
import { postWithRetry } from './callback.ts';
import { errorText } from './node-types.ts';

export interface RegistrationOptions {
  server: string;
  nodeId: string;
  /** URL the server reaches the node at. */
  url: string;
  capacity: NodeCapacity;
  intervalMs: number;
  token: string | null | undefined;
  signal: AbortSignal;
  stages(): StageCounts;
  /** session_id → live status of each session the node holds. */
  sessions(): Record<string, string>;
  /** Whether the node's engine answers its health checks; null when the node does not check. */
  engineOk?(): boolean | null;
  /** The INIT pool and READY buffer in use when they differ from `capacity` (`pool_sizing: auto`); null: capacity's. */
  pools?(): PoolSizesReport | null;
  track(p: Promise<unknown>): void;
  fetch?: typeof fetch;
  log?: (line: string) => void;
}

/** Start registering and heartbeating; returns the function that stops the heartbeats. */
export function startRegistration(o: RegistrationOptions): () => void {
  const base = o.server.replace(/\/+$/, '');
  const register = () => postWithRetry(`${base}/nodes/register`, { node_id: o.nodeId, url: o.url, capacity: o.capacity }, {
    attempts: 1_000_000, baseDelayMs: 500, maxDelayMs: 10_000, token: o.token, fetch: o.fetch, signal: o.signal,
  });
  let registered = false;
  o.track(register().then(() => { registered = true; }, (error) => {
    if (!o.signal.aborted) o.log?.(`registration with ${base} failed: ${errorText(error)}`);
  }));
  const timer = setInterval(() => {
    if (!registered) return;
    const doFetch = o.fetch ?? fetch;
    void doFetch(`${base}/nodes/${encodeURIComponent(o.nodeId)}/heartbeat`, {
      method: 'POST', headers: controlPlaneHeaders(o.token), body: JSON.stringify(heartbeatBody(o)),
      signal: AbortSignal.timeout(Math.max(1000, o.intervalMs)),
    }).then(async (response) => {
      await response.body?.cancel();
      // A server that forgot us (restart, drain) gets a fresh registration.
      if (response.status === 404) {
        registered = false;
        o.track(register().then(() => { registered = true; }, () => {}));
      }
    }, (error) => o.log?.(`heartbeat to ${base} failed: ${errorText(error)}`));
  }, o.intervalMs);
  return () => clearInterval(timer);
}

/**
 * One heartbeat's body (src/core/contracts/nodes.ts `heartbeatSchema`): stage counts and session statuses read in the
 * same synchronous step, so a session is listed exactly when the counts include it (the server counts a dispatch not
 * listed yet as queued: one that reaches the node while this heartbeat is on its way).
 */
function heartbeatBody(o: RegistrationOptions): Record<string, unknown> {
  const stages = o.stages();
  const sessions = o.sessions();
  const pools = o.pools?.() ?? null;
  return { stages, sessions, ...engineField(o.engineOk?.() ?? null), ...(pools ? { pools } : {}) };
}

/** The heartbeat's `engine_ok`, when the node checks its engine. */
function engineField(ok: boolean | null): { engine_ok?: boolean } {
  return ok === null ? {} : { engine_ok: ok };
}

type Membership = Pick<RegistrationOptions, 'server' | 'nodeId' | 'token' | 'fetch' | 'log'> & { timeoutMs?: number };

/** One best-effort call about this node to the rollout server; never throws (a 404, an unknown node, is fine). */
async function tellServer(o: Membership, method: 'POST' | 'DELETE', path: string, what: string): Promise<void> {
  const base = o.server.replace(/\/+$/, '');
  try {
    const response = await (o.fetch ?? fetch)(`${base}/nodes/${encodeURIComponent(o.nodeId)}${path}`, {
      method, headers: controlPlaneHeaders(o.token), ...(method === 'POST' ? { body: '{}' } : {}), signal: AbortSignal.timeout(o.timeoutMs ?? 2000),
    });
    await response.body?.cancel();
    if (!response.ok && response.status !== 404) o.log?.(`${what} to ${base}: HTTP ${response.status}`);
  } catch (error) {
    o.log?.(`${what} to ${base} failed: ${errorText(error)}`);
  }
}

/**
 * Tell the rollout server to send this stopping node no more sessions (`DELETE /nodes/{id}`, the drain). Best effort:
 * without an answer within `timeoutMs` (default 2000) a dispatch meanwhile is refused with 503 and queued again.
 */
export function announceDraining(o: Membership): Promise<void> {
  return tellServer(o, 'DELETE', '', 'drain notice');
}

/**
 * Tell the rollout server this node is stopping (`POST /nodes/{id}/leave`), so it queues the sessions the node still
 * had again at once instead of after the heartbeat timeout. Best effort: never throws; without an answer within
 * `timeoutMs` (default 2000) the heartbeat timeout does the same later.
 */
export function announceLeaving(o: Membership): Promise<void> {
  return tellServer(o, 'POST', '/leave', 'leave notice');
}

/**
 * Give sessions back to the rollout server (`POST /nodes/{id}/handback` `{session_ids, reason}`): the node's engine
 * has been down for `gateway.engine_handback_s` and these have not started. Resolves with the ids the server took back
 * (queued again there; the node must drop exactly those), [] when it took none or does not know the endpoint or the
 * node (404), null when it could not be asked (network, timeout after `timeoutMs`, default 5000, other statuses).
 * Never throws.
 */
export async function handBack(o: Membership, sessionIds: readonly string[], reason: string): Promise<string[] | null> {
  const base = o.server.replace(/\/+$/, '');
  try {
    const response = await (o.fetch ?? fetch)(`${base}/nodes/${encodeURIComponent(o.nodeId)}/handback`, {
      method: 'POST', headers: controlPlaneHeaders(o.token), body: JSON.stringify({ session_ids: sessionIds, reason }),
      signal: AbortSignal.timeout(o.timeoutMs ?? 5000),
    });
    if (response.status === 404) {
      await response.body?.cancel();
      return [];
    }
    if (!response.ok) {
      o.log?.(`handback to ${base}: HTTP ${response.status} ${(await response.text()).slice(0, 200)}`);
      return null;
    }
    const parsed = handbackAnswerSchema.safeParse(await response.json());
    if (!parsed.success) {
      o.log?.(`handback to ${base}: unexpected answer`);
      return null;
    }
    return parsed.data.requeued;
  } catch (error) {
    o.log?.(`handback to ${base} failed: ${errorText(error)}`);
    return null;
  }
}
