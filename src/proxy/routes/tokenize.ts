/**
 * `POST /v1/tokenize`, the Python Polar gateway's budget endpoint (NVIDIA-NeMo/ProRL-Agent-Server
 * src/polar/gateway/server.py `tokenize_request`): an OpenAI Chat body (`messages`, `tools`; `model` may be left out)
 * → `{count}`, the prompt length in tokens as the engine renders it with the generation prompt. Nothing is recorded
 * and no completion is made. It needs the session key, as every model call on this proxy does.
 */
import type { Context } from 'hono';
import { GatewayError } from '../../core/errors.ts';
import { decodeBody, readJsonText, resolveSession, type Env, type ProxyRuntime } from '../context.ts';
import type { DialectRoute } from '../dialect-table.ts';

export function tokenizeHandler(rt: ProxyRuntime, route: DialectRoute) {
  return async (c: Context<Env>) => {
    c.set('dialect', route.dialect);
    const session = resolveSession(rt, c);
    const { body: raw } = await readJsonText(rt, c);
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new GatewayError('invalid-request', 'body must be a JSON object');
    let served: string;
    try {
      served = rt.deps.engine.servedModel();
    } catch {
      throw new GatewayError('upstream', 'the engine has not been probed yet');
    }
    const ir = decodeBody(rt, route, { model: served, ...(raw as Record<string, unknown>) }, new URL(c.req.url));
    const count = await rt.deps.engine.countTokens(ir, { sessionId: session.session_id, taskId: session.task_id, requestId: rt.newId('tokenize') });
    return c.json({ count });
  };
}
