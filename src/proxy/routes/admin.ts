/**
 * Control endpoints: `GET /sessions/{id}/completions` (a session's records), `GET /admin/inference/status`,
 * `POST /admin/inference/pause?timeout_seconds=` or `{"timeout_s"}` (504 when in-flight calls have not drained in time;
 * the gate stays paused), `POST /admin/inference/resume` (an optional body as the rollout server's: unknown keys and bad
 * JSON are 400s, nothing paused or resumed), `POST /admin/policy_version {policy_version}`. Access per admin-access.ts, enforced
 * by `controlGuard` (middleware.ts).
 */
import type { Context, Hono } from 'hono';
import { GatewayError } from '../../core/errors.ts';
import { readJsonText, type Env, type ProxyRuntime } from '../context.ts';
import { DrainTimeout } from '../inference-gate.ts';
import { controlGuard } from '../middleware.ts';
import { ReplicaRouter } from '../../engines/replicas.ts';

/** Seconds `POST /admin/inference/pause` waits for in-flight calls by default (the Python Polar's default). */
export const DEFAULT_PAUSE_TIMEOUT_S = 300;

/**
 * The optional JSON object body of a pause or resume call: none, an empty one or `{}` means the defaults (the Python
 * Polar's clients and our rollout server's fan-out send none or `{}`). A body that is not a JSON object, or names a key
 * outside `allowed`, is refused before anything changes, so a typo never pauses with the default instead.
 * @throws GatewayError 'invalid-request' (400) naming the key, or saying the body is not JSON.
 */
async function optionalBody(c: Context<Env>, allowed: readonly string[]): Promise<Record<string, unknown>> {
  const text = await c.req.text();
  if (text.trim() === '') return {};
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (thrown) {
    throw new GatewayError('invalid-request', `malformed JSON body: ${(thrown as Error).message}`);
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new GatewayError('invalid-request', `body must be a JSON object${allowed.length > 0 ? ` with at most ${allowed.join(', ')}` : ' (empty: this call takes no fields)'}`);
  for (const key of Object.keys(body)) {
    if (!allowed.includes(key)) throw new GatewayError('invalid-request', `${key}: unknown field (allowed: ${allowed.length > 0 ? allowed.join(', ') : 'none'})`);
  }
  return body as Record<string, unknown>;
}

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
  // ?timeout_seconds= (default 300, as in the Python Polar), or {"timeout_s"} in the body as the rollout server's
  // /rollout/admin/inference/pause takes it: 504 when in-flight calls have not drained by then.
  app.post('/admin/inference/pause', async (c) => {
    const body = await optionalBody(c, ['timeout_s']);
    const query = c.req.query('timeout_seconds');
    if (query !== undefined && body.timeout_s !== undefined) throw new GatewayError('invalid-request', 'give the drain timeout once: ?timeout_seconds= or body.timeout_s, not both');
    const raw = query ?? body.timeout_s;
    const timeoutSeconds = raw === undefined ? DEFAULT_PAUSE_TIMEOUT_S : typeof raw === 'string' || typeof raw === 'number' ? Number(raw) : NaN;
    const name = query !== undefined ? 'timeout_seconds' : 'timeout_s';
    if (!Number.isFinite(timeoutSeconds) || timeoutSeconds <= 0) throw new GatewayError('invalid-request', `${name} must be a positive number of seconds, got ${JSON.stringify(raw)}`);
    try {
      const { drained } = await gate.pause(timeoutSeconds * 1000);
      return c.json({ ...generationStatus(), paused: true, drained_in_flight: drained });
    } catch (error) {
      if (error instanceof DrainTimeout) return c.json({ detail: error.message, error: error.message, ...generationStatus() }, 504);
      throw error;
    }
  });
  app.post('/admin/inference/resume', async (c) => {
    await optionalBody(c, []);
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
