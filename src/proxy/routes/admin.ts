/**
 * Control endpoints: `GET /sessions/{id}/completions` (a session's records), `GET /admin/inference/status`,
 * `POST /admin/inference/pause?timeout_seconds=` (504 when in-flight calls have not drained in time; the gate stays
 * paused), `POST /admin/inference/resume`, `POST /admin/policy_version {policy_version}`. Access per admin-access.ts, enforced
 * by `controlGuard` (middleware.ts).
 */
import type { Hono } from 'hono';
import { GatewayError } from '../../core/errors.ts';
import { readJsonText, type Env, type ProxyRuntime } from '../context.ts';
import { DrainTimeout } from '../inference-gate.ts';
import { controlGuard } from '../middleware.ts';
import { ReplicaRouter } from '../../engines/replicas.ts';

/** Seconds `POST /admin/inference/pause` waits for in-flight calls by default (the Python Polar's default). */
export const DEFAULT_PAUSE_TIMEOUT_S = 300;

/** Register the control routes on `app`; returns the `[methods, path]` pairs for the 405 table. */
export function registerAdminRoutes(app: Hono<Env>, rt: ProxyRuntime): Array<[string[], string]> {
  const { gate } = rt;
  app.get('/sessions/:id/completions', controlGuard(rt, 'captures'), (c) => {
    const id = c.req.param('id');
    return c.json({ session_id: id, completions: rt.deps.store.completions.listBySession(id) });
  });
  app.use('/admin/*', controlGuard(rt, 'admin'));
  /** The Python Polar's generation status `{paused, inflight, base_url, engine}` plus our policy_version. */
  const generationStatus = () => {
    const id = rt.deps.engine.id;
    const at = id.indexOf('@');
    return {
      paused: gate.isPaused, inflight: gate.inFlightCount,
      base_url: at >= 0 ? id.slice(at + 1) : null, engine: at >= 0 ? id.slice(0, at) : id,
      policy_version: gate.policyVersion,
    };
  };
  app.get('/admin/inference/status', (c) => c.json(generationStatus()));
  // ?timeout_seconds= (default 300, as in the Python Polar): 504 when in-flight calls have not drained by then.
  app.post('/admin/inference/pause', async (c) => {
    const raw = c.req.query('timeout_seconds');
    const timeoutSeconds = raw === undefined ? DEFAULT_PAUSE_TIMEOUT_S : Number(raw);
    if (!Number.isFinite(timeoutSeconds) || timeoutSeconds <= 0) throw new GatewayError('invalid-request', `timeout_seconds must be a positive number of seconds, got ${JSON.stringify(raw)}`);
    try {
      const { drained } = await gate.pause(timeoutSeconds * 1000);
      return c.json({ ...generationStatus(), paused: true, drained_in_flight: drained });
    } catch (error) {
      if (error instanceof DrainTimeout) return c.json({ detail: error.message, error: error.message, ...generationStatus() }, 504);
      throw error;
    }
  });
  app.post('/admin/inference/resume', (c) => {
    gate.resume();
    return c.json({ ...generationStatus(), paused: false });
  });
  app.post('/admin/policy_version', async (c) => {
    const body = (await readJsonText(rt, c)).body as { policy_version?: unknown } | null;
    const version = body?.policy_version;
    if (typeof version !== 'string' && typeof version !== 'number') throw new GatewayError('invalid-request', 'body must be {"policy_version": string | number}');
    gate.setPolicyVersion(String(version));
    return c.json({ policy_version: gate.policyVersion, paused: gate.isPaused });
  });
  // Engine replicas (engines/replicas.ts): their state, and draining one ({"url": ..., "draining": true|false}).
  const router = () => {
    const engine = rt.deps.engine;
    if (!(engine instanceof ReplicaRouter)) throw new GatewayError('not-found', 'the engine has no replicas (set engine.urls to two or more URLs)');
    return engine;
  };
  app.get('/admin/engine/replicas', (c) => c.json({ replicas: router().replicas() }));
  app.post('/admin/engine/replicas/drain', async (c) => {
    const body = (await readJsonText(rt, c)).body as { url?: unknown; draining?: unknown } | null;
    if (typeof body?.url !== 'string') throw new GatewayError('invalid-request', 'body.url must be the URL of an engine replica');
    if (body.draining !== undefined && typeof body.draining !== 'boolean') throw new GatewayError('invalid-request', 'body.draining must be a boolean (default true)');
    const replica = router().setDraining(body.url, body.draining ?? true);
    return c.json({ replica, replicas: router().replicas() });
  });
  return [
    [['GET'], '/admin/engine/replicas'],
    [['POST'], '/admin/engine/replicas/drain'],
    [['GET'], '/sessions/:id/completions'],
    [['GET'], '/admin/inference/status'],
    ...['/admin/inference/pause', '/admin/inference/resume', '/admin/policy_version'].map((path): [string[], string] => [['POST'], path]),
  ];
}
