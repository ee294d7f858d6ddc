/**
 * The rollout server's HTTP routes on Bun.serve `routes` (https://bun.com/docs/api/http#routing): task intake and
 * status, the trainer API, node registration and heartbeats, session-result callbacks, events and metrics, and the
 * weight-sync fan-out to every gateway (./admin-fanout.ts), and the live dashboard at `/` and `/dashboard` (src/observe/dashboard/).
 * Every route but `/health` and `/metrics` needs the control-plane token when one is set, as
 * `authorization: Bearer <token>` or the Python Polar's `x-polar-control-token: <token>` (core/control-token.ts).
 */
import { controlTokenMatches } from '../core/control-token.ts';
import { adminFanoutRoutes, type FanoutNode } from './admin-fanout.ts';
import { HttpError } from './context.ts';
import { dashboardRoutes, fetchNodeHealth } from '../observe/dashboard/routes.ts';
import type { DashboardSource } from '../observe/dashboard/state.ts';
import type { EventHub } from '../observe/events.ts';
import type { GrpoStd } from '../trace/advantages.ts';
import type { RolloutStore } from './store-port.ts';
import { stdParam } from './trainer-api.ts';

/** What the routes call: the public methods of RolloutServer (./server.ts). */
export interface RolloutApi {
  readonly store: RolloutStore;
  readonly events: EventHub;
  submit(input: unknown): unknown;
  taskStatus(taskId: string): unknown;
  cancelTask(taskId: string, opts?: { registerIfMissing?: boolean }): Promise<unknown>;
  status(): unknown;
  readyGroups(opts: { std?: GrpoStd; trajectories?: boolean }): unknown[];
  groupTrajectories(taskId: string, opts: { std?: GrpoStd }): unknown;
  ackGroup(taskId: string): boolean;
  listNodes(): unknown[];
  nodeInfos(): unknown[];
  nodeInfo(nodeId: string): Record<string, unknown> | null;
  registerNode(input: unknown): unknown;
  heartbeat(nodeId: string, input: unknown): unknown;
  drainNode(nodeId: string): unknown;
  nodeLeaving(nodeId: string): unknown;
  nodeHandback(nodeId: string, input: unknown): unknown;
  acceptResult(input: unknown): Promise<unknown>;
  metricsText(): Promise<{ text: string; contentType: string }>;
}

type Req = Request & { params: Record<string, string> };

export function json(value: unknown, status = 200): Response {
  return Response.json(value, { status });
}

