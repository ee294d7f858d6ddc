/**
 * Simulator behaviour scripts: weighted variants of scripted steps (`shell: cmd` → a call to the harness's shell-like
 * tool, `say: text` → a final answer, optional `think`), with an optional `seed` mixed into the variant draw. One schema
 * for `polar sim --scripts`, the simulator's `POST /sim/scripts` and a task file's `sim_script:`.
 * Semantics: src/sim/script.ts.
 */
import { z } from 'zod';

export const scriptStepSchema = z.union([
  z.strictObject({ think: z.string().optional(), shell: z.string().min(1) }),
  z.strictObject({ think: z.string().optional(), say: z.string() }),
]);

/** A variant; `weight` is a relative probability (default 1; 0 keeps it in the file but never draws it). */
export const scriptVariantSchema = z.strictObject({ weight: z.number().nonnegative().default(1), steps: z.array(scriptStepSchema) });

export const behaviourScriptSchema = z.strictObject({
  variants: z.record(z.string(), scriptVariantSchema).refine((v) => Object.keys(v).length > 0, 'needs at least one variant'),
  /** Seed mixed into the variant hash, so one task can be re-drawn. */
  seed: z.union([z.string(), z.number()]).optional(),
  /**
   * Key of the simulator's learnable variant policy (src/sim/variant-policy.ts) this task's choice uses; tasks sharing
   * a key share logits (e.g. one task submitted under a new task id each training step). Default: the task id.
   */
  policy: z.string().min(1).optional(),
}).refine((s) => Object.values(s.variants).some((v) => v.weight > 0), 'at least one variant needs a weight > 0');

export type ScriptStep = z.infer<typeof scriptStepSchema>;
export type BehaviourScript = z.infer<typeof behaviourScriptSchema>;
