/**
 * Lay a task's own sampling (ProxySessionInfo.sampling; src/core/contracts/task-sampling.ts) over a decoded request:
 * temperature, top_p, top_k, min_p and seed replace the request's; max tokens is the smaller of the two; the task's stop
 * strings are added to the request's. The record keeps the request as the engine got it, so `ir_request.sampling`
 * says which parameters the tokens were sampled under.
 */
import type { TaskSampling } from '../core/contracts/task-sampling.ts';
import type { IRRequest } from '../core/ir.ts';

/** `ir` with the task's sampling applied (the same object when the task sets nothing). */
export function withTaskSampling(ir: IRRequest, task: TaskSampling): IRRequest {
  const sampling = { ...ir.sampling };
  if (task.temperature !== undefined) sampling.temperature = task.temperature;
  if (task.topP !== undefined) sampling.topP = task.topP;
  if (task.topK !== undefined) sampling.topK = task.topK;
  if (task.minP !== undefined) sampling.minP = task.minP;
  if (task.seed !== undefined) sampling.seed = task.seed;
  if (task.maxTokens !== undefined) sampling.maxTokens = sampling.maxTokens === undefined ? task.maxTokens : Math.min(sampling.maxTokens, task.maxTokens);
  if (task.stop !== undefined) sampling.stop = [...new Set([...(sampling.stop ?? []), ...task.stop])];
  return { ...ir, sampling };
}
