/**
 * A fake gateway node for rollout-server tests: a real HTTP server on 127.0.0.1 (port 0) with the node side of the
 * dispatch contract (docs/architecture.md#contracts): `POST /sessions` records the dispatch body and answers 202,
 * `GET /sessions/{id}` says RUNNING for a session it holds (COMPLETED with its `results` entry once set; 404 otherwise), `GET /sessions` lists those, and
 * `DELETE /sessions/{id}` records the cancel.
 */
import type { DispatchSpec } from '../../src/rollout/node-client.ts';

export interface FakeGatewayNode {
  url: string;
  /** Dispatch bodies in arrival order. */
  readonly dispatched: DispatchSpec[];
  /** Session ids of DELETE calls in arrival order. */
  readonly cancelled: string[];
  /** Sessions the node holds (dispatched and not cancelled). */
  readonly known: Set<string>;
  /** Ended sessions: `GET /sessions/{id}` answers their status COMPLETED with this SessionResult as `result`. */
  readonly results: Map<string, unknown>;
  /** `GET /sessions/{id}` calls in arrival order. */
  readonly lookups: string[];
  /** Forget every session, as a restarted node would. */
  forget(): void;
  stop(): void;
}

/**
 * Start a fake node; with `token`, a dispatch without `authorization: Bearer <token>` gets 401. `answer` may replace
 * the 202 for a dispatch (a refusal, a 409, a 5xx): return a Response, or null for the default. `onCancel` runs (and is
 * awaited) before a `DELETE /sessions/{id}` is answered: e.g. the session's result callback racing the cancel.
 */
export function startFakeGatewayNode(token?: string, answer?: (spec: DispatchSpec) => Response | null, onCancel?: (sessionId: string) => Promise<void>): FakeGatewayNode {
  const dispatched: DispatchSpec[] = [];
  const cancelled: string[] = [];
  const known = new Set<string>();
  const results = new Map<string, unknown>();
  const lookups: string[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    routes: {
      '/sessions': {
        GET: () => Response.json({ sessions: dispatched.filter((d) => known.has(d.session_id)).map((d) => ({ session_id: d.session_id, task_id: d.task.task_id, attempt: d.attempt ?? 0, status: 'RUNNING' })) }),
        POST: async (req) => {
          if (token && req.headers.get('authorization') !== `Bearer ${token}`) return new Response('no', { status: 401 });
          const spec = (await req.json()) as DispatchSpec;
          const custom = answer?.(spec);
          if (custom) return custom;
          dispatched.push(spec);
          known.add(spec.session_id);
          return Response.json({ session_id: spec.session_id, status: 'REGISTERED' }, { status: 202 });
        },
      },
      '/sessions/:id': {
        GET: (req) => {
          lookups.push(req.params.id);
          const result = results.get(req.params.id);
          if (result !== undefined) return Response.json({ status: 'COMPLETED', attempt: (result as { attempt?: number }).attempt ?? 0, result });
          return known.has(req.params.id) ? Response.json({ status: 'RUNNING' }) : new Response('', { status: 404 });
        },
        DELETE: async (req) => {
          cancelled.push(req.params.id);
          await onCancel?.(req.params.id);
          return known.delete(req.params.id) ? Response.json({ ok: true }) : new Response('', { status: 404 });
        },
      },
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, dispatched, cancelled, known, results, lookups, forget: () => known.clear(), stop: () => server.stop(true) };
}
