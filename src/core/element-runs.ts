/**
 * What a per-element stage made of each element of the last array it was given, by that array's first element. An
 * agent session sends its whole conversation every call, and the decoders hand back the same objects for the turns
 * it had already (dialects/shared/decode-memo.ts), so a call's leading elements are the previous call's very objects:
 * a stage takes their results from here with one identity compare each, instead of a WeakMap lookup each (0.1–0.4 µs
 * inside a busy proxy, ~150 µs per stage at turn 200 of a Claude Code session, bench/README.md#session-9).
 * Sound only for stages whose result for an element depends on the element alone (and on options the caller keys by
 * itself). Entries live as long as the first element (a WeakMap): nothing to evict.
 * Source: https://tc39.es/ecma262/#sec-weakmap-objects
 */
export interface ElementRun<I, O> {
  inputs: readonly I[];
  /** What each input became (same length as `inputs`). */
  outputs: readonly O[];
}

export class ElementRuns<I extends object, O> {
  private readonly runs = new WeakMap<I, ElementRun<I, O>>();

  /**
   * The last run over an array that started with `inputs[0]`, and how many leading elements of `inputs` are its very
   * objects at the same indices (their outputs are `run.outputs[0 .. shared)`). `shared` is 0 when there is no run.
   */
  shared(inputs: readonly I[]): { run: ElementRun<I, O> | undefined; shared: number } {
    const first = inputs[0];
    const run = first === undefined ? undefined : this.runs.get(first);
    if (run === undefined) return { run, shared: 0 };
    const limit = Math.min(run.inputs.length, inputs.length);
    let shared = 0;
    while (shared < limit && run.inputs[shared] === inputs[shared]) shared++;
    return { run, shared };
  }

  /** Keep this call's run (`inputs` and `outputs` must not be mutated afterwards). */
  keep(inputs: readonly I[], outputs: readonly O[]): void {
    if (inputs.length > 0) this.runs.set(inputs[0]!, { inputs, outputs });
  }
}
