/**
 * The simulator's learnable variant policy over HTTP (src/sim/variant-policy.ts):
 * - `POST /update_weights {policy?: {policy_key: {variant: logit}}, weight_version?: string}`: load logits (merged key
 *   by key over the current ones) and move to `weight_version` (default: the next version), like SGLang's
 *   `/update_weights_from_disk`; answers `{success, message, weight_version}`. Unknown fields and non-finite logits are
 *   400s naming their path.
 * - `GET /sim/policy`: every version's logits and the tasks' policy keys, seeds and variants (what
 *   `polar trace verify --sim-policy` re-scores with).
 * - `POST /sim/policy/choices {session_ids: string[]}` → `{choices: {session_id: {policy, variant, logprob, version} |
 *   null}}`: the variant each session drew and its log-probability (a trainer's view of the choice).
 */
import { json, readBody, SimHttpError } from '../request.ts';
import type { SimServer } from '../server.ts';

type Handler = (request: Request) => Promise<Response> | Response;
type Method = (handler: Handler) => Record<string, Handler>;

/** Bun.serve `routes` entries; `post`/`get` wrap a handler with the simulator's error handling. */
export function policyRoutes(sim: SimServer, post: Method, get: Method): Record<string, Record<string, Handler>> {
  return {
    '/update_weights': post(async (r) => {
      const body = await readBody(r);
      for (const key of Object.keys(body)) if (key !== 'policy' && key !== 'weight_version') throw new SimHttpError(400, `${key}: unknown field (expected policy, weight_version)`);
      const requested = body.weight_version;
      if (requested !== undefined && typeof requested !== 'string') throw new SimHttpError(400, 'weight_version must be a string');
      const next = requested ?? sim.nextVersion();
      if (body.policy !== undefined) {
        try {
          sim.policy.load(body.policy, next);
        } catch (error) {
          throw new SimHttpError(400, error instanceof Error ? error.message : String(error));
        }
      }
      const version = sim.updateWeights(next);
      return json({ success: true, message: 'Succeeded to update model weights.', weight_version: version });
    }),
    '/sim/policy': get(() => json(sim.policy.export(sim.policyVersion))),
    '/sim/policy/choices': post(async (r) => {
      const ids = (await readBody(r)).session_ids;
      if (!Array.isArray(ids) || !ids.every((x) => typeof x === 'string')) throw new SimHttpError(400, 'session_ids must be an array of strings');
      return json({ choices: Object.fromEntries(ids.map((id) => [id, sim.policy.choiceOf(id)])) });
    }),
  };
}
