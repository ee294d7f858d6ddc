/**
 * Model listing and the root: `GET /v1/models` (Anthropic shape when `anthropic-version` is sent, else OpenAI),
 * each dialect's own model endpoints (Gemini `/v1beta/models[/{model}]`), and `HEAD|GET /` (liveness + engine stats).
 */
import type { Context } from 'hono';
import { GatewayError } from '../../core/errors.ts';
import type { Env, ProxyRuntime } from '../context.ts';
import type { DialectRoute } from '../dialect-table.ts';

/** The served model in the caller's list shape. */
export function listModels(rt: ProxyRuntime, c: Context<Env>, encodeList?: (served: string) => unknown): Response {
  let served: string;
  try {
    served = rt.deps.engine.servedModel();
  } catch {
    throw new GatewayError('upstream', 'the engine has not been probed yet');
  }
  if (encodeList) return c.json(encodeList(served) as object);
  // https://docs.anthropic.com/en/api/models-list vs https://platform.openai.com/docs/api-reference/models/list
  if (c.req.header('anthropic-version')) {
    c.set('dialect', rt.routes[0]!.dialect);
    return c.json({ data: [{ type: 'model', id: served, display_name: served, created_at: new Date(0).toISOString() }], has_more: false, first_id: served, last_id: served });
  }
  return c.json({ object: 'list', data: [{ id: served, object: 'model', created: 0, owned_by: 'polar' }] });
}

/** A dialect's model endpoints, as `[path, handler]` pairs to register with GET. */
export function dialectModelRoutes(rt: ProxyRuntime, route: DialectRoute, spec: NonNullable<DialectRoute['models']>): Array<[string, (c: Context<Env>) => Response]> {
  return [
    ...spec.list.map((path): [string, (c: Context<Env>) => Response] => [path, (c) => (c.set('dialect', route.dialect), listModels(rt, c, spec.encodeList))]),
    ...spec.one.map((path): [string, (c: Context<Env>) => Response] => [path, (c) => (c.set('dialect', route.dialect), c.json(spec.encodeOne(c.req.param('model') ?? '') as object))]),
  ];
}

/** `HEAD|GET /` (and `/s/{sid}`): liveness plus the engine's id and stats. */
export function rootHandler(rt: ProxyRuntime) {
  return (c: Context<Env>) =>
    c.req.method === 'HEAD'
      ? c.body(null, 200)
      : c.json({ ok: true, service: 'polar-proxy', engine: rt.deps.engine.id, ...(rt.deps.engine.stats ? { engine_stats: rt.deps.engine.stats() } : {}) });
}
