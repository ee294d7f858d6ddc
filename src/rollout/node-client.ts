/**
 * The rollout server's side of the gateway node HTTP API (src/core/contracts/dispatch.ts): dispatch a session, cancel
 * it, ask for it.
 * Every call carries `authorization: Bearer <control_plane_token>` when one is configured.
 */
import { classifyDispatchAnswer, controlPlaneHeaders, sessionListSchema, type DispatchOutcome, type DispatchSpec, type SessionSummary } from '../core/contracts/index.ts';

export type { DispatchSpec };

/** Most sessions one `GET /sessions` lists (the gateway's cap); a full page means the list may be cut short. */
export const SESSION_LIST_LIMIT = 1000;

/** How the server reaches one node. HTTP for every node; tests may pass their own. */
export interface NodeClient {
  /** Hand the session to the node; never throws: a network failure is an `unavailable` outcome. */
  dispatch(spec: DispatchSpec): Promise<DispatchOutcome>;
  /** Cancel a session on the node; false when the node does not know it. Never throws for a 404. */
  cancel(sessionId: string, reason?: string): Promise<boolean>;
  /**
   * The node's view of a session: its status, dispatch attempt and, once it ended, its SessionResult (`result`, as the
   * node would have posted it to the callback URL); null when the node does not know it (404).
   */
  getSession(sessionId: string): Promise<{ status: string; attempt?: number; result?: unknown } | null>;
  /** Every session the node holds (`GET /sessions`). @throws Error when the node cannot be reached or answers badly. */
  listSessions(): Promise<SessionSummary[]>;
}

export interface HttpNodeClientOptions {
  controlPlaneToken?: string | null;
  /** Per-call timeout in ms (default 10 000). */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

/** A NodeClient over HTTP for the node at `baseUrl` (scheme://host:port). */
export function httpNodeClient(baseUrl: string, options: HttpNodeClientOptions = {}): NodeClient {
  const base = baseUrl.replace(/\/+$/, '');
  const doFetch = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const headers = controlPlaneHeaders(options.controlPlaneToken);
  const call = (path: string, init: RequestInit) =>
    doFetch(`${base}${path}`, { ...init, headers, signal: AbortSignal.timeout(timeoutMs) });
  const client: NodeClient = {
    async dispatch(spec) {
      try {
        const response = await call('/sessions', { method: 'POST', body: JSON.stringify(spec) });
        return classifyDispatchAnswer(response.status, await response.text());
      } catch (error) {
        const why = error instanceof Error ? error.message : String(error);
        // A timed-out dispatch may have reached the node (it was slow to answer, not gone): ask before the session is
        // re-queued, so it does not run twice. Held there: adopt its attempt. Unknown or unreachable: unavailable.
        if (error instanceof Error && error.name === 'TimeoutError') {
          const held = await client.getSession(spec.session_id).catch(() => null);
          if (held) return { kind: 'held', attempt: held.attempt ?? null, status: held.status };
        }
        return { kind: 'unavailable', error: `node ${base} unreachable: ${why}` };
      }
    },
    async listSessions() {
      const response = await call(`/sessions?limit=${SESSION_LIST_LIMIT}`, { method: 'GET' });
      if (!response.ok) throw new Error(`node ${base} session list failed: HTTP ${response.status}`);
      const parsed = sessionListSchema.safeParse(await response.json());
      if (!parsed.success) throw new Error(`node ${base} answered GET /sessions with an unexpected body`);
      return parsed.data.sessions;
    },
    async cancel(sessionId, reason) {
      const query = reason ? `?reason=${encodeURIComponent(reason)}` : '';
      const response = await call(`/sessions/${encodeURIComponent(sessionId)}${query}`, { method: 'DELETE' });
      await response.body?.cancel();
      if (response.status === 404) return false;
      if (!response.ok) throw new Error(`node ${base} cancel failed: HTTP ${response.status}`);
      return true;
    },
    async getSession(sessionId) {
      const response = await call(`/sessions/${encodeURIComponent(sessionId)}`, { method: 'GET' });
      if (response.status === 404) {
        await response.body?.cancel();
        return null;
      }
      if (!response.ok) throw new Error(`node ${base} session lookup failed: HTTP ${response.status}`);
      const body = (await response.json()) as { status?: unknown; attempt?: unknown; result?: unknown };
      return {
        status: typeof body.status === 'string' ? body.status : 'UNKNOWN',
        ...(typeof body.attempt === 'number' ? { attempt: body.attempt } : {}),
        ...(body.result !== undefined && body.result !== null ? { result: body.result } : {}),
      };
    },
  };
  return client;
}
