/**
 * Control endpoints: `GET /sessions/{id}/completions` (a session's records), `POST /admin/inference/pause`,
 * `POST /admin/inference/resume`, `POST /admin/policy_version {policy_version}`. Access per admin-access.ts, enforced
 * by `controlGuard` (middleware.ts).
 */
import type { Hono } from 'hono';
import { GatewayError } from '../../core/errors.ts';
import { readJsonText, type Env, type ProxyRuntime } from '../context.ts';
import { controlGuard } from '../middleware.ts';

/** Register the control routes on `app`; returns the `[methods, path]` pairs for the 405 table. */
export function registerAdminRoutes(app: Hono<Env>, rt: ProxyRuntime): Array<[string[], string]> {
  const { gate } = rt;
  app.get('/sessions/:id/completions', controlGuard(rt, 'captures'), (c) => {
    const id = c.req.param('id');
    return c.json({ session_id: id, completions: rt.deps.store.completions.listBySession(id) });
  });
  app.use('/admin/*', controlGuard(rt, 'admin'));
  app.post('/admin/inference/pause', async (c) => {
    const { drained } = await gate.pause();
    return c.json({ paused: true, drained_in_flight: drained, policy_version: gate.policyVersion });
  });
  app.post('/admin/inference/resume', (c) => {
    gate.resume();
    return c.json({ paused: false, policy_version: gate.policyVersion });
  });
  app.post('/admin/policy_version', async (c) => {
    const body = (await readJsonText(rt, c)).body as { policy_version?: unknown } | null;
    const version = body?.policy_version;
    if (typeof version !== 'string' && typeof version !== 'number') throw new GatewayError('invalid-request', 'body must be {"policy_version": string | number}');
    gate.setPolicyVersion(String(version));
    return c.json({ policy_version: gate.policyVersion, paused: gate.isPaused });
  });
  return [
    [['GET'], '/sessions/:id/completions'],
    ...['/admin/inference/pause', '/admin/inference/resume', '/admin/policy_version'].map((path): [string[], string] => [['POST'], path]),
  ];
}
