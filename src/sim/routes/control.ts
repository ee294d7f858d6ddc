/**
 * Control endpoints of the engines the simulator stands in for: pause/resume (SGLang `/pause_generation`,
 * `/continue_generation`; vLLM `/pause`, `/resume`, `/is_paused`), weight updates and versions (SGLang
 * `/update_weights_from_disk`, `/update_weight_version`, `/get_weight_version`; vLLM `/weight_info`), and the
 * simulator's own `POST /sim/scripts {task_id, script}`.
 */
import { json, readBody, SimHttpError } from '../request.ts';
import type { SimServer } from '../server.ts';

type Handler = (request: Request) => Promise<Response> | Response;
type Method = (handler: Handler) => Record<string, Handler>;

/** Bun.serve `routes` entries; `post`/`get` wrap a handler with the simulator's error handling. */
export function controlRoutes(sim: SimServer, post: Method, get: Method): Record<string, Record<string, Handler>> {
  const pause = async (request: Request) => {
    sim.timing.pause();
    if (new URL(request.url).searchParams.get('mode') === 'wait') await sim.timing.drained();
    return json({ status: 'paused' });
  };
  const resume = () => (sim.timing.resume(), json({ status: 'resumed' }));
  return {
    '/pause_generation': post(pause),
    '/continue_generation': post(resume),
    '/pause': post(pause),
    '/resume': post(resume),
    '/is_paused': get(() => json({ is_paused: sim.timing.paused })),
    '/update_weights_from_disk': post(async (r) => {
      const body = await readBody(r);
      const requested = body.weight_version;
      if (requested !== undefined && typeof requested !== 'string') throw new SimHttpError(400, 'weight_version must be a string');
      const version = sim.updateWeights(requested);
      return json({ success: true, message: 'Succeeded to update model weights.', num_paused_requests: 0, weight_version: version });
    }),
    '/update_weight_version': post(async (r) => {
      const body = await readBody(r);
      if (typeof body.new_version !== 'string') throw new SimHttpError(400, 'new_version must be a string');
      const version = sim.updateWeights(body.new_version);
      return json({ success: true, message: `Weight version updated to ${version}`, new_version: version });
    }),
    '/get_weight_version': get(() => json({ weight_version: sim.policyVersion })),
    '/weight_info': get(() => json({ weight_version: sim.policyVersion, model: sim.servedModelName })),
    '/sim/scripts': post(async (r) => {
      const body = await readBody(r);
      if (typeof body.task_id !== 'string' || body.task_id === '') throw new SimHttpError(400, 'task_id must be a non-empty string');
      try {
        sim.registerScript(body.task_id, body.script);
      } catch (error) {
        throw new SimHttpError(400, error instanceof Error ? error.message : String(error));
      }
      return json({ ok: true, task_id: body.task_id });
    }),
  };
}