/** The route table of `server`; `token` null disables the bearer check. */
export function rolloutRoutes(server: RolloutApi, token: string | null, health: () => Record<string, unknown>) {
  const authorized = (req: Request) => token === null || controlTokenMatches(req.headers, token);
  const guarded =
    (handler: (req: Req) => unknown | Promise<unknown>, okStatus = 200) =>
    async (req: Req): Promise<Response> => {
      if (!authorized(req)) return json({ error: 'missing or wrong control-plane token' }, 401);
      try {
        const out = await handler(req);
        return out instanceof Response ? out : json(out, okStatus);
      } catch (error) {
        if (error instanceof HttpError) return json({ error: error.message }, error.status);
        if (error instanceof Error && error.message.startsWith('invalid ')) return json({ error: error.message }, 400);
        return json({ error: error instanceof Error ? error.message : String(error) }, 500);
      }
    };
  const body = async (req: { json(): Promise<unknown> }): Promise<unknown> => {
    try {
      return await req.json();
    } catch {
      throw new HttpError(400, 'request body must be JSON');
    }
  };
  return {
    '/health': () => json({ status: 'ok', ok: true, nodes: server.listNodes().length, ...health() }),
    '/metrics': async () => {
      const metrics = await server.metricsText();
      return new Response(metrics.text, { headers: { 'content-type': metrics.contentType } });
    },
    '/rollout/task/submit': { POST: guarded(async (req) => server.submit(await body(req))) },
    '/rollout/task/:id': {
      GET: guarded((req) => server.taskStatus(req.params.id!) ?? json({ error: 'unknown task' }, 404)),
      DELETE: guarded((req) => server.cancelTask(req.params.id!, { registerIfMissing: booleanParam(new URL(req.url).searchParams, 'register_if_missing') })),
    },
    '/rollout/status': { GET: guarded(() => server.status()) },
    '/rollout/groups': {
      GET: guarded((req) => {
        const query = new URL(req.url).searchParams;
        const ready = query.get('ready');
        if (ready !== null && ready !== '1' && ready !== 'true') throw new HttpError(400, 'only ready=1 is supported');
        const include = query.getAll('include').flatMap((v) => v.split(',')).filter(Boolean);
        const unknown = include.filter((v) => v !== 'trajectories');
        if (unknown.length > 0) throw new HttpError(400, `include: unknown value ${unknown.join(',')}; supported: trajectories`);
        return { groups: server.readyGroups({ std: stdParam(query), trajectories: include.includes('trajectories') }) };
      }),
    },
    '/rollout/groups/:id/trajectories': {
      GET: guarded((req) => {
        const taskId = req.params.id!;
        const group = server.groupTrajectories(taskId, { std: stdParam(new URL(req.url).searchParams) });
        if (!group) throw new HttpError(404, `no evaluated group for task ${taskId} (groups are keyed by task_id)`);
        return group;
      }),
    },
    '/rollout/groups/:id/ack': {
      POST: guarded((req) => {
        const taskId = req.params.id!;
        const row = server.store.groups.get(taskId);
        return { task_id: taskId, group_id: row?.group_id ?? null, acked: server.ackGroup(taskId) };
      }),
    },
    '/nodes': { GET: guarded(() => server.nodeInfos()) },
    '/nodes/register': { POST: guarded(async (req) => server.registerNode(await body(req))) },
    '/nodes/:id/heartbeat': { POST: guarded(async (req) => server.heartbeat(req.params.id!, await body(req))) },
    '/nodes/:id/leave': { POST: guarded((req) => server.nodeLeaving(req.params.id!)) },
    '/nodes/:id/handback': { POST: guarded(async (req) => server.nodeHandback(req.params.id!, await body(req))) },
    '/nodes/:id': {
      GET: guarded((req) => server.nodeInfo(req.params.id!) ?? json({ error: `unknown node ${req.params.id!}` }, 404)),
      // GatewayNodeInfo after the drain, plus our {draining, in_flight}.
      DELETE: guarded((req) => ({ ...(server.drainNode(req.params.id!) as object), ...server.nodeInfo(req.params.id!) })),
    },
    '/callbacks/session_result': { POST: guarded(async (req) => server.acceptResult(await body(req))) },
    '/events': { GET: guarded((req) => server.events.sseResponse(req.signal)) },
    ...dashboardRoutes(dashboardSource(server, health, token), guarded),
    // Registered nodes carry node_id and url (NodeRow); the fan-out reaches each one's proxy admin endpoints.
    ...adminFanoutRoutes({ nodes: () => server.listNodes() as FanoutNode[], controlPlaneToken: token }, guarded, body),
  };
}

/** A boolean query flag (`true|false|1|0`, absent = false). @throws HttpError 400 on another value. */
function booleanParam(query: URLSearchParams, name: string): boolean {
  const value = query.get(name);
  if (value === null || value === 'false' || value === '0') return false;
  if (value === 'true' || value === '1') return true;
  throw new HttpError(400, `${name} must be true or false, got ${value}`);
}

/** The dashboard's view of the server: its store, its node registry, and each node's own `/health`. */
function dashboardSource(server: RolloutApi, health: () => Record<string, unknown>, token: string | null): DashboardSource {
  return {
    tasks: () => server.store.tasks.list(),
    sessions: (taskId) => server.store.sessions.listByTask(taskId),
    results: (taskId) => server.store.results.listByTask(taskId),
    result: (sessionId) => server.store.results.get(sessionId),
    session: (sessionId) => server.store.sessions.get(sessionId),
    nodes: () => server.listNodes() as ReturnType<DashboardSource['nodes']>,
    undispatched: () => server.store.sessions.countByStatus('REGISTERED'),
    health,
    nodeHealth: (node) => fetchNodeHealth(node.url, token),
  };
}
